package writer

import (
	"sync"
	"testing"
	"time"
)

// TestJobQueueHandsOutEveryRecord pushes records from several producers,
// in bursts with pauses that let every worker go idle, to workers that pop
// them: each record comes out exactly once, no worker sleeps through a
// push (the last burst is taken without a further push), and close ends
// the idle workers.
func TestJobQueueHandsOutEveryRecord(t *testing.T) {
	const workers, producers, bursts, perBurst = 4, 3, 50, 7
	q := newJobQueue(workers)
	writers := make([]*MapWriter, producers)
	for i := range writers {
		writers[i] = &MapWriter{}
	}
	var mu sync.Mutex
	seen := map[*record]int{}
	var wg sync.WaitGroup
	startPoppers(q, workers, &wg, func(rs []*record) {
		mu.Lock()
		for _, r := range rs {
			seen[r]++
		}
		mu.Unlock()
	})
	var all []*record
	var pwg sync.WaitGroup
	var amu sync.Mutex
	for i, w := range writers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for b := range bursts {
				rs := make([]*record, perBurst)
				for j := range rs {
					rs[j] = &record{w: w, partition: j, seq: int64(b*perBurst + j), quota: 1}
				}
				amu.Lock()
				all = append(all, rs...)
				amu.Unlock()
				q.push(rs)
				if b%10 == i {
					time.Sleep(time.Millisecond) // the workers go idle
				}
			}
		}()
	}
	pwg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == len(all) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records popped 10 s after the last push: a worker slept through a push", n, len(all))
		}
		time.Sleep(time.Millisecond)
	}
	q.close()
	wg.Wait()
	for _, r := range all {
		if seen[r] != 1 {
			t.Fatalf("record %d of a map output popped %d times, want once", r.seq, seen[r])
		}
	}
}

// startPoppers starts n workers that pop records from q, hand each pop to
// got, and return (wg.Done) once q is closed and empty.
func startPoppers(q *jobQueue, n int, wg *sync.WaitGroup, got func(rs []*record)) {
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rs []*record
			for {
				rs = q.pop(rs[:0], nil)
				if len(rs) == 0 {
					return
				}
				got(rs)
			}
		}()
	}
}
