//go:build unix

package shufflefile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// TestCommitFileMode commits under a umask of 077 and checks that the
// files get exactly FileMode and the sub-directories Do creates the
// matching directory mode. No test of this package runs in parallel, so
// changing the process's umask here is safe.
func TestCommitFileMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	root := t.TempDir()
	l := SparkHashed{LocalDirs: []string{filepath.Join(root, "l0"), filepath.Join(root, "l1")}}
	id := ID{31, 32}
	c := newCommit(t, vfs.Default, l, id, checksum.Adler32, parts("abc", "de"))
	c.FileMode = 0o640
	if _, _, _, err := c.Do(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{DataName(id), IndexName(id), ChecksumName(id, checksum.Adler32)} {
		p := Path(l, name)
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("mode of %s = %v, %v, want 0640", name, fi.Mode(), err)
		}
		dir := filepath.Dir(p)
		if dir == filepath.Dir(Path(l, DataName(id))) {
			continue // made by the test, before Do
		}
		di, err := os.Stat(dir)
		if err != nil || di.Mode().Perm() != 0o770 {
			t.Errorf("mode of %s's directory %s = %v, %v, want 0770 (group-writable, as Spark's)", name, dir, di.Mode(), err)
		}
	}
}

// TestEnsureDirKeepsSetgid makes a sub-dir in a setgid parent: it keeps
// the bit, gets DirMode and the parent's group; under a umask that leaves
// the mode whole it takes no chmod at all, so a sandbox that forbids
// setting setgid bits (systemd's RestrictSUIDSGID=) does not stop it.
func TestEnsureDirKeepsSetgid(t *testing.T) {
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)
	parent := t.TempDir()
	if err := os.Chmod(parent, os.ModeSetgid|0o775); err != nil {
		t.Fatal(err)
	}
	noSetgid := errorfs.New(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpChmod {
			return syscall.EPERM // as RestrictSUIDSGID= answers a chmod that sets setgid
		}
		return nil
	}))
	dir := filepath.Join(parent, "0c")
	if err := EnsureDir(noSetgid, dir, 0o644); err != nil {
		t.Fatalf("EnsureDir under umask 0002 in a setgid parent: %v", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode()&(os.ModePerm|os.ModeSetgid), DirMode(0o644)|os.ModeSetgid; got != want {
		t.Errorf("sub-dir mode %v, want %v", got, want)
	}

	// Under a narrower umask, a chmod adds what mkdir left out, setgid
	// included.
	syscall.Umask(0o077)
	dir = filepath.Join(parent, "0d")
	if err := EnsureDir(vfs.Default, dir, 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, err = os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode()&(os.ModePerm|os.ModeSetgid), DirMode(0o640)|os.ModeSetgid; got != want {
		t.Errorf("sub-dir mode under umask 077: %v, want %v", got, want)
	}
}
