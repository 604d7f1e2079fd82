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

// TestJobQueueTurns pops, a record each pop, from four map outputs queued
// at once, with a clock the test moves: the one queued longest has every
// pop while no other has waited turnWait since its last turn; then those
// that have, longest waiting first; with all of them waiting they go round
// in the order of their last turns; and a map output leaves both lists
// with its last record.
func TestJobQueueTurns(t *testing.T) {
	q := newJobQueue(1)
	var now int64
	q.clock = func() int64 { return now }
	ws := make([]*MapWriter, 4)
	for i := range ws {
		ws[i] = &MapWriter{}
		rs := make([]*record, 10)
		for j := range rs {
			rs[j] = &record{w: ws[i], partition: j, seq: int64(j), quota: popBytes}
		}
		q.push(rs)
	}
	name := func(w *MapWriter) int {
		for i, x := range ws {
			if x == w {
				return i
			}
		}
		return -1
	}
	expect := func(step string, want ...int) {
		t.Helper()
		for k, i := range want {
			rs := q.pop(nil, nil)
			if len(rs) != 1 {
				t.Fatalf("%s, pop %d: %d records, want 1", step, k, len(rs))
			}
			if got := name(rs[0].w); got != i {
				t.Fatalf("%s, pop %d: map output %d, want %d", step, k, got, i)
			}
		}
	}
	expect("nobody waited", 0)
	now = turnWait - 1
	expect("nobody waited turnWait", 0)
	now = turnWait
	expect("three waited turnWait", 1, 2, 3, 0)
	now = 3 * turnWait
	expect("all waited", 1, 2, 3, 0)
	// Map output 0's last records, then 1 is the one queued longest.
	expect("nobody waited since", 0, 0, 0, 0, 0, 0)
	expect("0 has left", 1)
	for range 23 { // the rest of 1, 2 and 3
		q.pop(nil, nil)
	}
	for k, l := range q.turns {
		if l.head != nil || l.tail != nil {
			t.Errorf("list %d not empty with every record popped", k)
		}
	}
	for i, w := range ws {
		if w.turnPrev != [2]*MapWriter{} || w.turnNext != [2]*MapWriter{} {
			t.Errorf("map output %d still linked after its last record", i)
		}
	}
}
