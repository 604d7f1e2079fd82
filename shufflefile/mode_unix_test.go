//go:build unix

package shufflefile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
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
