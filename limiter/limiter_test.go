package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// acquirer runs Acquire(ctx, n) on its own goroutine and reports its result.
type acquirer struct {
	n    int64
	done chan error
}

// goAcquire starts Acquire(ctx, n) on a goroutine and waits until it is
// queued as the queued-th waiter (queued == 0: it is expected to pass at
// once). Queuing happens under the limiter's mutex before Acquire blocks, so
// Stats().Waiting tells when the goroutine is parked in the queue.
func goAcquire(t *testing.T, ctx context.Context, l *Limiter, n int64, queued int) *acquirer {
	t.Helper()
	a := &acquirer{n: n, done: make(chan error, 1)}
	go func() { a.done <- l.Acquire(ctx, n) }()
	if queued == 0 {
		if err := <-a.done; err != nil {
			t.Fatalf("Acquire(%d) = %v, want nil", n, err)
		}
		return a
	}
	for l.Stats().Waiting != queued {
		select {
		case err := <-a.done:
			t.Fatalf("Acquire(%d) = %v at once, want it queued", n, err)
		default:
			runtime.Gosched()
		}
	}
	return a
}

// admitted reports whether a's Acquire has returned, and fails the test if it
// returned an error.
func (a *acquirer) admitted(t *testing.T) bool {
	t.Helper()
	select {
	case err := <-a.done:
		if err != nil {
			t.Fatalf("Acquire(%d) = %v, want nil", a.n, err)
		}
		return true
	default:
		return false
	}
}

// mustAdmitted waits for a's Acquire to return nil. The caller has already
// seen (through Stats) that the limiter admitted it.
func (a *acquirer) mustAdmitted(t *testing.T) {
	t.Helper()
	if err := <-a.done; err != nil {
		t.Fatalf("Acquire(%d) = %v, want nil", a.n, err)
	}
}

func checkStats(t *testing.T, l *Limiter, inFlight int64, waiting int) {
	t.Helper()
	s := l.Stats()
	if s.InFlight != inFlight || s.Waiting != waiting {
		t.Fatalf("Stats() InFlight, Waiting = %d, %d; want %d, %d", s.InFlight, s.Waiting, inFlight, waiting)
	}
}

func TestNewPanicsOnBadLimit(t *testing.T) {
	for _, limit := range []int64{0, -1, -1 << 40} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Errorf("New(%d) did not panic", limit)
					return
				}
				if msg := fmt.Sprint(r); !strings.Contains(msg, fmt.Sprint(limit)) {
					t.Errorf("New(%d) panic %q does not name the value", limit, msg)
				}
			}()
			New(limit)
		}()
	}
}

func TestTryAcquireAdmission(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
		held  []int64 // acquired first, in order
		n     int64
		want  bool
	}{
		{"empty fits", 100, nil, 1, true},
		{"exactly the limit", 100, nil, 100, true},
		{"fills up exactly", 100, []int64{60}, 40, true},
		{"one byte too many", 100, []int64{60}, 41, false},
		{"full", 100, []int64{100}, 1, false},
		{"zero when full", 100, []int64{100}, 0, true},
		{"oversize when empty", 100, nil, 101, true},
		{"oversize beside one byte", 100, []int64{1}, 101, false},
		{"small beside oversize", 100, []int64{250}, 1, false},
		{"oversize beside oversize", 100, []int64{250}, 250, false},
		{"zero beside oversize", 100, []int64{250}, 0, true},
		{"many small", 10, []int64{1, 2, 3}, 4, true},
		{"many small, one over", 10, []int64{1, 2, 3}, 5, false},
	}
	for _, tt := range tests {
		l := New(tt.limit)
		for _, h := range tt.held {
			if !l.TryAcquire(h) {
				t.Fatalf("%s: setup TryAcquire(%d) = false", tt.name, h)
			}
		}
		if got := l.TryAcquire(tt.n); got != tt.want {
			t.Errorf("%s: limit %d, held %v: TryAcquire(%d) = %v, want %v", tt.name, tt.limit, tt.held, tt.n, got, tt.want)
		}
	}
}

func TestAcquireAdmission(t *testing.T) {
	// The same rules through Acquire: a request that fits returns at once,
	// one that does not is queued.
	tests := []struct {
		limit  int64
		held   int64
		n      int64
		queued bool
	}{
		{100, 0, 100, false},
		{100, 50, 50, false},
		{100, 50, 51, true},
		{100, 0, 1000, false},
		{100, 1, 1000, true},
		{100, 1000, 1, true},
	}
	for _, tt := range tests {
		l := New(tt.limit)
		if !l.TryAcquire(tt.held) {
			t.Fatalf("setup TryAcquire(%d) = false", tt.held)
		}
		w := l.enqueue(tt.n)
		if got := w != nil; got != tt.queued {
			t.Errorf("limit %d, held %d: Acquire(%d) queued = %v, want %v", tt.limit, tt.held, tt.n, got, tt.queued)
		}
		if w != nil {
			if err := l.cancel(w, context.Canceled); !errors.Is(err, context.Canceled) {
				t.Errorf("cancel = %v, want %v", err, context.Canceled)
			}
		}
		want := tt.held
		if w == nil {
			want += tt.n
		}
		checkStats(t, l, want, 0)
	}
}

func TestAcquireZeroAndNegative(t *testing.T) {
	l := New(10)
	if !l.TryAcquire(10) {
		t.Fatal("TryAcquire(10) = false on an empty limiter")
	}
	if err := l.Acquire(context.Background(), 0); err != nil {
		t.Errorf("Acquire(0) on a full limiter = %v, want nil", err)
	}
	l.Release(0)
	err := l.Acquire(context.Background(), -5)
	if !errors.Is(err, ErrInvalidSize) || !strings.Contains(err.Error(), "-5") {
		t.Errorf("Acquire(-5) = %v, want %v naming -5", err, ErrInvalidSize)
	}
	if s := l.Stats(); s.Acquires != 1 || s.InFlight != 10 {
		t.Errorf("Stats() Acquires, InFlight = %d, %d; want 1, 10", s.Acquires, s.InFlight)
	}
}

func TestAcquireDoneContextHoldsNothing(t *testing.T) {
	l := New(10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := l.Acquire(ctx, 1)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(cancelled ctx, 1) = %v, want %v", err, context.Canceled)
	}
	checkStats(t, l, 0, 0)

	ctx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if err := l.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire(expired ctx, 1) = %v, want %v", err, context.DeadlineExceeded)
	}
	checkStats(t, l, 0, 0)
}

func TestFIFOOrder(t *testing.T) {
	l := New(10)
	ctx := context.Background()
	goAcquire(t, ctx, l, 10, 0)
	sizes := []int64{6, 1, 3, 4, 2}
	var as []*acquirer
	for i, n := range sizes {
		as = append(as, goAcquire(t, ctx, l, n, i+1))
	}

	// 6+1+3 fill the limit; 4 must not be admitted, and 2 (which would fit
	// after the next release) must not overtake it.
	l.Release(10)
	checkStats(t, l, 10, 2)
	for _, a := range as[:3] {
		a.mustAdmitted(t)
	}
	for _, a := range as[3:] {
		if a.admitted(t) {
			t.Fatalf("Acquire(%d) admitted ahead of its turn", a.n)
		}
	}

	// One byte free: nothing fits at the head (4), and TryAcquire may not
	// jump the queue even though 1 byte would fit.
	l.Release(1)
	checkStats(t, l, 9, 2)
	if l.TryAcquire(1) {
		t.Fatal("TryAcquire(1) = true with requests queued, want false")
	}

	// Six bytes free: 4 then 2 are admitted, in order.
	l.Release(5)
	checkStats(t, l, 10, 0)
	as[3].mustAdmitted(t)
	as[4].mustAdmitted(t)

	s := l.Stats()
	if s.Acquires != 6 || s.Waits != 5 || s.Peak != 10 || s.Oversize != 0 || s.Cancels != 0 {
		t.Errorf("Stats() = %+v, want Acquires 6, Waits 5, Peak 10, Oversize 0, Cancels 0", s)
	}
	l.Release(10)
	checkStats(t, l, 0, 0)
}

func TestBigHeadBlocksSmaller(t *testing.T) {
	l := New(10)
	ctx := context.Background()
	goAcquire(t, ctx, l, 5, 0)
	big := goAcquire(t, ctx, l, 8, 1)
	small := goAcquire(t, ctx, l, 1, 2)
	if small.admitted(t) {
		t.Fatal("Acquire(1) overtook the queued Acquire(8)")
	}
	l.Release(5)
	checkStats(t, l, 9, 0)
	big.mustAdmitted(t)
	small.mustAdmitted(t)
}

func TestCancelHeadUnblocksOthers(t *testing.T) {
	l := New(10)
	ctx := context.Background()
	goAcquire(t, ctx, l, 5, 0)
	bigCtx, cancelBig := context.WithCancel(ctx)
	big := goAcquire(t, bigCtx, l, 8, 1)
	small1 := goAcquire(t, ctx, l, 2, 2)
	small2 := goAcquire(t, ctx, l, 3, 3)
	last := goAcquire(t, ctx, l, 1, 4) // 5+2+3 = 10: no room left for it

	cancelBig()
	if err := <-big.done; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "8") {
		t.Fatalf("cancelled Acquire(8) = %v, want %v naming 8", err, context.Canceled)
	}
	small1.mustAdmitted(t)
	small2.mustAdmitted(t)
	checkStats(t, l, 10, 1)
	if last.admitted(t) {
		t.Fatal("Acquire(1) admitted beyond the limit")
	}
	l.Release(1)
	last.mustAdmitted(t)
	checkStats(t, l, 10, 0)
	if s := l.Stats(); s.Cancels != 1 || s.Acquires != 4 || s.Waits != 3 {
		t.Errorf("Stats() = %+v, want Cancels 1, Acquires 4, Waits 3", s)
	}
}

func TestCancelMiddleLeavesQueue(t *testing.T) {
	l := New(10)
	ctx := context.Background()
	goAcquire(t, ctx, l, 10, 0)
	first := goAcquire(t, ctx, l, 4, 1)
	midCtx, cancelMid := context.WithCancel(ctx)
	mid := goAcquire(t, midCtx, l, 4, 2)
	last := goAcquire(t, ctx, l, 4, 3)

	cancelMid()
	if err := <-mid.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire(4) = %v, want %v", err, context.Canceled)
	}
	checkStats(t, l, 10, 2)
	l.Release(10)
	first.mustAdmitted(t)
	last.mustAdmitted(t)
	checkStats(t, l, 8, 0)
}

func TestOversizeAlone(t *testing.T) {
	l := New(10)
	ctx := context.Background()
	goAcquire(t, ctx, l, 3, 0)
	huge := goAcquire(t, ctx, l, 25, 1)
	small := goAcquire(t, ctx, l, 1, 2)

	// The oversize request waits for the limiter to drain...
	l.Release(3)
	huge.mustAdmitted(t)
	checkStats(t, l, 25, 1)
	// ...and then holds it alone.
	if small.admitted(t) {
		t.Fatal("Acquire(1) admitted beside an oversize request")
	}
	if l.TryAcquire(1) {
		t.Fatal("TryAcquire(1) = true beside an oversize request")
	}
	l.Release(25)
	small.mustAdmitted(t)
	checkStats(t, l, 1, 0)

	s := l.Stats()
	if s.Peak != 25 || s.Oversize != 1 || s.Limit != 10 {
		t.Errorf("Stats() = %+v, want Peak 25, Oversize 1, Limit 10", s)
	}
}

func TestCancelRacingAdmissionHoldsNothing(t *testing.T) {
	// A waiter admitted by a Release at the moment its context is done:
	// Acquire reports the error and must give the bytes back, admitting the
	// next waiter.
	l := New(10)
	if !l.TryAcquire(10) {
		t.Fatal("TryAcquire(10) = false on an empty limiter")
	}
	w1 := l.enqueue(5)
	w2 := l.enqueue(8)
	if w1 == nil || w2 == nil {
		t.Fatal("enqueue on a full limiter admitted at once")
	}
	l.Release(10) // admits w1 (5); w2 (8) does not fit beside it
	select {
	case <-w1.ready:
	default:
		t.Fatal("Release(10) did not admit the head waiter")
	}
	checkStats(t, l, 5, 1)

	errStop := errors.New("stop")
	if err := l.cancel(w1, errStop); err != errStop {
		t.Fatalf("cancel = %v, want %v", err, errStop)
	}
	select {
	case <-w2.ready:
	default:
		t.Fatal("giving back a cancelled admission did not admit the next waiter")
	}
	checkStats(t, l, 8, 0)
	s := l.Stats()
	if s.Acquires != 2 || s.Waits != 1 || s.Cancels != 1 {
		t.Errorf("Stats() = %+v, want Acquires 2 (TryAcquire + second waiter), Waits 1, Cancels 1", s)
	}
}

func TestReleasePanics(t *testing.T) {
	tests := []struct {
		held, release int64
	}{
		{0, 1},
		{5, 6},
		{5, -1},
	}
	for _, tt := range tests {
		func() {
			l := New(10)
			l.TryAcquire(tt.held)
			defer func() {
				if recover() == nil {
					t.Errorf("held %d: Release(%d) did not panic", tt.held, tt.release)
				}
			}()
			l.Release(tt.release)
		}()
	}
}

// TestStress runs many goroutines acquiring and releasing random sizes, some
// oversize, some cancelled at random moments, and checks invariant 1 from the
// holders' side at every admission: the bytes held never exceed the limit,
// except by one oversize request holding the limiter alone.
func TestStress(t *testing.T) {
	const (
		limit   = 1000
		workers = 64
	)
	iters := 1000
	if testing.Short() {
		iters = 50
	}
	l := New(limit)

	// The model counts a request as held from just after Acquire returns
	// until just before Release, so it never holds more than the limiter.
	var model struct {
		sync.Mutex
		held          int64
		oversizeHeld  bool
		maxOversize   int64
		acquires      int64
		oversizes     int64
		cancelled     int64
		violationSeen string
	}
	hold := func(n int64) {
		model.Lock()
		defer model.Unlock()
		model.acquires++
		switch {
		case n > limit:
			if model.held != 0 && model.violationSeen == "" {
				model.violationSeen = fmt.Sprintf("oversize %d admitted beside %d bytes", n, model.held)
			}
			model.oversizeHeld = true
			model.oversizes++
			model.maxOversize = max(model.maxOversize, n)
		case model.oversizeHeld:
			if model.violationSeen == "" {
				model.violationSeen = fmt.Sprintf("%d bytes admitted beside an oversize request", n)
			}
		case model.held+n > limit:
			if model.violationSeen == "" {
				model.violationSeen = fmt.Sprintf("%d bytes admitted beside %d: over the limit %d", n, model.held, limit)
			}
		}
		model.held += n
	}
	unhold := func(n int64) {
		model.Lock()
		model.held -= n
		if n > limit {
			model.oversizeHeld = false
		}
		model.Unlock()
	}

	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			for range iters {
				var n int64
				switch r := rng.IntN(100); {
				case r < 2:
					n = limit + 1 + rng.Int64N(limit)
				case r < 4:
					n = 0
				default:
					n = 1 + rng.Int64N(limit/3)
				}
				if rng.IntN(8) == 0 {
					if l.TryAcquire(n) {
						if n > 0 {
							hold(n)
							unhold(n)
						}
						l.Release(n)
					}
					continue
				}
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				switch rng.IntN(4) {
				case 0:
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(200))*time.Microsecond)
				case 1:
					ctx, cancel = context.WithCancel(ctx)
					if rng.IntN(2) == 0 {
						cancel()
					}
				}
				err := l.Acquire(ctx, n)
				cancel()
				if err != nil {
					if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire(%d) = %v, want nil or a context error", n, err)
					}
					model.Lock()
					model.cancelled++
					model.Unlock()
					continue
				}
				if n > 0 {
					hold(n)
				}
				for range rng.IntN(3) {
					runtime.Gosched()
				}
				if n > 0 {
					unhold(n)
				}
				l.Release(n)
			}
		}()
	}
	wg.Wait() // a stuck waiter hangs here and the test times out

	if model.violationSeen != "" {
		t.Fatalf("invariant broken: %s", model.violationSeen)
	}
	s := l.Stats()
	if s.InFlight != 0 || s.Waiting != 0 {
		t.Errorf("after the run Stats() InFlight, Waiting = %d, %d; want 0, 0", s.InFlight, s.Waiting)
	}
	if s.Acquires != model.acquires || s.Oversize != model.oversizes {
		t.Errorf("Stats() Acquires, Oversize = %d, %d; the holders saw %d, %d", s.Acquires, s.Oversize, model.acquires, model.oversizes)
	}
	if s.Cancels > model.cancelled {
		t.Errorf("Stats() Cancels = %d, more than the %d failed Acquires", s.Cancels, model.cancelled)
	}
	if s.Waits > s.Acquires {
		t.Errorf("Stats() Waits = %d > Acquires = %d", s.Waits, s.Acquires)
	}
	if want := max(limit, model.maxOversize); s.Peak > want || (model.oversizes == 0 && s.Peak > limit) {
		t.Errorf("Stats() Peak = %d, want <= %d (limit %d, largest oversize %d)", s.Peak, want, limit, model.maxOversize)
	}
	t.Logf("stats: %+v; failed acquires: %d", s, model.cancelled)
}

func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	b.Run("uncontended", func(b *testing.B) {
		l := New(1 << 30)
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Acquire(ctx, 4096); err != nil {
				b.Fatal(err)
			}
			l.Release(4096)
		}
	})
	// Parallel goroutines that all fit: the cost of the shared mutex.
	b.Run("parallel/fits", func(b *testing.B) {
		l := New(1 << 40)
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := l.Acquire(ctx, 4096); err != nil {
					b.Error(err)
					return
				}
				l.Release(4096)
			}
		})
	})
	// Parallel goroutines of which only two fit at a time: most queue.
	b.Run("parallel/queued", func(b *testing.B) {
		l := New(2 * 4096)
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := l.Acquire(ctx, 4096); err != nil {
					b.Error(err)
					return
				}
				l.Release(4096)
			}
		})
		s := l.Stats()
		b.ReportMetric(float64(s.Waits)/float64(max(s.Acquires, 1)), "waits/op")
	})
}

// TestReleaseWoke: ReleaseWoke reports whether the bytes it gave back
// admitted a queued request, and only then.
func TestReleaseWoke(t *testing.T) {
	ctx := context.Background()
	l := New(100)
	if !l.TryAcquire(80) {
		t.Fatal("setup TryAcquire(80) = false")
	}
	if l.ReleaseWoke(10) {
		t.Errorf("ReleaseWoke(10) with nobody queued = true")
	}
	a := goAcquire(t, ctx, l, 50, 1) // 70 held: 50 does not fit
	if l.ReleaseWoke(10) {
		t.Errorf("ReleaseWoke(10) leaving the queued 50 short = true")
	}
	if a.admitted(t) {
		t.Fatal("Acquire(50) returned with 60 held of 100")
	}
	if !l.ReleaseWoke(10) {
		t.Errorf("ReleaseWoke(10) that let the queued 50 in = false")
	}
	a.mustAdmitted(t)
	checkStats(t, l, 100, 0)
	if l.ReleaseWoke(0) {
		t.Errorf("ReleaseWoke(0) = true")
	}
}
