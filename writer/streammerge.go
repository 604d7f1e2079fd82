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

// prefixCopyBytes is the size from which a piece of the first run's file
// prefix is copied file to file in the kernel instead of through memory.
const prefixCopyBytes = 256 << 10

// prefixReader holds a window of the first run's file prefix: buf is the
// file's bytes from start.
type prefixReader struct {
	f     vfs.File
	buf   []byte
	start int64
}

// streamMerge merges a map output of several runs held in memory while
// they are still written: partition p goes to the data file as soon as
// every run has moved past p. The workers encode a map output's records
// partition by partition across its runs (see jobQueue), so the merge
// follows the encoding instead of starting after the last record. It
// reports false, having done nothing, when a run is not in memory at the
// start (the caller then waits for the runs and merges them). A run that
// spills while it is merged is finished from its run file once its stream
// has ended.
func (w *MapWriter) streamMerge(ctx context.Context, res *Result) (path string, seg segments, ok bool, err error) {
	k := len(w.streams)
	runs := make([]*run, k)
	for i, s := range w.streams {
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
	files := make([]vfs.File, k) // a run's file, once it spilled and ended
	var prefix prefixReader      // the first run's, once its prefix is read
	defer func() {
		for _, f := range append(files, prefix.f) {
			if f != nil {
				if cerr := f.Close(); err == nil && cerr != nil {
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

	cursors := make([]merge.Cursor, k)
	offsets := make([]int64, k) // bytes of each run merged so far
	var pending [][]byte
	var pendingBytes, total int64
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
	// ended waits for run i's stream and returns its error.
	ended := func(i int) error {
		s := w.streams[i]
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
		if err := w.grow(n); err != nil {
			return err
		}
		if _, err := vfs.CopyRange(dst, f, off, n); err != nil {
			return err
		}
		total += n
		return nil
	}
	// fromPrefix adds m bytes at off of the first run's file prefix (the
	// bytes it wrote to its file before the second run started): large
	// pieces are copied in the kernel, small ones read through a buffer.
	fromPrefix := func(off, m int64) error {
		ru, pr := runs[0], &prefix
		if pr.f == nil {
			f, err := fsys.Open(ru.file.path)
			if err != nil {
				return err
			}
			pr.f = f
		}
		if m >= prefixCopyBytes {
			return copyIn(pr.f, off, m)
		}
		if off < pr.start || off+m > pr.start+int64(len(pr.buf)) {
			if err := flush(); err != nil { // pending may hold slices of the buffer
				return err
			}
			if pr.buf == nil {
				pr.buf = make([]byte, flushBytes)
			}
			pr.buf = pr.buf[:min(int64(cap(pr.buf)), ru.prefix-off)]
			if _, err := pr.f.ReadAt(pr.buf, off); err != nil {
				return fmt.Errorf("read %s: %w", ru.file.path, err)
			}
			pr.start = off
		}
		pending = append(pending, pr.buf[off-pr.start:off-pr.start+m])
		pendingBytes += m
		return nil
	}
	// segment adds run i's segment of partition p, once the run has it.
	segment := func(i, p int) error {
		ru := runs[i]
		if files[i] == nil {
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
				ru.cond.Wait()
			}
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
					if err := fromPrefix(off, m); err != nil { // only the first run has a prefix
						ru.mu.Unlock()
						return err
					}
					offsets[i] += m
					n -= m
				}
				if n > 0 {
					cursors[i].Chunks = ru.chunks
					pending = cursors[i].Take(pending, n)
					pendingBytes += n
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
			if i == 0 && prefix.f != nil { // the same file, opened for its prefix
				files[0], prefix.f = prefix.f, nil
			} else {
				f, err := fsys.Open(ru.file.path)
				if err != nil {
					return err
				}
				files[i] = f
			}
		}
		n := ru.lengths[p] // the stream has ended
		if n == 0 {
			return nil
		}
		if err := copyIn(files[i], offsets[i], n); err != nil {
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
	for i, f := range files {
		if f == nil && runs[i].fromMemory() {
			res.MemoryRuns++
		}
	}
	return temp, seg, true, nil
}
