package disks

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

const (
	testTotal = 10_000
	testLow   = 1_000
	testHigh  = 3_000
)

func watermarks() []Option {
	return []Option{WithLowWatermark(Bytes(testLow)), WithHighWatermark(Bytes(testHigh))}
}

func TestReserveRefusalNamesDiskAndFreeBytes(t *testing.T) {
	f := newFakeSet(t, 2, testTotal, testTotal-500, watermarks()...)
	f.fs.setUsed(f.dirs[1], testTotal-700)
	f.clock.Advance(DefaultRefresh + 1)
	r, err := f.Reserve("app-1", 0)
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Reserve with 500 and 700 bytes free = %v, %v, want ErrDiskFull", r, err)
	}
	for _, want := range []string{f.dirs[0] + ": 500 bytes free", f.dirs[1] + ": 700 bytes free", `"app-1"`, "low watermark 1000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Reserve error %q does not contain %q", err, want)
		}
	}
	if got := f.Refusals(); got != 1 {
		t.Errorf("Refusals() = %d, want 1", got)
	}
	for _, st := range f.Stats() {
		if !st.Full {
			t.Errorf("Stats() of %s: Full = false, want true", st.Dir)
		}
	}
	if !strings.Contains(f.log.String(), "disk full") {
		t.Errorf("log %q does not report the full disk", f.log.String())
	}
}

func TestReserveHysteresis(t *testing.T) {
	f := newFakeSet(t, 1, testTotal, 0, watermarks()...)
	dir := f.dirs[0]
	steps := []struct {
		free   uint64
		wantOK bool
	}{
		{free: 5_000, wantOK: true},
		{free: 999, wantOK: false},   // below low: full
		{free: 1_500, wantOK: false}, // above low, below high: still full
		{free: 2_999, wantOK: false},
		{free: 3_000, wantOK: true}, // back at high
		{free: 1_500, wantOK: true}, // above low: not full
		{free: 1_000, wantOK: true}, // exactly at low
		{free: 999, wantOK: false},
		{free: 2_000, wantOK: false},
	}
	for i, st := range steps {
		f.fs.setUsed(dir, testTotal-st.free)
		f.clock.Advance(DefaultRefresh + 1)
		r, err := f.Reserve("app", 0)
		if got := err == nil; got != st.wantOK {
			t.Fatalf("step %d: Reserve with %d bytes free = %v, want ok %v", i, st.free, err, st.wantOK)
		}
		if err == nil {
			r.Release()
		} else if !errors.Is(err, ErrDiskFull) {
			t.Fatalf("step %d: Reserve = %v, want ErrDiskFull", i, err)
		}
	}
}

func TestReserveHysteresisReadsFreshFigure(t *testing.T) {
	// A full disk is read again at once when space may be back; the
	// refresh bound plays no part.
	f := newFakeSet(t, 1, testTotal, testTotal-500, watermarks()...)
	if _, err := f.Reserve("app", 0); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Reserve with 500 bytes free = %v, want ErrDiskFull", err)
	}
	f.fs.setUsed(f.dirs[0], 0)
	r, err := f.Reserve("app", 0)
	if err != nil {
		t.Fatalf("Reserve after space came back, same instant = %v, want success", err)
	}
	r.Release()
}

func TestReserveEstimate(t *testing.T) {
	f := newFakeSet(t, 1, testTotal, testTotal-5_000, watermarks()...)
	r, err := f.Reserve("app", 4_000)
	if err != nil {
		t.Fatalf("Reserve(4000) with 5000 free, low 1000 = %v", err)
	}
	if _, err := f.Reserve("app", 1); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Reserve(1) with 4000 of 5000 reserved = %v, want ErrDiskFull", err)
	}
	if st := f.Stats()[0]; st.Reserved != 4_000 || st.Full {
		t.Errorf("Stats() = Reserved %d, Full %v; want 4000, false (one estimate too big does not make the disk full)", st.Reserved, st.Full)
	}
	// Grow within the estimate adds nothing to the ledger.
	if err := r.Grow(3_000); err != nil {
		t.Fatalf("Grow(3000) within an estimate of 4000 = %v", err)
	}
	if st := f.Stats()[0]; st.Reserved != 4_000 {
		t.Errorf("after Grow within estimate: Reserved = %d, want 4000", st.Reserved)
	}
	if _, err := f.Reserve("app", 0); err != nil {
		t.Errorf("Reserve(0) with 1000 available = %v, want success", err)
	}
	r.Release()
	// The unused 1000 of the estimate are free at once; the 3000 grown
	// stay pending until statfs shows them.
	if st := f.Stats()[0]; st.Reserved != 3_000 {
		t.Errorf("after Release: Reserved = %d, want 3000", st.Reserved)
	}
	f.fs.write(f.dirs[0], 3_000)
	f.clock.Advance(DefaultRefresh + 1)
	if st := f.Stats()[0]; st.Reserved != 0 || st.Free != 2_000 {
		t.Errorf("after a fresh read: Reserved %d, Free %d; want 0, 2000", st.Reserved, st.Free)
	}
}

func TestGrowFailsInFlight(t *testing.T) {
	f := newFakeSet(t, 2, testTotal, 0, watermarks()...)
	dir := f.dirs[0]
	f.fs.setUsed(f.dirs[1], testTotal) // the other disk is full
	f.fs.setUsed(dir, testTotal-5_000)
	f.clock.Advance(DefaultRefresh + 1)
	r, err := f.Reserve("app", 0)
	if err != nil || r.Disk().Dir() != dir {
		t.Fatalf("Reserve = %v, %v, want a reservation on %s", r, err, dir)
	}
	written := uint64(0)
	for {
		if err = r.Grow(100); err != nil {
			break
		}
		f.fs.write(dir, 100)
		written += 100
		if written > testTotal {
			t.Fatalf("Grow admitted %d bytes on a disk of %d", written, testTotal)
		}
	}
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Grow at the watermark = %v, want ErrDiskFull naming %s", err, dir)
	}
	// At most free − low, less at most one write still counted in flight.
	if written > 4_000 || written < 3_900 {
		t.Errorf("Grow admitted %d bytes of 5000 free above a low watermark of 1000, want 3900..4000", written)
	}
	if _, err := f.Reserve("app", 0); !errors.Is(err, ErrDiskFull) {
		t.Errorf("Reserve after a Grow hit the watermark = %v, want ErrDiskFull", err)
	}
	if st := f.Stats()[0]; !st.Full || st.FailedGrows != 1 {
		t.Errorf("Stats() = Full %v, FailedGrows %d; want true, 1", st.Full, st.FailedGrows)
	}
	// The output aborts: its bytes go, and the disk recovers.
	r.Release()
	f.fs.setUsed(dir, testTotal-5_000)
	r2, err := f.Reserve("app", 0)
	if err != nil {
		t.Fatalf("Reserve after the aborted output's bytes went = %v", err)
	}
	if err := r2.Grow(100); err != nil {
		t.Errorf("Grow after recovery = %v", err)
	}
	r2.Release()
	if err := r.Grow(1); !errors.Is(err, ErrReleased) {
		t.Errorf("Grow after Release = %v, want ErrReleased", err)
	}
}

func TestGrowFailsWhenSpaceGoesElsewhere(t *testing.T) {
	// A reservation guarantees its estimate only while the disk keeps the
	// space: another process filling it fails the writes in flight.
	f := newFakeSet(t, 1, testTotal, 0, watermarks()...)
	r, err := f.Reserve("app", 4_000)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if err := r.Grow(1_000); err != nil {
		t.Fatalf("Grow(1000) = %v", err)
	}
	f.fs.setUsed(f.dirs[0], testTotal-3_500)
	f.clock.Advance(DefaultRefresh + 1)
	if err := r.Grow(1_000); !errors.Is(err, ErrDiskFull) {
		t.Errorf("Grow within the estimate after the disk filled = %v, want ErrDiskFull", err)
	}
}

func TestNoDoubleCountOfWrittenBytes(t *testing.T) {
	// Bytes written and shown by statfs leave the ledger: one output may
	// fill the disk to the watermark, whatever the refresh rate.
	for _, refresh := range []bool{false, true} {
		t.Run(fmt.Sprintf("refresh-every-write=%v", refresh), func(t *testing.T) {
			f := newFakeSet(t, 1, testTotal, 0, watermarks()...)
			r, err := f.Reserve("app", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			written := 0
			for r.Grow(10) == nil {
				f.fs.write(f.dirs[0], 10)
				written += 10
				if refresh {
					f.clock.Advance(DefaultRefresh + 1)
				}
			}
			if want := testTotal - testLow; written < want-10 || written > want {
				t.Errorf("one output wrote %d bytes, want %d..%d", written, want-10, want)
			}
		})
	}
}

func TestRefreshPolicy(t *testing.T) {
	f := newFakeSet(t, 1, testTotal, 0, watermarks()...)
	dir := f.dirs[0]
	calls := func() int { return f.fs.callCount(dir) }
	if got := calls(); got != 1 {
		t.Fatalf("statfs calls after New = %d, want 1", got)
	}
	r, err := f.Reserve("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Grow(100); err != nil {
		t.Fatal(err)
	}
	if got := calls(); got != 1 {
		t.Errorf("statfs calls after Reserve and Grow far from the watermark with a fresh figure = %d, want 1", got)
	}
	f.clock.Advance(DefaultRefresh + 1)
	if err := r.Grow(100); err != nil {
		t.Fatal(err)
	}
	if got := calls(); got != 2 {
		t.Errorf("statfs calls after Grow with a stale figure = %d, want 2", got)
	}
	if _, err := f.Reserve("app", testTotal-testLow); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Reserve that would cross the watermark = %v, want ErrDiskFull", err)
	}
	if got := calls(); got != 3 {
		t.Errorf("statfs calls after a Reserve that would cross the watermark = %d, want 3", got)
	}
	r.Release()
}

func TestENOSPCMakesDiskFull(t *testing.T) {
	f := newFakeSet(t, 2, testTotal, 0, watermarks()...)
	d0 := f.Disk(f.dirs[0])
	f.ReportError(d0, fmt.Errorf("write: %w", syscall.ENOSPC))
	st := f.Stats()[0]
	if !st.Full || !st.InRotation || st.Errors != 0 {
		t.Fatalf("Stats() after ENOSPC = Full %v, InRotation %v, Errors %d; want true, true, 0", st.Full, st.InRotation, st.Errors)
	}
	// ENOSPC holds the disk full for the refresh bound, though statfs
	// shows space (inodes or a quota may have run out)...
	for range 4 {
		r, err := f.Reserve("app", 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Disk() == d0 {
			t.Errorf("Reserve picked %s within the refresh bound of its ENOSPC", d0.Dir())
		}
		r.Release()
	}
	// ...then a fresh figure above the high watermark admits again.
	f.clock.Advance(DefaultRefresh + 1)
	picked := map[string]int{}
	for range 4 {
		r, err := f.Reserve("app", 0)
		if err != nil {
			t.Fatal(err)
		}
		picked[r.Disk().Dir()]++
		r.Release()
	}
	if picked[f.dirs[0]] != 2 {
		t.Errorf("after the refresh bound with space: disk 0 picked %d of 4 times, want 2", picked[f.dirs[0]])
	}
	// ENOSPC while statfs still shows little space keeps it full.
	f.fs.setUsed(f.dirs[0], testTotal-2_000)
	f.ReportError(d0, syscall.ENOSPC)
	for range 4 {
		r, err := f.Reserve("app", 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Disk() == d0 {
			t.Errorf("Reserve picked %s, full after ENOSPC below the high watermark", d0.Dir())
		}
		r.Release()
	}
}

func TestFractionWatermarks(t *testing.T) {
	f := newFakeSet(t, 1, 1<<20, 0, WithLowWatermark(Fraction(0.1)), WithHighWatermark(Fraction(0.2)))
	dir := f.dirs[0]
	for _, st := range []struct {
		free   uint64
		wantOK bool
	}{
		{free: 1 << 19, wantOK: true},
		{free: 100_000, wantOK: false}, // < 104857
		{free: 200_000, wantOK: false}, // < 209715
		{free: 209_716, wantOK: true},
	} {
		f.fs.setUsed(dir, 1<<20-st.free)
		f.clock.Advance(DefaultRefresh + 1)
		r, err := f.Reserve("app", 0)
		if got := err == nil; got != st.wantOK {
			t.Fatalf("Reserve with %d of %d bytes free, watermarks 10%%/20%% = %v, want ok %v", st.free, 1<<20, err, st.wantOK)
		}
		if r != nil {
			r.Release()
		}
	}
}

func TestReadBetweenGrowAndWrite(t *testing.T) {
	// statfs read after a Grow but before its write must not lose the
	// bytes: they stay pending until the reservation's next Grow or its
	// Release confirms them written.
	f := newFakeSet(t, 1, testTotal, testTotal-5_000, watermarks()...)
	dir := f.dirs[0]
	r, err := f.Reserve("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Grow(3_000); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(DefaultRefresh + 1)
	f.Stats() // reads statfs: 5000 free, the write not done yet
	f.fs.write(dir, 3_000)
	r2, err := f.Reserve("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Release()
	if err := r2.Grow(1_001); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Grow(1001) with 2000 free and a low watermark of 1000 = %v, want ErrDiskFull", err)
	}
	r.Release() // confirms the 3000 written
	f.clock.Advance(DefaultRefresh + 1)
	if err := r2.Grow(1_000); err != nil {
		t.Fatalf("Grow(1000) with 2000 free, low watermark 1000 = %v", err)
	}
	if err := r2.Grow(1); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Grow(1) at the low watermark = %v, want ErrDiskFull", err)
	}
}

// TestENOSPCHoldSurvivesReads checks that a fresh statfs read forced by a
// large request does not end the ENOSPC hold early.
func TestENOSPCHoldSurvivesReads(t *testing.T) {
	f := newFakeSet(t, 1, testTotal, 0, watermarks()...)
	d0 := f.Disk(f.dirs[0])
	f.ReportError(d0, syscall.ENOSPC)
	if _, err := f.Reserve("app", int64(testTotal)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Reserve(whole disk) after ENOSPC = %v, want ErrDiskFull", err)
	}
	f.clock.Advance(DefaultRefresh / 2)
	if r, err := f.Reserve("app", 0); !errors.Is(err, ErrDiskFull) {
		if r != nil {
			r.Release()
		}
		t.Fatalf("Reserve(0) within the refresh bound of an ENOSPC, after a forced read = %v, want ErrDiskFull", err)
	}
	f.clock.Advance(DefaultRefresh)
	r, err := f.Reserve("app", 0)
	if err != nil {
		t.Fatalf("Reserve(0) after the hold, with space = %v", err)
	}
	r.Release()
}
