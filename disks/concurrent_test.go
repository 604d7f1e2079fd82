package disks

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConcurrentReservationsNeverOverbook(t *testing.T) {
	// Room above the low watermark for exactly `fit` estimates, asked for
	// by many more goroutines at once: exactly `fit` win, on every round.
	const (
		goroutines = 64
		estimate   = 100
		fit        = 7
	)
	for _, refresh := range []time.Duration{0, DefaultRefresh} {
		t.Run(fmt.Sprintf("refresh=%v", refresh), func(t *testing.T) {
			f := newFakeSet(t, 1, testTotal, testTotal-(testLow+fit*estimate+estimate/2),
				append(watermarks(), WithRefresh(refresh))...)
			for round := range 5 {
				var (
					won  atomic.Int64
					wg   sync.WaitGroup
					mu   sync.Mutex
					held []*Reservation
				)
				start := make(chan struct{})
				for range goroutines {
					wg.Go(func() {
						<-start
						r, err := f.Reserve("app", estimate)
						if err != nil {
							if !errors.Is(err, ErrDiskFull) {
								t.Errorf("Reserve = %v, want nil or ErrDiskFull", err)
							}
							return
						}
						won.Add(1)
						mu.Lock()
						held = append(held, r)
						mu.Unlock()
					})
				}
				close(start)
				wg.Wait()
				if got := won.Load(); got != fit {
					t.Fatalf("round %d: %d of %d concurrent reservations of %d bytes won, room for %d", round, got, goroutines, estimate, fit)
				}
				for _, r := range held {
					r.Release()
				}
				if st := f.Stats()[0]; st.Reserved != 0 {
					t.Fatalf("round %d: Reserved = %d after every Release, want 0", round, st.Reserved)
				}
			}
		})
	}
}

func TestConcurrentGrowsStayAboveLowWatermark(t *testing.T) {
	// Writers on one disk each Grow then write until refused. Whatever the
	// interleaving of Grow, write and statfs, the bytes written never take
	// the disk below the low watermark, and little more than one write per
	// writer of room is left unused.
	const (
		writers = 16
		chunk   = 64
		total   = 200_000
	)
	for _, refresh := range []time.Duration{0, time.Nanosecond, DefaultRefresh} {
		t.Run(fmt.Sprintf("refresh=%v", refresh), func(t *testing.T) {
			f := newFakeSet(t, 1, total, 0, WithLowWatermark(Bytes(testLow)), WithRefresh(refresh))
			dir := f.dirs[0]
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range writers {
				r, err := f.Reserve("app", 0)
				if err != nil {
					t.Fatalf("Reserve = %v", err)
				}
				wg.Go(func() {
					defer r.Release()
					<-start
					for {
						if err := r.Grow(chunk); err != nil {
							if !errors.Is(err, ErrDiskFull) {
								t.Errorf("Grow = %v, want ErrDiskFull", err)
							}
							return
						}
						f.fs.write(dir, chunk)
						f.clock.Advance(time.Microsecond)
					}
				})
			}
			close(start)
			wg.Wait()
			used := f.fs.used(dir)
			if used > total-testLow {
				t.Errorf("writers wrote %d bytes on a disk of %d with a low watermark of %d: %d bytes past it",
					used, total, testLow, used-(total-testLow))
			}
			if minUsed := uint64(total - testLow - (writers+1)*chunk); used < minUsed {
				t.Errorf("writers wrote %d bytes, want at least %d", used, minUsed)
			}
		})
	}
}

func TestConcurrentGrowAndRelease(t *testing.T) {
	// Reservations come and go on two disks while statfs is read often:
	// the ledger ends balanced.
	f := newFakeSet(t, 2, 1<<30, 0, WithLowWatermark(Bytes(testLow)), WithRefresh(time.Nanosecond))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				r, err := f.Reserve("app", int64(g*i%300))
				if err != nil {
					t.Errorf("Reserve = %v", err)
					return
				}
				for range 5 {
					if err := r.Grow(50); err != nil {
						t.Errorf("Grow = %v", err)
					}
					f.fs.write(r.Disk().Dir(), 50)
					f.clock.Advance(time.Microsecond)
				}
				r.Release()
			}
		})
	}
	wg.Wait()
	f.clock.Advance(time.Second)
	for _, st := range f.Stats() {
		if st.Reserved != 0 {
			t.Errorf("disk %s: Reserved = %d after every reservation ended and a fresh read, want 0", st.Dir, st.Reserved)
		}
	}
}
