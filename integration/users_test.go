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

// executorHelper acts as a Spark executor: args socket, local dir, the mode
// of the sub-dir it makes first (as Spark does, before the daemon writes)
// and what to expect: "commit" or "refused". It makes its blockmgr dir
// 0770, registers it, commits one map output through the daemon, then
// makes its own file in every sub-dir the output's files are in.
func executorHelper(args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("executor: want socket, local dir, sub-dir mode, expectation; got %q", args)
	}
	socket, local, expect := args[0], args[1], args[3]
	subMode, err := strconv.ParseUint(args[2], 8, 32)
	if err != nil {
		return err
	}
	if err := os.Mkdir(local, 0o770); err != nil {
		return err
	}
	if err := os.Chmod(local, 0o770); err != nil { // Spark's createDirWithPermission770
		return err
	}
	l := shufflefile.SparkHashed{LocalDirs: []string{local}, SubDirs: 64}
	sparkSub := l.Dir(shufflefile.IndexName(usersID))
	if err := os.Mkdir(sparkSub, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(sparkSub, os.FileMode(subMode)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.Dial(ctx, socket)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Register(ctx, protocol.RegisterExecutor{AppID: "app", ExecutorID: "1", LocalDirs: []string{local}, SubDirs: 64})
	if expect == "refused" {
		if protocol.CodeOf(err) != protocol.CodePermissionDenied || !strings.Contains(err.Error(), sparkSub) {
			return fmt.Errorf("Register with a %#o sub-dir = %v, want PermissionDenied naming %s", subMode, err, sparkSub)
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
// operator section says: the executor makes its blockmgr dir and a
// group-writable sub-dir as Spark does (spark.shuffle.service.removeShuffle),
// the daemon commits into it and into sub-dirs it makes, the executor then
// makes its own files beside the daemon's, and the reader reads the output
// and removes it. A sub-dir Spark made 0755 (removeShuffle off) is refused
// at registration, naming it.
func TestSeparateUsers(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name    string
		subMode string
		expect  string
	}{
		{"group-writable", "775", "commit"},
		{"spark-0755", "755", "refused"},
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
			if err := runAs(t, execUID, sparkGID, "executor", socket, local, tc.subMode, tc.expect); err != nil {
				t.Fatal(err)
			}
			if tc.expect == "refused" {
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
