// Package shuffletest holds helpers that tests of several packages use to
// lay out committed map outputs and other files on a real file system.
package shuffletest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// CommitOutput commits a map output of parts (one partition each) under l
// with Adler-32 checksums and returns the bytes of its files.
func CommitOutput(t testing.TB, l shufflefile.Layout, id shufflefile.ID, parts ...string) int64 {
	t.Helper()
	final := shufflefile.Path(l, shufflefile.DataName(id))
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := shufflefile.TempName(final)
	data := strings.Join(parts, "")
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &shufflefile.Commit{FS: vfs.Default, Locks: new(shufflefile.Locks), Layout: l, ID: id, DataTemp: tmp, Algorithm: checksum.Adler32}
	for _, p := range parts {
		c.Lengths = append(c.Lengths, int64(len(p)))
		c.Checksums = append(c.Checksums, checksum.Adler32.Update(checksum.Adler32.Empty(), []byte(p)))
	}
	if _, _, existing, err := c.Do(); err != nil || existing {
		t.Fatalf("commit %v: existing %v, %v", id, existing, err)
	}
	n := int64(len(parts))
	return int64(len(data)) + 8*(n+1) + 8*n
}

// WriteFile writes a file of n bytes at path, making its directories, and
// returns n.
func WriteFile(t testing.TB, path string, n int) int64 {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o600); err != nil {
		t.Fatal(err)
	}
	return int64(n)
}

// ListFiles returns the paths of the files below root, relative to it
// (none when root does not exist).
func ListFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}
