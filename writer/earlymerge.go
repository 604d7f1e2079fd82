package writer

import (
	"context"
	"time"
)

// earlyMerge is a streaming merge started before Commit, in the map
// output's last batch (see MarkLast). Its fields are set before done is
// closed.
type earlyMerge struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    Result // MergeBytes and MemoryRuns
	path   string // the data temp file, once done without error; Commit or Abort owns it then
	seg    segments
	ok     bool // false: a run was not in memory at the start, nothing was done
	err    error
	ended  time.Time // when the data file was complete
}

// MarkLast says that the map output's writes from now on until Commit
// are its last batch: their records come in non-decreasing partition
// order. They may start one more run, at their first record, but none
// after it. When the map output then has several runs, the writer starts
// merging them at that first record, following the last run's encoding,
// instead of at Commit, so that Commit finds most of the data file
// written. MarkLast changes no byte of the output, and nothing at all
// with a Spec.Sink or when no write follows it. If a later record starts
// a run all the same, the writer drops what it merged and merges at
// Commit, as without MarkLast. An early merge that fails (a disk refusing
// the data file) fails the map output at once, as a failed run does.
func (w *MapWriter) MarkLast() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastMarked = true
}

// startEarlyMerge starts the streaming merge of the map output's runs,
// now that no run follows, if there are several. The caller holds w.mu.
func (w *MapWriter) startEarlyMerge() {
	if w.spec.Sink != nil || len(w.streams) < 2 {
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	m := &earlyMerge{cancel: cancel, done: make(chan struct{})}
	w.early = m
	streams := append([]*stream(nil), w.streams...)
	go func() {
		defer close(m.done)
		m.path, m.seg, m.ok, m.err = w.streamMerge(ctx, streams, &m.res)
		m.ended = time.Now()
		if m.err != nil && ctx.Err() == nil {
			// Not dropped nor stopped: the output cannot commit (a disk
			// refused the data file): stop the writes of the last batch.
			w.fail(m.err)
		}
	}()
}

// dropEarlyMerge stops the early merge, if one was started, waits for it
// and removes the data temp file it made, unless Commit took it. The
// caller holds w.mu.
func (w *MapWriter) dropEarlyMerge() {
	if m := w.early; m != nil {
		m.cancel()
		<-m.done
		if m.err != nil { // its bytes were admitted, and are removed
			w.spaceCredit += m.res.MergeBytes
		}
		if m.path != "" {
			_ = w.fs.Remove(m.path)
			m.path = ""
		}
	}
}
