package writer

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestJobQueueNoIdleWithWork looks for a worker asleep while a record waits
// in the queue's heaps and no token is on its way. pop lets go of q.mu
// before it takes q.in to register as idle: a push in that gap (which sees
// no idle worker, so sends no token) whose records another worker takes
// into the heaps before the first one registers leaves the first asleep
// until the next push, with work queued. Two workers each hold a record;
// both are let go while two more records (of two map outputs, a pop each)
// are pushed: both must end up holding one.
func TestJobQueueNoIdleWithWork(t *testing.T) {
	const iters = 3000
	q := newJobQueue(2)
	var popped atomic.Int64
	var relMu sync.Mutex
	release := make(chan struct{})
	var wg sync.WaitGroup
	startPoppers(q, 2, &wg, func(rs []*record) {
		relMu.Lock()
		rel := release // before popped moves: the round's channel
		relMu.Unlock()
		popped.Add(int64(len(rs)))
		<-rel
	})
	a, b := &MapWriter{}, &MapWriter{}
	batch := func(seq int64) []*record {
		return []*record{{w: a, seq: seq, quota: popBytes}, {w: b, seq: seq, quota: popBytes}}
	}
	waitPopped := func(n int64) {
		for popped.Load() < n {
			time.Sleep(10 * time.Microsecond)
		}
	}
	q.push(batch(0))
	waitPopped(2)
	stalls := 0
	for i := 1; i <= iters; i++ {
		relMu.Lock()
		old := release
		release = make(chan struct{})
		relMu.Unlock()
		close(old)              // both workers come back to pop
		q.push(batch(int64(i))) // while they do
		want := int64(2 * (i + 1))
		for popped.Load() < want {
			q.mu.Lock()
			q.in.Lock()
			stalled := q.in.idle == 1 && len(q.wake) == 0 && q.queued == 1 && len(q.in.recs) == 0 && popped.Load() == want-1
			q.in.Unlock()
			q.mu.Unlock()
			if stalled {
				// Give the sleeper every chance: it has no token to wake with.
				time.Sleep(time.Millisecond)
				q.mu.Lock()
				q.in.Lock()
				stalled = q.in.idle == 1 && len(q.wake) == 0 && q.queued == 1 && popped.Load() == want-1
				q.in.Unlock()
				q.mu.Unlock()
				if stalled {
					stalls++
					// Let the busy worker go: it takes the record left behind.
					relMu.Lock()
					old := release
					release = make(chan struct{})
					relMu.Unlock()
					close(old)
					waitPopped(want)
					break
				}
			}
			time.Sleep(5 * time.Microsecond)
		}
	}
	relMu.Lock()
	close(release)
	relMu.Unlock()
	q.close()
	wg.Wait()
	if stalls > 0 {
		t.Errorf("%d of %d rounds: a worker slept with a record in the heaps and no token coming (the other worker busy)", stalls, iters)
	}
}
