package shufflefile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/testkit"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// The tests here play a hostile peer: the executor that owns the
// directories the daemon writes into, planting FIFOs under the names a
// commit reads and swapping the daemon's temp files for hard links to
// another client's files. Each runs through vfs.Default and through a
// Root's confined FS (what the daemon uses for a client's Spark local
// dirs).

// hostileFS returns the file systems to run a hostile test through over
// the flat directory dir: vfs.Default with Flat(dir), and a Root's FS with
// the Root (its owners: the test's uid) over inner.
func hostileFS(t *testing.T, inner vfs.FS, dir string) map[string]func() (vfs.FS, Layout) {
	return map[string]func() (vfs.FS, Layout){
		"default": func() (vfs.FS, Layout) { return inner, Flat(dir) },
		"root": func() (vfs.FS, Layout) {
			r, err := OpenRoot(inner, Flat(dir), []uint32{uint32(os.Getuid())})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r.FS(), r
		},
	}
}

// doResult is what Commit.Do returns besides its error.
type doResult struct {
	lengths  []int64
	sums     []uint32
	existing bool
}

// doPromptly runs c.Do (promptly).
func doPromptly(t *testing.T, c *Commit, fifos ...string) (doResult, error) {
	t.Helper()
	return testkit.Promptly(t, "Commit.Do", fifos, func() (doResult, error) {
		l, s, ex, err := c.Do()
		return doResult{l, s, ex}, err
	})
}

// emptyDir removes what dir holds.
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o666); err != nil {
		t.Fatal(err)
	}
}

// wantFIFORefused checks that err refuses path as a FIFO.
func wantFIFORefused(t *testing.T, what string, err error, path string) {
	t.Helper()
	if !errors.Is(err, fs.ErrPermission) || !errors.Is(err, vfs.ErrRefused) ||
		!strings.Contains(fmtErr(err), path+" is a FIFO, not a regular file") {
		t.Errorf("%s = %v, want a refusal saying %s is a FIFO, not a regular file", what, err, path)
	}
}

// TestCommitRefusesFIFO plants a FIFO under each name a commit (or Open)
// reads: the commit must fail at once with an error naming the FIFO, not
// block in open(2) forever holding the output's lock, and leave no temp
// file.
func TestCommitRefusesFIFO(t *testing.T) {
	id := ID{Shuffle: 0, Map: 5}
	attempt := parts("abc", "de")
	empty := parts("", "")
	for _, c := range []struct {
		name string
		a    attemptData
		// plant commits what the case needs and plants the FIFO; it
		// returns its path.
		plant func(t *testing.T, l Layout) string
		// temp plants the FIFO as the data temp file instead.
		temp bool
		// open reads the output with Open instead of committing.
		open bool
	}{
		{name: "index", a: attempt, plant: func(t *testing.T, l Layout) string {
			p := Path(l, IndexName(id))
			mkfifo(t, p)
			return p
		}},
		{name: "checksum of a committed output", a: attempt, plant: func(t *testing.T, l Layout) string {
			mustCommit(t, l, id, checksum.Adler32, attempt)
			p := Path(l, ChecksumName(id, checksum.Adler32))
			mkfifo(t, p)
			return p
		}},
		{name: "data of a committed empty output without checksum file", a: empty, plant: func(t *testing.T, l Layout) string {
			mustCommit(t, l, id, checksum.Adler32, empty)
			if err := os.Remove(Path(l, ChecksumName(id, checksum.Adler32))); err != nil {
				t.Fatal(err)
			}
			p := Path(l, DataName(id))
			mkfifo(t, p)
			return p
		}},
		{name: "data of a committed empty output", a: empty, plant: func(t *testing.T, l Layout) string {
			mustCommit(t, l, id, checksum.Adler32, empty)
			p := Path(l, DataName(id))
			mkfifo(t, p)
			return p
		}},
		{name: "data temp", a: attempt, temp: true},
		{name: "index read by Open", a: attempt, open: true, plant: func(t *testing.T, l Layout) string {
			mustCommit(t, l, id, checksum.Adler32, attempt)
			p := Path(l, IndexName(id))
			mkfifo(t, p)
			return p
		}},
		{name: "data read by Open", a: attempt, open: true, plant: func(t *testing.T, l Layout) string {
			mustCommit(t, l, id, checksum.Adler32, empty)
			p := Path(l, DataName(id))
			mkfifo(t, p)
			return p
		}},
		{name: "checksum read by Open", a: attempt, open: true, plant: func(t *testing.T, l Layout) string {
			mustCommit(t, l, id, checksum.Adler32, attempt)
			p := Path(l, ChecksumName(id, checksum.Adler32))
			mkfifo(t, p)
			return p
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for fsName, open := range hostileFS(t, vfs.Default, dir) {
				t.Run(fsName, func(t *testing.T) {
					emptyDir(t, dir)
					fsys, l := open()
					var fifo string
					if c.plant != nil {
						fifo = c.plant(t, Flat(dir))
					}
					if c.open {
						m, err := testkit.Promptly(t, "Open", []string{fifo}, func() (*MapOutput, error) { return Open(fsys, l, id, checksum.Adler32) })
						if err == nil {
							m.Close()
						}
						wantFIFORefused(t, "Open", err, fifo)
						return
					}
					cm := newCommit(t, fsys, l, id, checksum.Adler32, c.a)
					cm.FileMode = 0o644
					if c.temp {
						fifo = cm.DataTemp
						mkfifo(t, fifo)
					}
					_, err := doPromptly(t, cm, fifo)
					wantFIFORefused(t, "Commit.Do", err, fifo)
					if ts := temps(t, dir); len(ts) != 0 {
						t.Errorf("temp files left: %v", ts)
					}
				})
			}
		})
	}
}

// victim is another client's committed file, in a directory of its own,
// that a peer hard-links into its own directory.
type victim struct {
	path string
	data []byte
	mode fs.FileMode
	gid  uint32
}

func newVictim(t *testing.T, data []byte) *victim {
	t.Helper()
	v := &victim{path: filepath.Join(t.TempDir(), "shuffle_9_9_0.data"), data: data, mode: 0o600}
	if err := os.WriteFile(v.path, data, v.mode); err != nil {
		t.Fatal(err)
	}
	v.gid = uint32(os.Getgid())
	return v
}

// linkAt swaps what name names for a hard link to the victim.
func (v *victim) linkAt(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Error(err)
	}
	if err := os.Link(v.path, name); err != nil {
		t.Error(err)
	}
}

// check checks that the victim is as it was: contents, mode, group, and
// no other name left (the daemon removed the link at its temp name).
func (v *victim) check(t *testing.T) {
	t.Helper()
	fi, err := os.Stat(v.path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != v.mode || st.Gid != v.gid {
		t.Errorf("the victim's file is now mode %v group %d, want %v group %d: the daemon changed another client's file",
			fi.Mode().Perm(), st.Gid, v.mode, v.gid)
	}
	if st.Nlink != 1 {
		t.Errorf("the victim's file has %d links, want 1 (the peer's link at the temp name removed)", st.Nlink)
	}
	if b, err := os.ReadFile(v.path); err != nil || !bytes.Equal(b, v.data) {
		t.Errorf("the victim's file holds %q (%v), want %q", b, err, v.data)
	}
}

// groupDir gives dir a group other than the test's, where the test runs
// as root, so that a commit chowns what it makes there (and a chown by
// name would reach the victim).
func groupDir(t *testing.T, dir string) {
	t.Helper()
	if os.Getuid() != 0 {
		return
	}
	if err := os.Chown(dir, -1, 54321); err != nil {
		t.Fatal(err)
	}
}

// wantSwapRefused checks that err refuses tmp as swapped.
func wantSwapRefused(t *testing.T, what string, err error, tmp string) {
	t.Helper()
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(fmtErr(err), tmp+" is no longer the temp file this commit made") {
		t.Errorf("%s = %v, want a refusal saying %s is no longer the temp file this commit made", what, err, tmp)
	}
}

// TestCommitTempSwapped swaps each temp file of a commit, once the daemon
// has it (at the close of its descriptor), for a hard link to another
// client's file: the commit must fail naming the temp file, leave nothing
// (no committed file, no temp file), and leave the other file's mode,
// group and contents as they were.
func TestCommitTempSwapped(t *testing.T) {
	id := ID{Shuffle: 0, Map: 6}
	attempt := parts("abc", "de")
	for _, which := range []string{"data", "index", "checksum"} {
		t.Run(which, func(t *testing.T) {
			dir := t.TempDir()
			groupDir(t, dir)
			var swapped string
			var v *victim
			// The temp's name, by its final name's: the data temp is the
			// one the test staged.
			final := map[string]string{"data": DataName(id), "index": IndexName(id), "checksum": ChecksumName(id, checksum.CRC32)}[which]
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				base := filepath.Base(op.Path)
				if op.Kind == errorfs.OpClose && swapped == "" && strings.HasPrefix(base, final+".") && IsTempName(base) {
					swapped = op.Path
					v.linkAt(t, op.Path)
				}
				return nil
			})
			for fsName, open := range hostileFS(t, errorfs.New(vfs.Default, inj), dir) {
				t.Run(fsName, func(t *testing.T) {
					emptyDir(t, dir)
					swapped, v = "", newVictim(t, bytes.Join(attempt, nil))
					fsys, l := open()
					c := newCommit(t, fsys, l, id, checksum.CRC32, attempt)
					c.FileMode = 0o640
					_, err := doPromptly(t, c)
					if swapped == "" {
						t.Fatalf("the %s temp file was never closed: nothing swapped (Do() = %v)", which, err)
					}
					wantSwapRefused(t, "Commit.Do", err, swapped)
					v.check(t)
					if f := files(t, dir); len(f) != 0 {
						t.Errorf("files left after the failed commit: %v", f)
					}
				})
			}
		})
	}
}

// TestCommitDataTempLinked: a data temp file that a peer replaced, before
// the commit, with a hard link to another client's file (of the right
// length) is refused, naming it, and the other file keeps its mode and
// group.
func TestCommitDataTempLinked(t *testing.T) {
	id := ID{Shuffle: 0, Map: 7}
	attempt := parts("abc", "de")
	dir := t.TempDir()
	groupDir(t, dir)
	for fsName, open := range hostileFS(t, vfs.Default, dir) {
		t.Run(fsName, func(t *testing.T) {
			emptyDir(t, dir)
			v := newVictim(t, bytes.Join(attempt, nil))
			fsys, l := open()
			c := newCommit(t, fsys, l, id, checksum.CRC32, attempt)
			c.FileMode = 0o640
			v.linkAt(t, c.DataTemp)
			_, err := doPromptly(t, c)
			if !errors.Is(err, fs.ErrPermission) || !strings.Contains(fmtErr(err), c.DataTemp+" has 2 links") {
				t.Errorf("Commit.Do with a hard-linked data temp = %v, want a refusal saying %s has 2 links", err, c.DataTemp)
			}
			v.check(t)
			if f := files(t, dir); len(f) != 0 {
				t.Errorf("files left after the failed commit: %v", f)
			}
		})
	}
}

// TestReplaceFileTempSwapped: ReplaceFile fails, naming its temp file,
// when the temp file is swapped before its rename, and leaves path as it
// was and the other file untouched.
func TestReplaceFileTempSwapped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "registry")
	if err := os.WriteFile(path, []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	v := newVictim(t, []byte("victim"))
	var swapped string
	fsys := errorfs.New(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpClose && swapped == "" && IsTempName(op.Path) {
			swapped = op.Path
			v.linkAt(t, op.Path)
		}
		return nil
	}))
	err := ReplaceFile(fsys, path, []byte("after"), 0o644, false)
	wantSwapRefused(t, "ReplaceFile", err, swapped)
	v.check(t)
	if b, err := os.ReadFile(path); err != nil || string(b) != "before" {
		t.Errorf("path after the failed replace holds %q, %v, want %q", b, err, "before")
	}
	if ts := temps(t, dir); len(ts) != 0 {
		t.Errorf("temp files left: %v", ts)
	}
}

// TestEnsureDirSwapped swaps the directory EnsureDir just made for a hard
// link to another client's file: EnsureDir must fail, and must not give
// that file the directory's mode or group.
func TestEnsureDirSwapped(t *testing.T) {
	dir := t.TempDir()
	groupDir(t, dir)
	sub := filepath.Join(dir, "0c")
	for _, fsName := range []string{"default", "root"} {
		t.Run(fsName, func(t *testing.T) {
			emptyDir(t, dir)
			v := newVictim(t, []byte("victim"))
			swapped := false
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				// EnsureDir stats the parent once the directory is made.
				if op.Kind == errorfs.OpStat && op.Path == dir && !swapped {
					swapped = true
					if err := os.Remove(sub); err != nil {
						t.Error(err)
					}
					v.linkAt(t, sub)
				}
				return nil
			})
			fsys, _ := hostileFS(t, errorfs.New(vfs.Default, inj), dir)[fsName]()
			err := EnsureDir(fsys, sub, 0o644)
			if !swapped {
				t.Fatalf("EnsureDir never stat'ed the parent (= %v)", err)
			}
			if err == nil || !strings.Contains(err.Error(), sub) {
				t.Errorf("EnsureDir of a directory swapped for a file = %v, want an error naming %s", err, sub)
			}
			if err := os.Remove(sub); err != nil { // the peer's link
				t.Fatal(err)
			}
			v.check(t)
		})
	}
}

// TestCommitReplacesFIFOAtFinalNames plants FIFOs at the final data and
// checksum names of an output with no index: nothing is committed there,
// so a commit never opens them; it renames its own files over them at
// once, and the output is whole.
func TestCommitReplacesFIFOAtFinalNames(t *testing.T) {
	id := ID{Shuffle: 0, Map: 8}
	attempt := parts("abc", "de")
	dir := t.TempDir()
	for fsName, open := range hostileFS(t, vfs.Default, dir) {
		t.Run(fsName, func(t *testing.T) {
			emptyDir(t, dir)
			fsys, l := open()
			fifos := []string{Path(Flat(dir), DataName(id)), Path(Flat(dir), ChecksumName(id, checksum.CRC32))}
			for _, f := range fifos {
				mkfifo(t, f)
			}
			c := newCommit(t, fsys, l, id, checksum.CRC32, attempt)
			if res, err := doPromptly(t, c, fifos...); err != nil || res.existing {
				t.Fatalf("Commit.Do over FIFOs at the final names = existing %v, %v; want a fresh commit", res.existing, err)
			}
			for _, f := range fifos {
				if fi, err := os.Lstat(f); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s after the commit: %v, %v; want the committed regular file", f, fi, err)
				}
			}
			checkOutput(t, Flat(dir), id, checksum.CRC32, attempt)
		})
	}
}

// TestCommitOverLinkedOutput: a peer hard-links another client's committed
// output (index, data, checksum) at its own final names. The daemon then
// sees an output committed there (Commit.Do answers existing, with the
// other output's lengths and checksums, as if the peer had written those
// bytes itself), discards its attempt, and changes nothing of the other
// client's files; a removal of the peer's output unlinks only the peer's
// names.
func TestCommitOverLinkedOutput(t *testing.T) {
	id := ID{Shuffle: 0, Map: 9}
	theirs := parts("their", "bytes!")
	other := t.TempDir()
	mustCommit(t, Flat(other), id, checksum.CRC32, theirs)
	names := []string{IndexName(id), DataName(id), ChecksumName(id, checksum.CRC32)}
	before := map[string]os.FileInfo{}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(other, n))
		if err != nil {
			t.Fatal(err)
		}
		before[n] = fi
	}
	dir := t.TempDir()
	for fsName, open := range hostileFS(t, vfs.Default, dir) {
		t.Run(fsName, func(t *testing.T) {
			emptyDir(t, dir)
			for _, n := range names {
				if err := os.Link(filepath.Join(other, n), filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
			fsys, l := open()
			c := newCommit(t, fsys, l, id, checksum.CRC32, parts("mine", ""))
			c.FileMode = 0o600
			res, err := doPromptly(t, c)
			if err != nil || !res.existing || !slices.Equal(res.lengths, theirs.lengths()) {
				t.Errorf("Commit.Do over linked files = %v existing %v, %v; want existing with the other output's lengths %v",
					res.lengths, res.existing, err, theirs.lengths())
			}
			if n, _, err := RemoveShuffle(fsys, &testLocks, l, id.Shuffle); err != nil || n != 1 {
				t.Errorf("RemoveShuffle of the peer's names = %d, %v; want 1", n, err)
			}
			for _, n := range names {
				fi, err := os.Stat(filepath.Join(other, n))
				if err != nil {
					t.Fatalf("the other client's %s: %v", n, err)
				}
				if fi.Mode() != before[n].Mode() || fi.Size() != before[n].Size() || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
					t.Errorf("the other client's %s is now %v, %d bytes, %d links; want %v, %d bytes, 1 link",
						n, fi.Mode(), fi.Size(), fi.Sys().(*syscall.Stat_t).Nlink, before[n].Mode(), before[n].Size())
				}
			}
			checkOutput(t, Flat(other), id, checksum.CRC32, theirs)
			if f := files(t, dir); len(f) != 0 {
				t.Errorf("files left in the peer's dir: %v", f)
			}
		})
	}
}
