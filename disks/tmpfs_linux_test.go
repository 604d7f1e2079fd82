package disks

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/tmpfs"
	"github.com/shuffled/shuffled/vfs"
)

func realFree(t *testing.T, dir string) uint64 {
	t.Helper()
	free, _, err := statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return free
}

const (
	kib      = 1 << 10
	chunk    = 64 * kib
	tmpfsLow = 512 * kib
	tmpfsHi  = 1024 * kib
)

// writeThrough writes one map output's data temp file in the executor dir
// of r's disk, admitting every chunk with Grow first, until Grow refuses or
// max bytes are written. It returns the temp file's path, the bytes
// written, and Grow's error.
func writeThrough(t *testing.T, r *Reservation, id shufflefile.ID, max int) (string, int, error) {
	t.Helper()
	dir, err := r.Disk().ExecutorDir(r.App(), "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := shufflefile.TempName(filepath.Join(dir, shufflefile.DataName(id)))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, chunk)
	written := 0
	for written < max {
		if err := r.Grow(chunk); err != nil {
			return path, written, err
		}
		if _, err := f.Write(buf); err != nil {
			t.Fatalf("write after Grow admitted it, %d bytes in: %v", written, err)
		}
		written += chunk
	}
	return path, written, nil
}

func TestRealSmallFileSystem(t *testing.T) {
	mnt := tmpfs.Mount(t, "2m")
	opts := []Option{WithLowWatermark(Bytes(tmpfsLow)), WithHighWatermark(Bytes(tmpfsHi))}

	t.Run("ledger alone stops at the watermark", func(t *testing.T) {
		// The default refresh bound: the ledger, not a fresh statfs,
		// keeps one output's writes above the low watermark.
		s, err := New([]string{mnt}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Reserve("app-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		path, written, err := writeThrough(t, r, shufflefile.ID{Shuffle: 0, Map: 0}, 1<<30)
		if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), mnt) {
			t.Fatalf("Grow after %d bytes = %v, want ErrDiskFull naming %s", written, err, mnt)
		}
		if free := realFree(t, mnt); free < tmpfsLow {
			t.Errorf("after %d bytes admitted: %d bytes free, below the low watermark %d", written, free, tmpfsLow)
		}
		if written < 1024*kib {
			t.Errorf("only %d bytes admitted on a 2 MiB file system with a 512 KiB watermark", written)
		}
		r.Release()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("disk full, in-flight failure, recovery", func(t *testing.T) {
		s, err := New([]string{mnt}, append(opts, WithRefresh(0))...)
		if err != nil {
			t.Fatal(err)
		}
		d := s.Disks()[0]
		// A map output is in flight when something else fills the disk.
		r, err := s.Reserve("app-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		inflight, _, err := writeThrough(t, r, shufflefile.ID{Shuffle: 1, Map: 0}, 2*chunk)
		if err != nil {
			t.Fatal(err)
		}
		ballast := filepath.Join(mnt, "ballast")
		f, err := os.Create(ballast)
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = f.Write(make([]byte, chunk))
		}
		f.Close()
		if !errors.Is(err, unix.ENOSPC) {
			t.Fatalf("filling the disk: %v, want ENOSPC", err)
		}
		s.ReportError(d, err)
		if st := s.Stats()[0]; !st.Full || !st.InRotation {
			t.Errorf("after ENOSPC: Full %v, InRotation %v; want true, true", st.Full, st.InRotation)
		}

		// The output in flight fails cleanly: its next Grow refuses, it
		// aborts, and nothing of it is committed.
		f2, err := os.OpenFile(inflight, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Grow(chunk); !errors.Is(err, ErrDiskFull) {
			t.Fatalf("Grow of the output in flight on a full disk = %v, want ErrDiskFull", err)
		}
		f2.Close()
		os.Remove(inflight)
		r.Release()
		execDir, _ := d.ExecutorDir("app-1", "exec-1")
		if ents, err := os.ReadDir(execDir); err != nil || len(ents) != 0 {
			t.Errorf("executor dir after the abort holds %v (%v), want nothing", ents, err)
		}

		// New map outputs are refused, naming the disk and its free bytes.
		_, err = s.Reserve("app-1", 0)
		if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), mnt+": ") || !strings.Contains(err.Error(), " bytes free") {
			t.Fatalf("Reserve on a full disk = %v, want ErrDiskFull naming %s and its free bytes", err, mnt)
		}

		// Space comes back above the low watermark but below the high one:
		// still refused.
		setFree := func(want uint64) {
			t.Helper()
			fi, err := os.Stat(ballast)
			if err != nil {
				t.Fatal(err)
			}
			free := realFree(t, mnt)
			size := fi.Size() - int64(want) + int64(free)
			if err := os.Truncate(ballast, max(size, 0)); err != nil {
				t.Fatal(err)
			}
		}
		setFree(768 * kib)
		if free := realFree(t, mnt); free < tmpfsLow || free >= tmpfsHi {
			t.Fatalf("set up %d bytes free, want between the watermarks", free)
		}
		if _, err := s.Reserve("app-1", 0); !errors.Is(err, ErrDiskFull) {
			t.Fatalf("Reserve with free space between the watermarks = %v, want ErrDiskFull", err)
		}

		// Above the high watermark: a map output is written and committed.
		if err := os.Remove(ballast); err != nil {
			t.Fatal(err)
		}
		r, err = s.Reserve("app-1", 0)
		if err != nil {
			t.Fatalf("Reserve after space came back = %v", err)
		}
		id := shufflefile.ID{Shuffle: 2, Map: 0}
		tmp, written, err := writeThrough(t, r, id, 4*chunk)
		if err != nil {
			t.Fatal(err)
		}
		c := &shufflefile.Commit{FS: vfs.Default, Locks: new(shufflefile.Locks), Layout: shufflefile.Flat(execDir), ID: id, DataTemp: tmp,
			Lengths: []int64{int64(written)}, Checksums: []uint32{adler32Zeros(written)}, Algorithm: checksum.Adler32, Sync: true}
		if _, _, _, err := c.Do(); err != nil {
			t.Fatal(err)
		}
		s.ReportSuccess(d)
		r.Release()
		got, err := s.ListShuffles("app-1")
		if err != nil || len(got) != 1 || got[0].Shuffle != 2 || got[0].Outputs != 1 {
			t.Errorf("ListShuffles after the commit = %+v, %v; want shuffle 2 with one output", got, err)
		}
		if n, freed, err := s.RemoveApplication("app-1"); err != nil || n != 1 || freed < int64(written) {
			t.Errorf("RemoveApplication = %d, %d, %v; want 1 output, at least %d bytes", n, freed, err, written)
		}
	})
}

func adler32Zeros(n int) uint32 {
	return checksum.Adler32.Update(checksum.Adler32.Empty(), make([]byte, n))
}
