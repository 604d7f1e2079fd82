package shufflefile

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// attemptData is one attempt's partitions.
type attemptData [][]byte

func parts(ps ...string) attemptData {
	a := make(attemptData, len(ps))
	for i, p := range ps {
		a[i] = []byte(p)
	}
	return a
}

func (a attemptData) lengths() []int64 {
	l := make([]int64, len(a))
	for i, p := range a {
		l[i] = int64(len(p))
	}
	return l
}

func (a attemptData) sums(alg checksum.Algorithm) []uint32 {
	if alg == checksum.None {
		return nil
	}
	s := make([]uint32, len(a))
	for i, p := range a {
		h := alg.New()
		h.Write(p)
		s[i] = h.Sum32()
	}
	return s
}

// stage writes a's data temp file for id under l and returns its path.
func stage(t testing.TB, l Layout, id ID, a attemptData) string {
	t.Helper()
	final := Path(l, DataName(id))
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := TempName(final)
	if err := os.WriteFile(tmp, bytes.Join(a, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	return tmp
}

// testLocks is the table of the outputs' locks the tests' commits and
// removals share, as the daemon's do.
var testLocks Locks

// newCommit stages a and returns a Commit of it.
func newCommit(t testing.TB, fsys vfs.FS, l Layout, id ID, alg checksum.Algorithm, a attemptData) *Commit {
	return &Commit{
		FS:        fsys,
		Locks:     &testLocks,
		Layout:    l,
		ID:        id,
		DataTemp:  stage(t, l, id, a),
		Lengths:   a.lengths(),
		Checksums: a.sums(alg),
		Algorithm: alg,
	}
}

// mustCommit commits a as a fresh output.
func mustCommit(t testing.TB, l Layout, id ID, alg checksum.Algorithm, a attemptData) {
	t.Helper()
	c := newCommit(t, vfs.Default, l, id, alg, a)
	if _, _, existing, err := c.Do(); err != nil || existing {
		t.Fatalf("Do() = existing %v, %v, want a fresh commit", existing, err)
	}
}

// checkOutput opens id and checks that it holds exactly a.
func checkOutput(t testing.TB, l Layout, id ID, alg checksum.Algorithm, a attemptData) {
	t.Helper()
	m, err := Open(vfs.Default, l, id, alg)
	if err != nil {
		t.Fatalf("Open(%v, %v) = %v, want nil", id, alg, err)
	}
	defer m.Close()
	if !slices.Equal(m.Lengths, a.lengths()) {
		t.Errorf("Open(%v).Lengths = %v, want %v", id, m.Lengths, a.lengths())
	}
	if !slices.Equal(m.Checksums, a.sums(alg)) {
		t.Errorf("Open(%v).Checksums = %x, want %x", id, m.Checksums, a.sums(alg))
	}
	for p := range a {
		got, err := m.ReadPartition(p)
		if err != nil || !bytes.Equal(got, a[p]) {
			t.Errorf("ReadPartition(%d) = %q, %v, want %q", p, got, err, a[p])
		}
	}
	if err := m.Verify(); err != nil {
		t.Errorf("Verify() = %v, want nil", err)
	}
}

// files returns the regular files under root, relative, sorted.
func files(t testing.TB, root string) []string {
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
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// temps returns the temp files under root.
func temps(t testing.TB, root string) []string {
	var out []string
	for _, f := range files(t, root) {
		if IsTempName(f) {
			out = append(out, f)
		}
	}
	return out
}

// layouts returns a flat and a hashed layout under root.
func layouts(root string) map[string]Layout {
	return map[string]Layout{
		"flat":   Flat(filepath.Join(root, "flat")),
		"hashed": SparkHashed{LocalDirs: []string{filepath.Join(root, "l0"), filepath.Join(root, "l1")}, SubDirs: 4},
	}
}
