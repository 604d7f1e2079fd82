package writer

import (
	"container/heap"
	"slices"
	"sync"
	"time"
)

// jobQueue holds admitted records until a worker encodes them. A worker
// takes a record (or popBytes of small ones) of the map output queued
// longest, unless another has waited turnWait since its last turn: that
// one has a turn first. Map outputs are so encoded one after another
// rather than side by side, and one commits while the others still hold
// work for the pool (side by side, they all wait in Commit at once with
// less work left than workers); and none waits behind another's queue for
// more than turnWait per map output ahead of it. Within a map output,
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
	mu     sync.Mutex   // the workers': turns, queued, closed, every jobHeap and MapWriter.turnAt
	turns  []*MapWriter // map outputs with queued records, queued longest first
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
			q.turns = append(q.turns, w)
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
	i := q.next(q.clock())
	w := q.turns[i]
	var n int64
	k := len(rs)
	for len(w.jobs) > 0 && (n == 0 || n+w.jobs[0].quota <= popBytes) {
		r := heap.Pop(&w.jobs).(*record)
		n += r.quota
		rs = append(rs, r)
	}
	q.queued -= len(rs) - k
	if len(w.jobs) == 0 {
		q.turns = slices.Delete(q.turns, i, i+1)
	}
	return rs
}

// turnWait bounds how long a map output with queued records waits for a
// turn while another's are encoded (with k map outputs ahead of it, k
// times that at most): the time to encode a few pops' worth on one core.
const turnWait = int64(time.Millisecond)

// next returns the index in turns of the map output whose turn it is at
// now (q.clock) and starts its turn: the first that has waited turnWait
// since its last turn, else the one queued longest. The caller holds q.mu
// and turns is not empty. It scans turns, the map outputs with records
// queued (a few dozen), once per pop of up to popBytes of encoding.
func (q *jobQueue) next(now int64) int {
	i := 0
	for j, w := range q.turns[1:] {
		if now-w.turnAt >= turnWait {
			i = j + 1
			break
		}
	}
	q.turns[i].turnAt = now
	return i
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
