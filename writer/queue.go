package writer

import (
	"container/heap"
	"sync"
)

// jobQueue holds admitted records until a worker encodes them. Map outputs
// with queued records take turns, one record each, so that no map output
// waits behind another; within a map output, records go by partition, then
// run, then arrival: a map output whose runs were admitted before the
// workers got far is encoded partition by partition across its runs, and
// its commit can write each partition as soon as every run has it (see
// streamMerge) instead of after the last record. The limiter bounds what
// the queue holds.
type jobQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	turns  []*MapWriter // map outputs with queued records, in turn
	queued int
	closed bool
}

func newJobQueue() *jobQueue {
	q := &jobQueue{}
	q.cond.L = &q.mu
	return q
}

func (q *jobQueue) push(r *record) {
	w := r.w
	q.mu.Lock()
	heap.Push(&w.jobs, r)
	if len(w.jobs) == 1 {
		q.turns = append(q.turns, w)
	}
	q.queued++
	q.mu.Unlock()
	q.cond.Signal()
}

// pop returns the next record, or nil once the queue is closed and empty.
func (q *jobQueue) pop() *record {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.queued == 0 {
		if q.closed {
			return nil
		}
		q.cond.Wait()
	}
	w := q.turns[0]
	r := heap.Pop(&w.jobs).(*record)
	q.queued--
	copy(q.turns, q.turns[1:])
	q.turns = q.turns[:len(q.turns)-1]
	if len(w.jobs) > 0 {
		q.turns = append(q.turns, w) // its next turn after the others'
	}
	return r
}

func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// jobHeap is a map output's queued records, guarded by the queue's mutex.
type jobHeap []*record

func (h jobHeap) Len() int { return len(h) }

func (h jobHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	switch {
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
