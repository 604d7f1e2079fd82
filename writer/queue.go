package writer

import (
	"container/heap"
	"sync"
)

// jobQueue holds admitted records until a worker encodes them, in the
// order their map output's data file needs them: by map output (the one
// opened first first), then partition, then run, then arrival. A map
// output whose runs were all admitted before the workers got far is thus
// encoded partition by partition across its runs, and its commit can
// write each partition as soon as its last run has it instead of after
// the last run ends. The limiter bounds what the queue holds.
type jobQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	h      jobHeap
	closed bool
}

func newJobQueue() *jobQueue {
	q := &jobQueue{}
	q.cond.L = &q.mu
	return q
}

func (q *jobQueue) push(r *record) {
	q.mu.Lock()
	heap.Push(&q.h, r)
	q.mu.Unlock()
	q.cond.Signal()
}

// pop returns the next record, or nil once the queue is closed and empty.
func (q *jobQueue) pop() *record {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.h) == 0 {
		if q.closed {
			return nil
		}
		q.cond.Wait()
	}
	return heap.Pop(&q.h).(*record)
}

func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

type jobHeap []*record

func (h jobHeap) Len() int { return len(h) }

func (h jobHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	switch {
	case a.w.seq != b.w.seq:
		return a.w.seq < b.w.seq
	case a.partition != b.partition:
		return a.partition < b.partition
	case a.run != b.run:
		return a.run < b.run
	}
	return a.seq < b.seq
}

func (h jobHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)   { *h = append(*h, x.(*record)) }
func (h *jobHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return r
}
