package writer

import (
	"container/heap"
	"sync"
)

// jobQueue holds admitted records until a worker encodes them. Map outputs
// with queued records take turns, a record (or popBytes of small ones)
// each, so that no map output waits behind another; within a map output,
// records go by partition, then run, then arrival: a map output whose runs
// were admitted before the workers got far is encoded partition by
// partition across its runs, and its commit can write each partition as
// soon as every run has it (see streamMerge) instead of after the last
// record. The limiter bounds what the queue holds.
type jobQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	turns  []*MapWriter // map outputs with queued records, in turn
	queued int
	idle   int // workers waiting for a record
	closed bool
}

func newJobQueue() *jobQueue {
	q := &jobQueue{}
	q.cond.L = &q.mu
	return q
}

// push queues records and wakes as many idle workers as there are records.
func (q *jobQueue) push(rs []*record) {
	q.mu.Lock()
	for _, r := range rs {
		w := r.w
		heap.Push(&w.jobs, r)
		if len(w.jobs) == 1 {
			q.turns = append(q.turns, w)
		}
	}
	q.queued += len(rs)
	wake := min(len(rs), q.idle)
	q.mu.Unlock()
	for range wake {
		q.cond.Signal()
	}
}

// pop appends to rs the next records of the map output whose turn it is:
// records of up to popBytes of input together (at least one), so that a
// worker takes the queue's lock once per that much work rather than once
// per small record. It returns rs empty once the queue is closed and empty.
func (q *jobQueue) pop(rs []*record) []*record {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.queued == 0 {
		if q.closed {
			return rs
		}
		q.idle++
		q.cond.Wait()
		q.idle--
	}
	w := q.turns[0]
	var n int64
	for len(w.jobs) > 0 && (n == 0 || n+w.jobs[0].quota <= popBytes) {
		r := heap.Pop(&w.jobs).(*record)
		n += r.quota
		rs = append(rs, r)
	}
	q.queued -= len(rs)
	copy(q.turns, q.turns[1:])
	q.turns = q.turns[:len(q.turns)-1]
	if len(w.jobs) > 0 {
		q.turns = append(q.turns, w) // its next turn after the others'
	}
	return rs
}

// popBytes is the input a worker takes from the queue at once.
const popBytes = 64 << 10

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
