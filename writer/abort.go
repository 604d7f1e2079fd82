package writer

import (
	"context"
	"fmt"
)

// Abort discards the map output: every record still in flight is dropped and
// its quota released, and every file it made is removed. Aborting twice is a
// no-op; aborting a committed map output returns ErrCommitted and changes
// nothing.
func (w *MapWriter) Abort() error {
	w.aborted.Store(true)
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.state {
	case committed:
		return fmt.Errorf("map output %s: %w", w.name(), ErrCommitted)
	case aborted:
		return nil
	}
	w.abortLocked()
	return nil
}

// abortLocked waits for every stream (workers never block, so this ends) and
// removes the files of every run.
func (w *MapWriter) abortLocked() {
	w.aborted.Store(true)
	w.cancel()
	_ = w.wait(context.Background())
	w.dropEarlyMerge() // before the runs' memory goes: it may read it
	for _, s := range w.streams {
		s.sink.remove()
	}
	w.streams = nil
	w.state = aborted
	w.e.done()
}
