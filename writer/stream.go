package writer

import (
	"context"
	"time"
)

// A stream is the ordered tail of the pipeline: it takes a map output's
// records in arrival order and hands each one's bytes to a sink once it and
// every record before it are encoded. There is no goroutine per stream: the
// worker that finishes the record at the head of the queue puts it and
// every finished record after it (one worker at a time per stream, so a
// sink sees one put at a time, in order), and the stream ends when the
// last record is put after the queue is closed. There is one stream per
// run (or one for a Spec.Sink).
type stream struct {
	w    *MapWriter
	sink sink
	// slots bounds the records queued and not yet put: the limiter already
	// bounds their bytes; this bounds their number.
	slots chan struct{}

	mu       handoffMutex
	recs     []*record // queued records; recs[head:] are not yet put
	head     int
	draining bool // a worker is putting records
	closed   bool // no record follows
	ended    bool

	err     error         // first failure; read after done is closed
	endedAt time.Time     // when it ended; read after done is closed
	done    chan struct{} // closed once every record is put and the sink closed
}

// streamQueue bounds how many admitted records wait for their stream.
const streamQueue = 1 << 14

func (w *MapWriter) startStream(s sink) *stream {
	return &stream{w: w, sink: s, slots: make(chan struct{}, streamQueue), done: make(chan struct{})}
}

// slot takes a slot for a record, once one is free.
func (s *stream) slot(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// trySlot takes a slot for a record if one is free.
func (s *stream) trySlot() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// queue appends records, each holding a slot, in arrival order.
func (s *stream) queue(rs []*record) {
	s.mu.Lock()
	s.recs = append(s.recs, rs...)
	s.mu.Unlock()
}

// finished is called by the worker that encoded r (or failed to): if r is
// at the head of the queue and no worker puts records, this one puts r and
// the finished records after it.
func (s *stream) finished(r *record, wk *worker) {
	s.mu.Lock()
	r.ready = true
	if s.draining || s.head == len(s.recs) || s.recs[s.head] != r {
		wk.wake(s.mu.unlockWoke())
		return
	}
	s.drain(wk)
}

// close marks the end of the queue: no record follows.
func (s *stream) close() {
	s.mu.Lock()
	s.closed = true
	if s.draining {
		s.mu.Unlock()
		return
	}
	s.drain(nil)
}

// drain puts the finished records at the head of the queue, in order, and
// ends the stream after its last record. s.mu is held on entry and
// released on return. wk is the worker that drains, nil for a call that
// is not on a worker.
func (s *stream) drain(wk *worker) {
	s.draining = true
	for s.head < len(s.recs) && s.recs[s.head].ready {
		r := s.recs[s.head]
		s.recs[s.head] = nil
		s.head++
		wk.wake(s.mu.unlockWoke())
		s.write(r)
		wk.wake(r.woke)
		r.woke = false
		<-s.slots
		s.mu.Lock()
	}
	if s.head == len(s.recs) { // reuse the queue's memory
		s.recs, s.head = s.recs[:0], 0
	}
	s.draining = false
	if !s.closed || s.head < len(s.recs) || s.ended {
		wk.wake(s.mu.unlockWoke())
		return
	}
	s.ended = true
	wk.wake(s.mu.unlockWoke())
	if err := s.sink.close(s.err != nil); err != nil && s.err == nil {
		s.err = err
		s.w.fail(err)
	}
	s.endedAt = time.Now()
	close(s.done)
	wk.wake(true) // a commit or a merge may wait for it
}

// write hands one finished record to the sink (unless the stream already
// failed) and releases what the sink does not keep.
func (s *stream) write(r *record) {
	w := s.w
	var kept int64
	if s.err == nil {
		switch {
		case r.err != nil:
			s.err = r.err
		case w.aborted.Load():
			s.err = ErrAborted
		default:
			kept, s.err = s.sink.put(r)
		}
		if s.err != nil {
			w.fail(s.err)
		}
	}
	if w.e.lim.ReleaseWoke(r.quota - kept) { // a producer waited for quota
		r.woke = true
	}
	if r.done() {
		r.woke = true
	}
}
