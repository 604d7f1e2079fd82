package disks

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

func TestRoundRobin(t *testing.T) {
	f := newFakeSet(t, 3, testTotal, 0, watermarks()...)
	var got []string
	for range 6 {
		r, err := f.Reserve("app", 0)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Disk().Dir())
		r.Release()
	}
	want := append(append([]string(nil), f.dirs...), f.dirs...)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("six reservations went to %q, want %q", got, want)
	}

	// A full disk is skipped; the others share the load.
	f.fs.setUsed(f.dirs[1], testTotal)
	f.clock.Advance(DefaultRefresh + 1)
	count := map[string]int{}
	for range 10 {
		r, err := f.Reserve("app", 0)
		if err != nil {
			t.Fatal(err)
		}
		count[r.Disk().Dir()]++
		r.Release()
	}
	if count[f.dirs[1]] != 0 || count[f.dirs[0]] < 4 || count[f.dirs[2]] < 4 {
		t.Errorf("ten reservations with disk 1 full went %v, want none on disk 1 and 4..6 on each other", count)
	}
}

func TestFailingDiskLeavesRotation(t *testing.T) {
	f := newFakeSet(t, 2, testTotal, 0, append(watermarks(), WithMaxErrors(3))...)
	bad, good := f.Disk(f.dirs[0]), f.Disk(f.dirs[1])
	eio := &fs.PathError{Op: "write", Path: bad.Dir() + "/x", Err: syscall.EIO}

	// Errors that are not I/O errors, and a success, break the count.
	f.ReportError(bad, eio)
	f.ReportError(bad, eio)
	f.ReportError(bad, fs.ErrNotExist)
	f.ReportError(bad, fmt.Errorf("write: %w", syscall.ENOSPC))
	f.ReportSuccess(bad)
	f.ReportError(bad, eio)
	f.ReportError(bad, eio)
	if st := f.Stats()[0]; !st.InRotation || st.Errors != 4 {
		t.Fatalf("after 2 errors, a success, 2 errors: InRotation %v, Errors %d; want true, 4", st.InRotation, st.Errors)
	}
	f.clock.Advance(DefaultRefresh + 1) // past the hold of the ENOSPC
	inFlight, err := f.Reserve("app", 0)
	if err != nil || inFlight.Disk() != bad {
		t.Fatalf("Reserve = %v, %v, want the first disk", inFlight, err)
	}
	f.ReportError(bad, fmt.Errorf("commit: %w", syscall.EROFS))
	st := f.Stats()[0]
	if st.InRotation || st.TakenOut != 1 || st.Errors != 5 {
		t.Fatalf("after 3 consecutive errors: InRotation %v, TakenOut %d, Errors %d; want false, 1, 5", st.InRotation, st.TakenOut, st.Errors)
	}
	if !strings.Contains(f.log.String(), "taken out of rotation") || !strings.Contains(f.log.String(), bad.Dir()) {
		t.Errorf("log %q does not report %s leaving rotation", f.log.String(), bad.Dir())
	}
	if err := inFlight.Grow(1); !errors.Is(err, ErrDiskFailed) {
		t.Errorf("Grow on a disk out of rotation = %v, want ErrDiskFailed", err)
	}
	inFlight.Release()
	for i := range 10 {
		r, err := f.Reserve("app", 0)
		if err != nil || r.Disk() != good {
			t.Fatalf("Reserve %d with one disk failed = %v, %v, want the good disk", i, r, err)
		}
		if err := r.Grow(100); err != nil {
			t.Fatalf("Grow on the good disk = %v", err)
		}
		r.Release()
	}

	// With the other disk gone too, Reserve reports failure, not full.
	for range 3 {
		f.ReportError(good, syscall.EIO)
	}
	_, err = f.Reserve("app", 0)
	if !errors.Is(err, ErrDiskFailed) || errors.Is(err, ErrDiskFull) {
		t.Fatalf("Reserve with every disk failed = %v, want ErrDiskFailed", err)
	}
	for _, d := range f.dirs {
		if !strings.Contains(err.Error(), d+": out of rotation") {
			t.Errorf("Reserve error %q does not name %s out of rotation", err, d)
		}
	}

	if err := f.Restore(bad.Dir()); err != nil {
		t.Fatalf("Restore(%q) = %v", bad.Dir(), err)
	}
	r, err := f.Reserve("app", 0)
	if err != nil || r.Disk() != bad {
		t.Fatalf("Reserve after Restore = %v, %v, want the restored disk", r, err)
	}
	r.Release()
	if err := f.Restore("/no/such/disk"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Restore of an unknown directory = %v, want ErrInvalidArgument", err)
	}
}

func TestStatfsErrorsSkipDisk(t *testing.T) {
	f := newFakeSet(t, 2, testTotal, 0, append(watermarks(), WithMaxErrors(2))...)
	f.fs.setErr(f.dirs[0], syscall.EIO)
	f.clock.Advance(DefaultRefresh + 1)
	for i := range 4 {
		r, err := f.Reserve("app", 0)
		if err != nil || r.Disk().Dir() != f.dirs[1] {
			t.Fatalf("Reserve %d with statfs failing on disk 0 = %v, %v, want disk 1", i, r, err)
		}
		r.Release()
	}
	if st := f.Stats()[0]; st.InRotation {
		t.Errorf("disk whose statfs failed with EIO twice: InRotation = true, want false")
	}
}

func TestReportErrorIgnoresForeignDisk(t *testing.T) {
	a := newFakeSet(t, 1, testTotal, 0, WithMaxErrors(1))
	b := newFakeSet(t, 1, testTotal, 0, WithMaxErrors(1))
	a.ReportError(b.Disks()[0], syscall.EIO)
	a.ReportError(nil, syscall.EIO)
	if st := b.Stats()[0]; !st.InRotation || st.Errors != 0 {
		t.Errorf("disk of another set after ReportError: InRotation %v, Errors %d; want true, 0", st.InRotation, st.Errors)
	}
}
