package wakeup

import (
	"runtime"
	"slices"
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
