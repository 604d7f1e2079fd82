package writer

import (
	"context"
	"errors"
	"fmt"

	"github.com/shuffled/shuffled/merge"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// flushBytes is how much of the merged data file the streaming merge
// gathers before it writes.
const flushBytes = 1 << 20

// streamMerge merges a map output of several runs whose earlier runs are
// finished and held in memory, following its last run as that run is
// written: partition p goes to the data file as soon as the last run has
// moved past p, so that the merge overlaps the last run's encoding
// instead of starting after it. It reports false, having done nothing,
// when a run is not in memory (the caller then waits and merges the
// finished runs). If the last run spills while it is merged, the rest of
// it is copied from its run file once it is finished.
func (w *MapWriter) streamMerge(ctx context.Context, res *Result) (path string, seg segments, ok bool, err error) {
	k := len(w.streams)
	runs := make([]*run, k)
	for i, s := range w.streams {
		runs[i] = s.sink.(*run)
		if i < k-1 && !runs[i].mem {
			return "", segments{}, false, nil
		}
	}
	last, lastStream := runs[k-1], w.streams[k-1]
	last.mu.Lock()
	if !last.mem {
		last.mu.Unlock()
		return "", segments{}, false, nil
	}
	last.streamed = true
	last.mu.Unlock()
	defer func() { // nothing refers to its chunks any more: they may be reused
		last.mu.Lock()
		last.streamed = false
		last.mu.Unlock()
	}()

	// Wake the wait for the last run when the caller gives up or the map
	// output is aborted.
	wake := func() {
		last.mu.Lock()
		last.cond.Broadcast()
		last.mu.Unlock()
	}
	stop1, stop2 := context.AfterFunc(ctx, wake), context.AfterFunc(w.ctx, wake)
	defer stop1()
	defer stop2()

	fsys := w.e.opts.fs
	temp := shufflefile.TempName(w.dataPath)
	dst, err := fsys.Create(temp, 0o600)
	if err != nil {
		return "", segments{}, true, err
	}
	var lastFile vfs.File // the last run's file, once it spilled and ended
	defer func() {
		if lastFile != nil {
			if cerr := lastFile.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}
		if cerr := dst.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			_ = fsys.Remove(temp)
			path = ""
		}
	}()

	cursors := make([]merge.Cursor, k)
	for i := range k - 1 {
		cursors[i] = merge.Cursor{Chunks: runs[i].chunks}
	}
	var pending [][]byte
	var pendingBytes, lastOff, total int64
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := w.grow(pendingBytes); err != nil {
			return err
		}
		err := merge.WriteBuffers(dst, pending)
		clear(pending)
		total += pendingBytes
		pending, pendingBytes = pending[:0], 0
		if err != nil {
			return fmt.Errorf("write %s: %w", temp, err)
		}
		return nil
	}
	// lastEnded waits for the last run's stream and returns its error.
	lastEnded := func() error {
		select {
		case <-lastStream.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if lastStream.err != nil {
			return lastStream.err
		}
		return w.stopped()
	}
	for p := range w.spec.NumPartitions {
		for i := range k - 1 {
			if n := runs[i].lengths[p]; n > 0 {
				pending = cursors[i].Take(pending, n)
				pendingBytes += n
			}
		}
		if lastFile == nil {
			last.mu.Lock()
			for last.progress <= p && !last.finished && ctx.Err() == nil && w.stopped() == nil {
				if len(pending) > 0 { // write what is ready while the last run catches up
					last.mu.Unlock()
					if err := flush(); err != nil {
						return "", segments{}, true, err
					}
					last.mu.Lock()
					continue
				}
				last.cond.Wait()
			}
			if last.finished && last.failed || ctx.Err() != nil || w.stopped() != nil {
				last.mu.Unlock()
				err := lastEnded()
				if err == nil {
					err = errors.New("the last run failed")
				}
				return "", segments{}, true, err
			}
			if last.mem {
				if n := last.lengths[p]; n > 0 {
					cursors[k-1].Chunks = last.chunks
					pending = cursors[k-1].Take(pending, n)
					pendingBytes += n
					lastOff += n
				}
				last.mu.Unlock()
			} else {
				// Spilled: its file holds all of it once its stream ends.
				last.mu.Unlock()
				if err := flush(); err != nil {
					return "", segments{}, true, err
				}
				if err := lastEnded(); err != nil {
					return "", segments{}, true, err
				}
				if lastFile, err = fsys.Open(last.file.path); err != nil {
					return "", segments{}, true, err
				}
			}
		}
		if lastFile != nil {
			if n := last.lengths[p]; n > 0 {
				if err := flush(); err != nil {
					return "", segments{}, true, err
				}
				if err := w.grow(n); err != nil {
					return "", segments{}, true, err
				}
				if _, err := vfs.CopyRange(dst, lastFile, lastOff, n); err != nil {
					return "", segments{}, true, err
				}
				lastOff += n
				total += n
			}
		}
		if pendingBytes >= flushBytes {
			if err := flush(); err != nil {
				return "", segments{}, true, err
			}
		}
	}
	if err := flush(); err != nil {
		return "", segments{}, true, err
	}
	if err := lastEnded(); err != nil {
		return "", segments{}, true, err
	}
	if err := ctx.Err(); err != nil {
		return "", segments{}, true, err
	}
	seg = newSegments(w.spec.NumPartitions, w.spec.Checksum)
	for _, ru := range runs {
		for p, n := range ru.lengths {
			if n > 0 {
				var s uint32
				if ru.checksums != nil {
					s = ru.checksums[p]
				}
				seg.add(p, int(n), s)
			}
		}
	}
	res.MergeBytes = total
	res.MemoryRuns = k
	if lastFile != nil {
		res.MemoryRuns--
	}
	return temp, seg, true, nil
}
