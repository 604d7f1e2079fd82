// Package limiter bounds the bytes that records hold in memory across the
// whole daemon: a record acquires its size before it is serialized and
// compressed and releases it once its bytes are written (or dropped on any
// error path).
//
// Invariant: the bytes in flight never exceed the limit, except while exactly
// one oversize request (larger than the limit) holds the limiter alone. An
// oversize request is admitted only when nothing is in flight, and while it is
// in flight nothing else is admitted, so it cannot starve and cannot overlap.
//
// Admission is strictly first-in first-out: a request is admitted when it fits
// and no earlier request is still waiting. A large request at the head of the
// queue therefore holds back smaller ones behind it; that is what keeps large
// records from starving. A waiter whose context is cancelled leaves the queue
// and holds nothing; if it was at the head, the requests behind it are
// reconsidered at once.
//
// Waiting costs one small allocation and one channel per queued request;
// nothing polls and no goroutine is started.
package limiter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shuffled/shuffled/errdefs"
)

// ErrInvalidSize is returned by Acquire for a negative size.
var ErrInvalidSize = errdefs.New(errdefs.ErrInternal, "limiter: invalid size")

// Limiter is a FIFO-fair, cancellable counting semaphore over bytes. The zero
// value is not usable; call New. A Limiter is safe for concurrent use.
type Limiter struct {
	limit int64

	mu struct {
		sync.Mutex
		inFlight int64
		// head and tail of the FIFO queue of waiters.
		head, tail *waiter
		stats      Stats
	}
}

// waiter is one queued Acquire. Its fields other than ready are guarded by
// Limiter.mu.
type waiter struct {
	n          int64
	start      time.Time
	ready      chan struct{} // closed once admitted
	admitted   bool
	prev, next *waiter
}

// Stats is a snapshot of a Limiter's state and counters.
type Stats struct {
	// Limit is the configured limit in bytes.
	Limit int64
	// InFlight is the number of bytes held now.
	InFlight int64
	// Peak is the high-water mark of InFlight. It exceeds Limit only if an
	// oversize request was admitted (alone).
	Peak int64
	// Acquires counts admitted requests of more than zero bytes, by Acquire
	// or TryAcquire; Waits counts those of them that had to queue.
	Acquires, Waits int64
	// WaitTime is the total time requests spent queued, whether they were
	// admitted in the end or cancelled.
	WaitTime time.Duration
	// Oversize counts admissions of requests larger than Limit.
	Oversize int64
	// Cancels counts queued requests that left the queue because their
	// context was done, and so hold nothing.
	Cancels int64
	// Waiting is the number of requests queued now.
	Waiting int
}

// New returns a limiter admitting up to limit bytes at once. It panics if
// limit is not positive: a limit comes from validated configuration, so a
// bad one here is a bug.
func New(limit int64) *Limiter {
	if limit <= 0 {
		panic(fmt.Sprintf("limiter: New: limit = %d, want > 0", limit))
	}
	return &Limiter{limit: limit}
}

// Limit returns the limit in bytes.
func (l *Limiter) Limit() int64 { return l.limit }

// Acquire blocks until n bytes are admitted or ctx is done. It returns nil
// holding n bytes, which the caller must give back with Release(n); or an
// error holding nothing: one wrapping ctx.Err() if ctx was done before the
// request was admitted (including when Acquire is called with ctx already
// done), or one wrapping ErrInvalidSize if n is negative.
//
// Acquiring zero bytes succeeds at once (unless ctx is done), holds nothing
// and is not counted; Release(0) is its matching no-op.
//
// A request of more than Limit bytes waits until it is at the head of the
// queue and nothing is in flight, then holds the limiter alone.
func (l *Limiter) Acquire(ctx context.Context, n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: acquire n = %d", ErrInvalidSize, n)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("limiter: acquire %d bytes: %w", n, err)
	}
	if n == 0 {
		return nil
	}

	w := l.enqueue(n)
	if w == nil {
		return nil
	}
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		return l.cancel(w, fmt.Errorf("limiter: acquire %d bytes: %w", n, ctx.Err()))
	}
}

// enqueue admits n bytes at once if they fit and nobody is queued, and then
// returns nil; otherwise it queues a waiter for them and returns it.
func (l *Limiter) enqueue(n int64) *waiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.head == nil && l.fitsLocked(n) {
		l.admitLocked(n)
		return nil
	}
	w := &waiter{n: n, start: time.Now(), ready: make(chan struct{})}
	l.pushLocked(w)
	return w
}

// cancel takes the queued waiter w out after its context is done and returns
// err. If w was admitted concurrently with the cancellation, its bytes are
// given back, so a cancelled Acquire never holds anything.
func (l *Limiter) cancel(w *waiter, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &l.mu.stats
	st.Cancels++
	if w.admitted {
		// Undo the admission: the caller sees an error and will not
		// release. The wait was already counted in WaitTime.
		st.Acquires--
		st.Waits--
		if w.n > l.limit {
			st.Oversize--
		}
		l.mu.inFlight -= w.n
		l.notifyLocked()
		return err
	}
	st.WaitTime += time.Since(w.start)
	wasHead := w == l.mu.head
	l.removeLocked(w)
	if wasHead {
		// The cancelled head may have been the only thing keeping smaller
		// requests behind it waiting.
		l.notifyLocked()
	}
	return err
}

// TryAcquire admits n bytes if that is possible at once without waiting and
// without overtaking a queued request, and reports whether it did. Like
// Acquire, n == 0 always succeeds and holds nothing. It panics if n is
// negative.
func (l *Limiter) TryAcquire(n int64) bool {
	if n < 0 {
		panic(fmt.Sprintf("limiter: TryAcquire: n = %d, want >= 0", n))
	}
	if n == 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.head != nil || !l.fitsLocked(n) {
		return false
	}
	l.admitLocked(n)
	return true
}

// Release gives back n bytes obtained from Acquire or TryAcquire and admits
// the queued requests that now fit, in order. It panics if n is negative or
// more than is held: that is a bug in the caller's accounting.
func (l *Limiter) Release(n int64) { l.ReleaseWoke(n) }

// ReleaseWoke is Release that reports whether it admitted a queued request:
// whether an Acquire that waited returns because of it.
func (l *Limiter) ReleaseWoke(n int64) bool {
	if n == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n < 0 || n > l.mu.inFlight {
		panic(fmt.Sprintf("limiter: Release: n = %d, but %d bytes are in flight", n, l.mu.inFlight))
	}
	l.mu.inFlight -= n
	return l.notifyLocked()
}

// Stats returns a snapshot of the limiter's state and counters.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.mu.stats
	s.Limit = l.limit
	s.InFlight = l.mu.inFlight
	return s
}

// fitsLocked reports whether n bytes may be admitted now, queue aside. A
// request up to the limit fits beside what is in flight; a larger one only
// when nothing is in flight. While an oversize request holds the limiter,
// inFlight > limit, so nothing fits.
func (l *Limiter) fitsLocked(n int64) bool {
	if n > l.limit {
		return l.mu.inFlight == 0
	}
	return l.mu.inFlight+n <= l.limit
}

// admitLocked accounts an admission of n bytes.
func (l *Limiter) admitLocked(n int64) {
	l.mu.inFlight += n
	st := &l.mu.stats
	if l.mu.inFlight > st.Peak {
		st.Peak = l.mu.inFlight
	}
	st.Acquires++
	if n > l.limit {
		st.Oversize++
	}
}

// notifyLocked admits waiters from the head of the queue for as long as the
// head fits. It stops at the first one that does not: nobody overtakes it.
// It reports whether it admitted any.
func (l *Limiter) notifyLocked() (admitted bool) {
	var now time.Time
	for w := l.mu.head; w != nil && l.fitsLocked(w.n); w = l.mu.head {
		if now.IsZero() {
			now = time.Now()
		}
		l.removeLocked(w)
		l.admitLocked(w.n)
		l.mu.stats.Waits++
		l.mu.stats.WaitTime += now.Sub(w.start)
		w.admitted = true
		close(w.ready)
		admitted = true
	}
	return admitted
}

// pushLocked appends w to the queue.
func (l *Limiter) pushLocked(w *waiter) {
	w.prev = l.mu.tail
	if l.mu.tail != nil {
		l.mu.tail.next = w
	} else {
		l.mu.head = w
	}
	l.mu.tail = w
	l.mu.stats.Waiting++
}

// removeLocked unlinks w from the queue.
func (l *Limiter) removeLocked(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.mu.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.mu.tail = w.prev
	}
	w.prev, w.next = nil, nil
	l.mu.stats.Waiting--
}
