package merge

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// eofAtEnd is a file whose ReadAt returns io.EOF with a full read that
// ends at the end of the file, as io.ReaderAt allows ("If the n = len(p)
// bytes returned by ReadAt are at the end of the input source, ReadAt may
// return either err == EOF or err == nil").
type eofAtEnd struct {
	vfs.File
	size int64
}

func (f eofAtEnd) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if err == nil && off+int64(n) == f.size {
		err = io.EOF
	}
	return n, err
}

// TestWindowFullReadWithEOF merges runs in files whose reads report EOF
// with the last bytes: the window has every byte it asked for, so the
// merge must succeed.
func TestWindowFullReadWithEOF(t *testing.T) {
	const k, n, maxSeg = 2, 50, 300
	dir := t.TempDir()
	runs, want := makeRunsIn(t, dir, inFiles, k, n, maxSeg, checksum.CRC32, 3)
	for r := range runs {
		runs[r].File = eofAtEnd{File: runs[r].File, size: sum(runs[r].Lengths)}
	}
	dst, err := vfs.Default.Create(filepath.Join(dir, "data"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := Merge(dst, runs, n, checksum.CRC32); err != nil {
		t.Fatalf("Merge of files whose last read says EOF: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, bytes.Join(want, nil)) {
		t.Errorf("merged bytes differ from the runs' partitions")
	}
}
