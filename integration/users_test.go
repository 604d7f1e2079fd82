package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// The three users of a Spark node with the daemon, as docs and the unit
// file describe them: the daemon, the executor (Spark's user) and the
// external shuffle service (the reader), all members of one group that
// owns the Spark local dirs. Numeric ids need no passwd entries: the
// kernel checks numbers only.
const (
	sparkGID  = 61000
	daemonUID = 61001
	execUID   = 61002
	readerUID = 61003
)

var usersID = shufflefile.ID{Shuffle: 1, Map: 1}

// userHelpers are the helper modes of this file (runHelper dispatches).
var userHelpers = map[string]func(args []string) error{
	"executor": executorHelper,
	"reader":   readerHelper,
}

// executorHelper acts as a Spark executor: args socket, local dir, the
// executor's umask, what it does to the sub-dir it makes ("g+w": Spark
// with spark.shuffle.service.removeShuffle, an exact chmod adding group
// write, which clears the setgid bit; "none": Spark without it; or an
// octal mode, a dir someone else changed), and what to expect: "commit",
// or "refused:local" / "refused:sub" (the registration refused, naming
// the local dir or the sub-dir). Like Spark's DiskBlockManager it makes
// its blockmgr dir (mkdir under its umask, in the setgid parent) and one
// hashed sub-dir before the daemon writes, registers, commits one map
// output through the daemon, then makes its own file in every sub-dir the
// output's files are in.
func executorHelper(args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("executor: want socket, local dir, umask, sub-dir change, expectation; got %q", args)
	}
	socket, local, expect := args[0], args[1], args[4]
	umask, err := strconv.ParseUint(args[2], 8, 32)
	if err != nil {
		return err
	}
	change := args[3]
	syscall.Umask(int(umask))
	if err := os.Mkdir(local, 0o777); err != nil {
		return err
	}
	l := shufflefile.SparkHashed{LocalDirs: []string{local}, SubDirs: 64}
	sparkSub := l.Dir(shufflefile.IndexName(usersID))
	if err := os.Mkdir(sparkSub, 0o777); err != nil {
		return err
	}
	switch change {
	case "none":
	case "g+w":
		fi, err := os.Stat(sparkSub)
		if err != nil {
			return err
		}
		if err := os.Chmod(sparkSub, fi.Mode().Perm()|0o020); err != nil {
			return err
		}
	default:
		mode, err := strconv.ParseUint(change, 8, 32)
		if err != nil {
			return err
		}
		if err := os.Chmod(sparkSub, os.FileMode(mode)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.Dial(ctx, socket)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Register(ctx, protocol.RegisterExecutor{AppID: "app", ExecutorID: "1", LocalDirs: []string{local}, SubDirs: 64})
	if named, ok := strings.CutPrefix(expect, "refused:"); ok {
		want := local
		if named == "sub" {
			want = sparkSub
		}
		if protocol.CodeOf(err) != protocol.CodePermissionDenied || !strings.Contains(err.Error(), want+":") {
			return fmt.Errorf("Register under umask %#o, sub-dir change %s = %v, want PermissionDenied naming %s", umask, change, err, want)
		}
		return nil
	}
	if err != nil {
		return err
	}
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: usersID.Shuffle, MapID: usersID.Map, NumPartitions: 2, Kind: protocol.KindOpaque, Codec: "none"})
	if err != nil {
		return err
	}
	if err := mo.WriteOpaque(ctx, []byte("abcde"), []int64{0, 2, 5}); err != nil {
		return err
	}
	if _, err := mo.Commit(ctx); err != nil {
		return err
	}
	for i, name := range []string{shufflefile.DataName(usersID), shufflefile.IndexName(usersID), shufflefile.ChecksumName(usersID, checksum.Adler32)} {
		spill := filepath.Join(l.Dir(name), fmt.Sprintf("temp_shuffle_%d", i))
		if err := os.WriteFile(spill, []byte("spill"), 0o644); err != nil {
			return fmt.Errorf("the executor cannot make its own file beside the daemon's %s: %w", name, err)
		}
	}
	return nil
}

// readerHelper acts as the external shuffle service: it reads the map
// output back, verifies it, and removes its files.
func readerHelper(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("reader: want the local dir, got %q", args)
	}
	l := shufflefile.SparkHashed{LocalDirs: []string{args[0]}, SubDirs: 64}
	mo, err := shufflefile.Open(vfs.Default, l, usersID, checksum.Adler32)
	if err != nil {
		return fmt.Errorf("the shuffle service cannot open the output: %w", err)
	}
	if err := mo.Verify(); err != nil {
		mo.Close()
		return err
	}
	p, err := mo.ReadPartition(1)
	mo.Close()
	if err != nil || string(p) != "cde" {
		return fmt.Errorf("partition 1 = %q, %v; want %q", p, err, "cde")
	}
	for _, name := range []string{shufflefile.IndexName(usersID), shufflefile.DataName(usersID), shufflefile.ChecksumName(usersID, checksum.Adler32)} {
		if err := os.Remove(shufflefile.Path(l, name)); err != nil {
			return fmt.Errorf("the shuffle service cannot remove %s: %w", name, err)
		}
	}
	return nil
}

// runAs runs the helper mode as uid with the spark group.
func runAs(t *testing.T, uid uint32, gid uint32, mode string, args ...string) error {
	t.Helper()
	cmd := exec.Command(helperBinary(t), args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{sparkGID}}}
	out, err := cmd.CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "ok" {
		return fmt.Errorf("%s as uid %d: %v: %s", mode, uid, err, got)
	}
	return nil
}

// requireRoot skips a test that needs root to run processes as other
// users; CI runs as root, so it runs there.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs the daemon, an executor and a reader as three other uids (CI runs as root)")
	}
}

// TestSeparateUsers runs the daemon, an executor and the shuffle service
// as three uids that share the spark group, set up as the README's
// operator section says: the executor (umask 007, removeShuffle on) makes
// its blockmgr dir and a sub-dir as Spark does, the daemon commits into it
// and into sub-dirs it makes, the executor then makes its own files beside
// the daemon's, and the reader reads the output and removes it. Setups that
// cannot work are refused at registration, naming the dir at fault: a
// blockmgr dir made under umask 022 (not group-writable), and a sub-dir
// that is 0755.
func TestSeparateUsers(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name, umask, change, expect string
	}{
		{"umask-007", "007", "g+w", "commit"},
		{"umask-002-no-remove-shuffle", "002", "none", "commit"},
		{"umask-022", "022", "g+w", "refused:local"},
		{"sub-dir-0755", "007", "755", "refused:sub"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, err := os.MkdirTemp("", "shuffled-users-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			spark := filepath.Join(base, "spark") // the allowed root: group spark, setgid
			root := filepath.Join(base, "root")   // the daemon's own root
			run := filepath.Join(base, "run")     // the socket's dir, as /run/shuffled
			for _, d := range []struct {
				path     string
				uid, gid int
				mode     os.FileMode
			}{
				{base, 0, 0, 0o755},
				{spark, 0, sparkGID, 0o770 | os.ModeSetgid},
				{root, daemonUID, daemonUID, 0o750},
				{run, daemonUID, daemonUID, 0o755},
			} {
				if err := os.MkdirAll(d.path, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(d.path, d.uid, d.gid); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(d.path, d.mode); err != nil {
					t.Fatal(err)
				}
			}
			socket := filepath.Join(run, "shuffled.sock")
			startDaemon(t, config{socket: socket, root: root,
				args: []string{"--allowed-roots", spark, "--allowed-gids", fmt.Sprint(sparkGID), "--socket-mode", "0666"},
				cred: &syscall.Credential{Uid: daemonUID, Gid: daemonUID, Groups: []uint32{sparkGID}}})

			local := filepath.Join(spark, "blockmgr-1")
			if err := runAs(t, execUID, sparkGID, "executor", socket, local, tc.umask, tc.change, tc.expect); err != nil {
				t.Fatal(err)
			}
			if tc.expect != "commit" {
				return
			}
			l := shufflefile.SparkHashed{LocalDirs: []string{local}, SubDirs: 64}
			sparkSub := l.Dir(shufflefile.IndexName(usersID))
			for _, name := range []string{shufflefile.DataName(usersID), shufflefile.IndexName(usersID), shufflefile.ChecksumName(usersID, checksum.Adler32)} {
				path := shufflefile.Path(l, name)
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				st := fi.Sys().(*syscall.Stat_t)
				if fi.Mode().Perm() != 0o644 || st.Uid != daemonUID || st.Gid != sparkGID {
					t.Errorf("%s: mode %v uid %d gid %d, want 0644, the daemon's uid %d, the spark group %d", name, fi.Mode(), st.Uid, st.Gid, daemonUID, sparkGID)
				}
				if dir := filepath.Dir(path); dir != sparkSub {
					di, err := os.Stat(dir)
					if err != nil {
						t.Fatal(err)
					}
					if dst := di.Sys().(*syscall.Stat_t); di.Mode().Perm() != 0o775 || dst.Gid != sparkGID {
						t.Errorf("sub-dir %s the daemon made: mode %v gid %d, want 0775 and the spark group %d", dir, di.Mode(), dst.Gid, sparkGID)
					}
				}
			}
			if err := runAs(t, readerUID, readerUID, "reader", local); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{shufflefile.DataName(usersID), shufflefile.IndexName(usersID)} {
				if _, err := os.Stat(shufflefile.Path(l, name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s still there after the shuffle service removed it: %v", name, err)
				}
			}
		})
	}
}
