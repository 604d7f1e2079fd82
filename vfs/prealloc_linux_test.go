package vfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// allocated returns the bytes of disk f's file holds and its size.
func allocated(t *testing.T, f *os.File) (blocks, size int64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512, st.Size
}

// canFallocate reports whether the file system of dir allocates ahead
// (FALLOC_FL_KEEP_SIZE) at all: ext4, xfs and tmpfs do, some do not.
func canFallocate(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20) == nil
}

func TestPreallocate(t *testing.T) {
	dir := t.TempDir()
	supported := canFallocate(t, dir)
	name := filepath.Join(dir, "f")
	fi, err := Default.Create(name, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f := fi.(*os.File)
	defer f.Close()
	head := bytes.Repeat([]byte("h"), 100)
	if _, err := f.Write(head); err != nil {
		t.Fatal(err)
	}
	// Arguments that ask for nothing change nothing.
	Preallocate(f, -1, 1<<20)
	Preallocate(f, 0, 0)
	Preallocate(f, 0, -5)
	before, _ := allocated(t, f)

	const n = 4 << 20
	Preallocate(f, 100, n)
	blocks, size := allocated(t, f)
	if size != 100 {
		t.Fatalf("size after Preallocate = %d, want 100: it must not change the size", size)
	}
	if supported && blocks < n {
		t.Errorf("a file system that allocates ahead holds %d bytes after Preallocate of %d", blocks, n)
	}
	if !supported && blocks != before {
		t.Errorf("a file system that cannot allocate ahead: %d bytes held, %d before", blocks, before)
	}

	// The allocated bytes are written like any others, and the file ends
	// up holding what a file written without them would.
	body := bytes.Repeat([]byte("0123456789abcdef"), (n-100)/16)
	if _, err := f.Write(body); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(head, body...)) {
		t.Fatalf("read back %d bytes, not the %d written", len(got), len(head)+len(body))
	}
	blocks, size = allocated(t, f)
	if slack := int64(64 << 10); blocks > (size+4095)/4096*4096+slack {
		t.Errorf("a file of %d bytes holds %d bytes of disk after writes into its preallocation", size, blocks)
	}
}
