package writer

import (
	"container/heap"
	"sync"
	"time"
)

// jobQueue holds admitted records until a worker encodes them. A worker
// takes a record (or popBytes of small ones) of the map output queued
// longest, unless another has waited turnWait since its last turn: the
// one that has waited longest then has a turn first. Map outputs are so
// encoded one after another rather than side by side, and one commits
// while the others still hold work for the pool (side by side, they all
// wait in Commit at once with less work left than workers); and none
// waits behind another's queue for longer than turnWait, or, with more map
// outputs waiting than the pool serves pops per turnWait, than a round of
// turns among them all. Within a map output,
// records go by partition, then run, then arrival: a map output whose runs
// were admitted before the workers got far is encoded partition by
// partition across its runs, and its commit can write each partition as
// soon as every run has it (see streamMerge) instead of after the last
// record. The limiter bounds what the queue holds.
//
// Producers do not take the lock the workers share: they put records in
// an inbox under a lock of its own, held only to append or to take the
// inbox whole, and a worker moves them into the map outputs' heaps when it
// pops. A producer that slept on the workers' lock, once a worker let it
// go, waited to run again behind that worker: at 16 cores, a map task of
// 4 batches × 2000 partitions slept on it 88 times, 0.8 ms in all, and
// then waited 1.9 ms to run (an execution trace); its hand-over of the
// batches went from 12.6 to 7.4 ms with the inbox.
type jobQueue struct {
	mu sync.Mutex // the workers': turns, queued, closed, every jobHeap and the MapWriters' turn fields
	// turns holds the map outputs with queued records twice: byArrival,
	// queued longest first; byTurn, longest since its last turn first.
	turns  [2]turnList
	queued int
	closed bool
	spare  []*record // the inbox's other buffer

	in struct {
		handoffMutex
		recs []*record // pushed, not yet in their map output's heap
		idle int       // workers waiting for a token on wake
	}
	wake  chan struct{} // a token per idle worker woken; room for every worker
	done  chan struct{} // closed by close
	clock func() int64  // nanoseconds, for turns (nanotime; tests set their own under mu)
}

func newJobQueue(workers int) *jobQueue {
	return &jobQueue{wake: make(chan struct{}, workers), done: make(chan struct{}), clock: nanotime}
}

// push queues records and wakes as many idle workers as there are records.
func (q *jobQueue) push(rs []*record) {
	q.in.Lock()
	q.in.recs = append(q.in.recs, rs...)
	wake := min(len(rs), q.in.idle)
	q.in.idle -= wake
	q.in.Unlock()
	for range wake {
		q.wake <- struct{}{} // never blocks: a token per idle worker
	}
}

// takeInbox moves the inbox's records into their map outputs' heaps. The
// caller holds q.mu. It reports whether a producer slept waiting for the
// inbox meanwhile.
func (q *jobQueue) takeInbox() (woke bool) {
	q.in.Lock()
	recs := q.in.recs
	q.in.recs = q.spare[:0]
	woke = q.in.unlockWoke()
	var now int64
	for _, r := range recs {
		w := r.w
		heap.Push(&w.jobs, r)
		if len(w.jobs) == 1 {
			if now == 0 {
				now = q.clock()
			}
			w.turnAt = now
			q.turns[byArrival].push(w, byArrival)
			q.turns[byTurn].push(w, byTurn)
		}
	}
	q.queued += len(recs)
	clear(recs)
	q.spare = recs
	return woke
}

// pop appends to rs the next records of the map output whose turn it is
// (see next): records of up to popBytes of input together (at least one),
// so that a worker takes the queue's lock once per that much work rather
// than once per small record. It returns rs empty once the queue is
// closed and empty. A producer that slept on the inbox's lock meanwhile
// marks wk (when not nil) as having woken it, and a wait for records marks
// it as waited.
func (q *jobQueue) pop(rs []*record, wk *worker) []*record {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		wk.wake(q.takeInbox())
		if q.queued > 0 {
			break
		}
		if q.closed {
			return rs
		}
		// Register as idle still holding q.mu: no other worker can take
		// into the heaps, between this check and the registration, records
		// pushed before it (whose push saw no idle worker to wake).
		q.in.Lock()
		if len(q.in.recs) > 0 { // pushed since: no token comes for them
			wk.wake(q.in.unlockWoke())
			continue
		}
		q.in.idle++
		wk.wake(q.in.unlockWoke())
		if wk != nil {
			wk.waited = true
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-q.done:
		}
		q.mu.Lock()
	}
	w := q.next(q.clock())
	var n int64
	k := len(rs)
	for len(w.jobs) > 0 && (n == 0 || n+w.jobs[0].quota <= popBytes) {
		r := heap.Pop(&w.jobs).(*record)
		n += r.quota
		rs = append(rs, r)
	}
	q.queued -= len(rs) - k
	if len(w.jobs) == 0 {
		q.turns[byArrival].remove(w, byArrival)
		q.turns[byTurn].remove(w, byTurn)
	}
	return rs
}

// turnWait is how long a map output with queued records waits for a turn
// while another's are encoded: the time to encode a few pops' worth on
// one core.
const turnWait = int64(time.Millisecond)

// next returns the map output whose turn it is at now (q.clock) and
// starts its turn: the one that has waited longest since its last turn,
// if that is turnWait, else the one queued longest. The caller holds q.mu
// and a map output has records queued. Both lists are in order (a map
// output goes to the back of byTurn at each turn, with the latest time),
// so it looks at their heads only.
func (q *jobQueue) next(now int64) *MapWriter {
	w := q.turns[byArrival].head
	c := q.turns[byTurn].head
	if c == w {
		c = c.turnNext[byTurn]
	}
	if c != nil && now-c.turnAt >= turnWait {
		w = c
	}
	w.turnAt = now
	q.turns[byTurn].remove(w, byTurn)
	q.turns[byTurn].push(w, byTurn)
	return w
}

// The job queue's two lists of map outputs (jobQueue.turns).
const (
	byArrival = iota
	byTurn
)

// turnList is a list of map outputs through their turnPrev[k] and
// turnNext[k], k being the list's index in jobQueue.turns.
type turnList struct{ head, tail *MapWriter }

func (l *turnList) push(w *MapWriter, k int) {
	w.turnPrev[k], w.turnNext[k] = l.tail, nil
	if l.tail != nil {
		l.tail.turnNext[k] = w
	} else {
		l.head = w
	}
	l.tail = w
}

func (l *turnList) remove(w *MapWriter, k int) {
	if p := w.turnPrev[k]; p != nil {
		p.turnNext[k] = w.turnNext[k]
	} else {
		l.head = w.turnNext[k]
	}
	if n := w.turnNext[k]; n != nil {
		n.turnPrev[k] = w.turnPrev[k]
	} else {
		l.tail = w.turnPrev[k]
	}
	w.turnPrev[k], w.turnNext[k] = nil, nil
}

// nanotime is the monotonic clock in nanoseconds.
func nanotime() int64 { return int64(time.Since(clockBase)) }

var clockBase = time.Now()

// popBytes is the input a worker takes from the queue at once.
const popBytes = 64 << 10

func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	close(q.done)
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
