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

// The streaming merge preallocates the data file for the bytes its runs
// hold once its writes come within preallocAhead of what it allocated, and
// not for fewer than preallocMin bytes at a time.
const (
	preallocAhead = 4 << 20
	preallocMin   = 1 << 20
)

// streamMerge merges a map output of several runs held in memory while
// they are still written: partition p goes to the data file as soon as
// every run has moved past p. The workers encode a map output's records
// partition by partition across its runs (see jobQueue), so the merge
// follows the encoding instead of starting after the last record. It
// reports false, having done nothing, when a run is not in memory at the
// start (the caller then waits for the runs and merges them). A run that
// spills while it is merged is finished from its run file once its stream
// has ended.
func (w *MapWriter) streamMerge(ctx context.Context, streams []*stream, res *Result) (path string, seg segments, ok bool, err error) {
	k := len(streams)
	runs := make([]*run, k)
	for i, s := range streams {
		runs[i] = s.sink.(*run)
	}
	for i, ru := range runs {
		ru.mu.Lock()
		if !ru.mem {
			ru.mu.Unlock()
			for _, r := range runs[:i] {
				r.mu.Lock()
				r.streamed = false
				r.mu.Unlock()
			}
			return "", segments{}, false, nil
		}
		ru.streamed = true
		ru.mu.Unlock()
	}
	defer func() { // nothing refers to their chunks any more: they may be reused
		for _, ru := range runs {
			ru.mu.Lock()
			ru.streamed = false
			ru.mu.Unlock()
		}
	}()

	// Wake the waits for the runs when the caller gives up or the map
	// output is aborted.
	wake := func() {
		for _, ru := range runs {
			ru.mu.Lock()
			ru.cond.Broadcast()
			ru.mu.Unlock()
		}
	}
	stop1, stop2 := context.AfterFunc(ctx, wake), context.AfterFunc(w.ctx, wake)
	defer stop1()
	defer stop2()

	fsys := w.fs
	temp := shufflefile.TempName(w.dataPath)
	dst, err := fsys.Create(temp, 0o600)
	if err != nil {
		return "", segments{}, true, err
	}
	// A run's file, read through a window: the first run's prefix, and a
	// run that spilled, once its stream has ended (spilled).
	windows := make([]merge.Window, k)
	spilled := make([]bool, k)
	defer func() {
		for _, win := range windows {
			if win.File != nil {
				if cerr := win.File.Close(); err == nil && cerr != nil {
					err = cerr
				}
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

	// With encryption, the runs after the first are encrypted as they are
	// merged (merge.Sealer).
	var sl *merge.Sealer
	if w.spec.Encryption != nil {
		if sl, err = merge.NewSealer(w.encryption(), w.spec.NumPartitions, w.spec.Checksum); err != nil {
			return "", segments{}, true, err
		}
	}
	cursors := make([]merge.Cursor, k)
	offsets := make([]int64, k) // bytes of each run merged so far
	taken := make([]int64, k)   // bytes each run had taken when last seen
	var pending [][]byte
	// total: bytes written; grown: bytes the Space admitted for the file;
	// allocated: bytes preallocated (see preallocate).
	var pendingBytes, total, grown, allocated int64
	defer func() {
		if err != nil { // what the Space admitted for the removed file
			res.MergeBytes = grown
		}
	}()
	// reserve has the Space admit the file's bytes up to end.
	reserve := func(end int64) error {
		if end <= grown {
			return nil
		}
		if err := w.grow(end - grown); err != nil {
			return err
		}
		grown = end
		return nil
	}
	// preallocate allocates the data file's blocks for every byte the runs
	// had taken when the merge last looked at them, once the writes come
	// within preallocAhead of what is allocated: each of those bytes goes
	// to the file, and the merge's writes, on its critical path once the
	// last run has ended, then skip the file system's block allocation.
	// (taken only grows, so allocated never passes what the file gets.)
	preallocate := func() error {
		if allocated-(total+pendingBytes) >= preallocAhead {
			return nil
		}
		var known int64
		for _, n := range taken {
			known += n
		}
		if known-allocated < preallocMin {
			return nil
		}
		if err := reserve(known); err != nil {
			return err
		}
		vfs.Preallocate(dst, allocated, known-allocated)
		allocated = known
		return nil
	}
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := preallocate(); err != nil {
			return err
		}
		if err := reserve(total + pendingBytes); err != nil {
			return err
		}
		err := merge.WriteBuffers(dst, pending)
		if sl != nil {
			sl.Reset()
		}
		clear(pending)
		total += pendingBytes
		pending, pendingBytes = pending[:0], 0
		if err != nil {
			return fmt.Errorf("write %s: %w", temp, err)
		}
		return nil
	}
	// ended waits for run i's stream and returns its error.
	ended := func(i int) error {
		s := streams[i]
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if s.err != nil {
			return s.err
		}
		return w.stopped()
	}
	// copyIn copies n bytes at off of a run file to the data file, after
	// what is gathered.
	copyIn := func(f vfs.File, off, n int64) error {
		if err := flush(); err != nil {
			return err
		}
		if err := reserve(total + n); err != nil {
			return err
		}
		if _, err := vfs.CopyRange(dst, f, off, n); err != nil {
			return err
		}
		total += n
		return nil
	}
	// fromFile adds m bytes at off of run i's file, of the first end it
	// holds for the merge (opening it first): large pieces are copied in
	// the kernel, small ones read through the run's window.
	fromFile := func(i int, off, m, end int64) error {
		win := &windows[i]
		if win.File == nil {
			f, err := runs[i].file.reopen()
			if err != nil {
				return err
			}
			win.File, win.Size = f, merge.WindowBytes(k)
		}
		win.End = end
		if sl != nil && i > 0 { // read, encrypted, in pieces the window holds
			piece := min(int64(win.Size), merge.CopyBytes-1)
			for m > 0 {
				n := min(m, piece)
				b, err := win.Read(off, n, flush)
				if err != nil {
					return err
				}
				h := sl.Held()
				pending = sl.Seal(pending, b)
				pendingBytes += sl.Held() - h
				off, m = off+n, m-n
				if pendingBytes >= flushBytes {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if !win.Fits(m) {
			return copyIn(win.File, off, m)
		}
		b, err := win.Read(off, m, flush) // pending may hold slices of the window
		if err != nil {
			return err
		}
		pending = append(pending, b)
		pendingBytes += m
		return nil
	}
	// segment adds run i's segment of partition p, once the run has it.
	segment := func(i, p int) error {
		ru := runs[i]
		if !spilled[i] {
			ru.mu.Lock()
			for ru.progress <= p && !ru.finished && ctx.Err() == nil && w.stopped() == nil {
				if len(pending) > 0 { // write what is ready while the run catches up
					ru.mu.Unlock()
					if err := flush(); err != nil {
						return err
					}
					ru.mu.Lock()
					continue
				}
				ru.waiters++
				ru.cond.Wait()
				ru.waiters--
			}
			taken[i] = ru.taken
			if ru.finished && ru.failed || ctx.Err() != nil || w.stopped() != nil {
				ru.mu.Unlock()
				if err := ended(i); err != nil {
					return err
				}
				return errors.New("a run failed")
			}
			if ru.mem {
				n := ru.lengths[p]
				if off := offsets[i]; n > 0 && off < ru.prefix {
					m := min(n, ru.prefix-off)
					if err := fromFile(i, off, m, ru.prefix); err != nil { // only the first run has a prefix
						ru.mu.Unlock()
						return err
					}
					offsets[i] += m
					n -= m
				}
				if n > 0 {
					cursors[i].Chunks = ru.chunks
					if sl != nil && i > 0 {
						h := sl.Held()
						for _, b := range cursors[i].Take(nil, n) {
							pending = sl.Seal(pending, b)
						}
						pendingBytes += sl.Held() - h
					} else {
						pending = cursors[i].Take(pending, n)
						pendingBytes += n
					}
					offsets[i] += n
				}
				ru.mu.Unlock()
				return nil
			}
			// Spilled: its file holds all of it once its stream ends.
			ru.mu.Unlock()
			if err := flush(); err != nil {
				return err
			}
			if err := ended(i); err != nil {
				return err
			}
			spilled[i] = true // the first run's file stays open from its prefix
		}
		n := ru.lengths[p] // the stream has ended
		if n == 0 {
			return nil
		}
		if err := fromFile(i, offsets[i], n, sum(ru.lengths)); err != nil {
			return err
		}
		offsets[i] += n
		return nil
	}
	for p := range w.spec.NumPartitions {
		for i := range k {
			if err := segment(i, p); err != nil {
				return "", segments{}, true, err
			}
			if i == 0 && sl != nil { // the first run has passed p: its segment is known
				ru := runs[0]
				ru.mu.Lock()
				var s0 uint32
				if ru.checksums != nil {
					s0 = ru.checksums[p]
				}
				sl.Begin(p, ru.lengths[p], s0)
				ru.mu.Unlock()
			}
		}
		if sl != nil {
			sl.End()
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
	for i := range k {
		if err := ended(i); err != nil {
			return "", segments{}, true, err
		}
	}
	if sl != nil {
		seg = segments{alg: w.spec.Checksum, lengths: sl.Lengths(), checksums: sl.Checksums()}
	} else {
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
	}
	res.MergeBytes = total
	for i := range runs {
		if !spilled[i] && runs[i].fromMemory() {
			res.MemoryRuns++
		}
	}
	return temp, seg, true, nil
}
