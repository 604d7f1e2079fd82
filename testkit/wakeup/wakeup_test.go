package wakeup

import (
	"encoding/binary"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// idle is how long the waiter's CPU stays idle before each wake-up.
const idle = 2 * time.Millisecond

var sink atomic.Uint64

// spin keeps the calling goroutine's CPU busy for d.
func spin(d time.Duration) {
	x := uint64(1)
	for t := time.Now(); time.Since(t) < d; {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink.Add(x)
}

// report puts the latencies' percentiles on b.
func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e3 }
	b.ReportMetric(q(0.5), "p50-us")
	b.ReportMetric(q(0.9), "p90-us")
	b.ReportMetric(q(0.99), "p99-us")
}

// BenchmarkWakeup measures a goroutine blocked on a channel, readied by a
// send from a goroutine that then blocks (handoff: it runs next on the
// sender's P) or keeps running for 2 ms (steal: an idle P must wake and
// take it), and, on Linux, a thread blocked in read(2) on a pipe, woken by
// a write from a thread that keeps running (thread: the kernel's and the
// hypervisor's part alone).
func BenchmarkWakeup(b *testing.B) {
	for _, c := range []struct {
		name string
		busy time.Duration // the sender's work after the send
	}{{"handoff", 0}, {"steal", 2 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			ch := make(chan time.Time)
			var lat []time.Duration
			done := make(chan struct{})
			go func() {
				for t := range ch {
					lat = append(lat, time.Since(t))
				}
				close(done)
			}()
			for b.Loop() {
				time.Sleep(idle)
				spin(50 * time.Microsecond) // the sender's CPU awake
				ch <- time.Now()
				spin(c.busy)
			}
			close(ch)
			<-done
			report(b, lat)
		})
	}
	if !pipeSupported {
		return
	}
	b.Run("thread", func(b *testing.B) {
		w, results := pipeWaiter(b)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for b.Loop() {
			time.Sleep(idle)
			spin(50 * time.Microsecond)
			w(time.Now())
			spin(2 * time.Millisecond)
		}
		report(b, results())
	})
}

// burst is how many waiters a burst wakes at once.
const burst = 15

// BenchmarkWakeupBurst wakes 15 waiters at once from one goroutine that
// then keeps running, as a producer's batch wakes the writer's idle
// workers, after every CPU but the sender's has been idle 2 ms: each
// waiter's latency from the burst's start (p50-us, p90-us, p99-us over
// every waiter of every burst; last-us, the median of each burst's
// slowest). chan: goroutines blocked on channel receives (the job queue's
// tokens); netpoll: goroutines blocked reading pipes through the runtime's
// poller; thread (Linux): threads blocked in read(2) on pipes.
func BenchmarkWakeupBurst(b *testing.B) {
	kinds := []struct {
		name  string
		start waiters
	}{{"chan", chanWaiters}, {"netpoll", netpollWaiters}}
	if pipeSupported {
		kinds = append(kinds, struct {
			name  string
			start waiters
		}{"thread", threadWaiters})
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			wake, stop := k.start(b, burst)
			for b.Loop() {
				time.Sleep(idle)
				spin(50 * time.Microsecond)
				t := time.Now()
				for i := range burst {
					wake(i, t)
				}
				spin(2 * time.Millisecond)
			}
			per := stop()
			var all, last []time.Duration
			for round := range per[0] {
				var slowest time.Duration
				for i := range per {
					if round < len(per[i]) {
						all = append(all, per[i][round])
						slowest = max(slowest, per[i][round])
					}
				}
				last = append(last, slowest)
			}
			report(b, all)
			if len(last) > 0 {
				slices.Sort(last)
				b.ReportMetric(float64(last[len(last)/2])/1e3, "last-us")
			}
		})
	}
}

// waiters starts n waiters and returns the function that wakes waiter i
// with the time t of its wake-up, and the one that ends them and returns
// each one's latencies.
type waiters func(b *testing.B, n int) (wake func(i int, t time.Time), stop func() [][]time.Duration)

// stamp writes t into buf (8 bytes) for a waiter that reads it back with
// since.
func stamp(buf []byte, t time.Time) { binary.LittleEndian.PutUint64(buf, uint64(t.UnixNano())) }

// since returns how long ago the time stamp wrote into buf was.
func since(buf []byte) time.Duration {
	return time.Duration(time.Now().UnixNano() - int64(binary.LittleEndian.Uint64(buf)))
}

// chanWaiters starts n goroutines, each receiving times on a channel of
// its own and recording how long after them it ran.
func chanWaiters(b *testing.B, n int) (func(int, time.Time), func() [][]time.Duration) {
	chs := make([]chan time.Time, n)
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		chs[i] = make(chan time.Time, 1)
		wg.Go(func() {
			for t := range chs[i] {
				lat[i] = append(lat[i], time.Since(t))
			}
		})
	}
	return func(i int, t time.Time) { chs[i] <- t }, func() [][]time.Duration {
		for _, ch := range chs {
			close(ch)
		}
		wg.Wait()
		return lat
	}
}

// netpollWaiters starts n goroutines, each reading 8-byte times from a
// pipe of its own through the runtime's poller.
func netpollWaiters(b *testing.B, n int) (func(int, time.Time), func() [][]time.Duration) {
	rs := make([]*os.File, n)
	ws := make([]*os.File, n)
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		rs[i], ws[i] = r, w
		wg.Go(func() {
			buf := make([]byte, 8)
			for {
				if _, err := io.ReadFull(r, buf); err != nil {
					return
				}
				lat[i] = append(lat[i], since(buf))
			}
		})
	}
	buf := make([]byte, 8)
	return func(i int, t time.Time) {
			stamp(buf, t)
			if _, err := ws[i].Write(buf); err != nil {
				b.Fatal(err)
			}
		}, func() [][]time.Duration {
			for _, w := range ws {
				w.Close()
			}
			wg.Wait()
			for _, r := range rs {
				r.Close()
			}
			return lat
		}
}
