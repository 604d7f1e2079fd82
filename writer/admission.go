package writer

import (
	"context"
)

// enqueue admits a record and holds it for the workers: it goes to them,
// queued on the current stream, with the next group of up to submitBatch
// records, or before anything blocks (records held back hold quota and
// stream slots that only their encoding gives back). On failure the record
// holds no quota and is not queued. The caller holds w.mu and calls
// submitHeld before letting go of it (writing does).
//
// The producer takes the work of admission once per group, not once per
// record, where it can: quota from its credit (see takeCredit), the
// stream's lock once per group (submitHeld). At 16 cores the producer's
// locks, shared with every worker, made it slower than the workers.
func (w *MapWriter) enqueue(ctx context.Context, r *record) error {
	if r.batch != nil {
		r.batch.add()
	}
	if !w.takeCredit(r.quota) {
		w.submitHeld()
		if err := w.e.lim.Acquire(ctx, r.quota); err != nil {
			r.quota = 0
			r.finish(nil)
			return w.wrapCtx(err)
		}
	}
	if !w.cur.trySlot() {
		w.submitHeld()
		w.releaseCredit()
		if err := w.cur.slot(ctx); err != nil {
			w.e.lim.Release(r.quota)
			r.quota = 0
			r.finish(nil)
			return w.wrapCtx(err)
		}
	}
	r.stream = w.cur
	r.run, r.seq = len(w.streams)-1, w.records
	w.records++
	if r.encoded {
		w.bytesIn += r.raw
	} else {
		w.bytesIn += r.quota
	}
	w.held = append(w.held, r)
	if len(w.held) >= submitBatch {
		w.submitHeld()
	}
	return nil
}

// submitBatch is how many admitted records a producer hands to the workers
// at once: one wake-up of the workers per group rather than per record.
const submitBatch = 16

// creditBytes is how much limiter quota a producer takes at once for the
// records it admits next, at most an eighth of the limit.
const creditBytes = 256 << 10

// takeCredit takes n bytes of quota for a record from the producer's
// credit, topping it up from the limiter without waiting; a record larger
// than a top-up asks the limiter for itself alone, as does any record
// when the limiter has no top-up to spare. It reports false, holding
// nothing more, when the limiter has not even n to spare. Unused credit
// goes back by releaseCredit before the producer blocks and when its call
// returns (writing). The caller holds w.mu.
func (w *MapWriter) takeCredit(n int64) bool {
	if n <= w.credit {
		w.credit -= n
		return true
	}
	lim := w.e.lim
	if top := min(creditBytes, lim.Limit()/8); n <= top && lim.TryAcquire(top-w.credit) {
		w.credit = top - n
		return true
	}
	w.releaseCredit()
	return lim.TryAcquire(n)
}

// releaseCredit gives the producer's unused credit back to the limiter.
func (w *MapWriter) releaseCredit() {
	if w.credit > 0 {
		w.e.lim.Release(w.credit)
		w.credit = 0
	}
}

// submitHeld queues the records held back on their streams, in order, and
// hands them to the workers.
func (w *MapWriter) submitHeld() {
	if len(w.held) == 0 {
		return
	}
	for i := 0; i < len(w.held); {
		s, j := w.held[i].stream, i+1
		for j < len(w.held) && w.held[j].stream == s {
			j++
		}
		s.queue(w.held[i:j])
		i = j
	}
	w.e.jobs.push(w.held)
	clear(w.held)
	w.held = w.held[:0]
}
