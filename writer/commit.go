package writer

import (
	"context"
	"fmt"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
)

// Result is what a committed map output holds.
type Result struct {
	// Lengths and Checksums are per partition, as committed. When Existing is
	// set, another attempt of the same map output committed first, and these
	// are its figures (Spark's first-commit-wins).
	Lengths   []int64
	Checksums []uint32 // nil when the algorithm is None
	Existing  bool

	Runs       int   // runs the records formed (1 with a Spec.Sink)
	Records    int64 // records encoded
	BytesIn    int64 // uncompressed bytes written
	BytesOut   int64 // bytes on disk: the data file's length
	MergeBytes int64 // bytes the merge of several runs wrote
	// EarlyMerge: the merge of several runs began before Commit, while
	// the batch MarkLast announced was written.
	EarlyMerge bool
	// MemoryRuns is how many runs the merge took from memory rather than
	// from run files.
	MemoryRuns int

	// Where Commit's time went. EncodeWait: from Commit's call until the
	// last run had all its records, encoded and handed to it, its run
	// file flushed (0 if that was before the call). MergeTail: from then
	// until the data file was complete, the part of a merge of several
	// runs (or of a Spec.Sink's Assemble) that did not overlap the
	// encoding (0 also when an early merge was done by then), or the
	// writing of a single run that was still in memory; 0 for one run
	// streamed to its file. Files: writing the index and checksum files
	// and committing all three (0 for a Spec.Sink that writes no file).
	EncodeWait, MergeTail, Files time.Duration
}

// setPhases sets res's EncodeWait and MergeTail for a commit called at
// start whose runs all ended by ended and whose data file was complete
// at assembled (after a merge, if merged).
func (res *Result) setPhases(start, ended, assembled time.Time, merged bool) {
	res.EncodeWait = max(0, ended.Sub(start))
	if merged {
		res.MergeTail = max(0, assembled.Sub(start.Add(res.EncodeWait)))
	}
}

// lastEnded returns when the last of the map output's streams ended; every
// stream has ended.
func (w *MapWriter) lastEnded() time.Time {
	var t time.Time
	for _, s := range w.streams {
		if s.endedAt.After(t) {
			t = s.endedAt
		}
	}
	return t
}

// wait closes the open stream and waits for every stream to finish; it
// returns the first stream error.
func (w *MapWriter) wait(ctx context.Context) error {
	w.closeRun()
	return waitStreams(ctx, w.streams)
}

// closeRun closes the open stream's queue: no record follows.
func (w *MapWriter) closeRun() {
	if w.cur != nil {
		w.cur.close()
		w.cur = nil
	}
}

// waitStreams waits for streams to finish and returns the first error. A
// cancelled ctx wins over streams that finished meanwhile (select would
// pick either at random): a Commit cancelled while its own last write was
// blocked (closeRun flushes in the caller) commits nothing.
func waitStreams(ctx context.Context, streams []*stream) error {
	var first error
	for _, s := range streams {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if s.err != nil && first == nil {
			first = s.err
		}
	}
	return first
}

// Commit finishes the map output: it waits for every record to be written,
// merges the runs if there are several, and commits the data, index and
// checksum files atomically. On any error the map output is aborted: nothing
// is committed and no file of it remains.
func (w *MapWriter) Commit(ctx context.Context) (Result, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		if w.state == open {
			w.abortLocked()
		}
		return Result{}, err
	}
	res, err := w.commitLocked(ctx)
	if err != nil {
		w.abortLocked()
		return Result{}, err
	}
	// The runs (or partition files) were merged into the data file.
	for _, s := range w.streams {
		s.sink.remove()
	}
	w.streams = nil
	w.state = committed
	w.cancel()
	w.e.done()
	return res, nil
}

func (w *MapWriter) commitLocked(ctx context.Context) (Result, error) {
	start := time.Now()
	res := Result{Runs: len(w.streams), Records: w.records, BytesIn: w.bytesIn}
	if w.spec.Sink == nil && len(w.streams) >= 2 {
		// Several runs: the merge may follow them as they are written.
		w.closeRun()
		var dataTemp string
		var seg segments
		var ok bool
		var err error
		var assembled time.Time     // when the data file was complete
		if m := w.early; m != nil { // started in the last batch
			if err := ctx.Err(); err != nil {
				return Result{}, w.wrapCtx(err)
			}
			select {
			case <-m.done:
			case <-ctx.Done():
				return Result{}, w.wrapCtx(ctx.Err())
			}
			m.cancel()
			dataTemp, seg, ok, err, assembled = m.path, m.seg, m.ok, m.err, m.ended
			m.path = "" // commitData owns it
			res.MergeBytes, res.MemoryRuns, res.EarlyMerge = m.res.MergeBytes, m.res.MemoryRuns, ok
		} else {
			dataTemp, seg, ok, err = w.streamMerge(ctx, w.streams, &res)
			assembled = time.Now()
		}
		if err != nil {
			return Result{}, w.wrapErr(err)
		}
		if ok {
			res.setPhases(start, w.lastEnded(), assembled, true)
			return w.commitData(res, dataTemp, seg)
		}
	}
	if err := w.wait(ctx); err != nil {
		return Result{}, w.wrapCtx(err)
	}
	if w.aborted.Load() {
		return Result{}, fmt.Errorf("map output %s: %w", w.name(), ErrAborted)
	}
	ended := w.lastEnded()
	if w.spec.Sink != nil && len(w.streams) == 1 {
		cs := w.streams[0].sink.(custom).s
		dataTemp, lengths, sums, err := cs.Assemble(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("writer: map output %s: %w", w.name(), err)
		}
		res.setPhases(start, ended, time.Now(), true)
		if dataTemp == "" {
			res.Lengths, res.Checksums, res.BytesOut = lengths, sums, sum(lengths)
			return res, nil
		}
		return w.commitData(res, dataTemp, segments{alg: w.spec.Checksum, lengths: lengths, checksums: sums})
	}
	dataTemp, seg, merged, err := w.assemble(ctx, &res)
	if err != nil {
		return Result{}, fmt.Errorf("writer: map output %s: %w", w.name(), err)
	}
	res.setPhases(start, ended, time.Now(), merged)
	return w.commitData(res, dataTemp, seg)
}

// commitData commits a finished data temp file with its index and checksum
// file; the temp file is gone afterwards on every path.
func (w *MapWriter) commitData(res Result, dataTemp string, seg segments) (Result, error) {
	if w.aborted.Load() { // an Abort that came during the merge still wins
		_ = w.fs.Remove(dataTemp)
		return Result{}, fmt.Errorf("map output %s: %w", w.name(), ErrAborted)
	}
	c := shufflefile.Commit{
		FS:        w.fs,
		Layout:    w.spec.Layout,
		ID:        w.spec.ID,
		DataTemp:  dataTemp,
		Lengths:   seg.lengths,
		Checksums: seg.checksums,
		Algorithm: w.spec.Checksum,
		Sync:      w.e.opts.sync,
		FileMode:  w.e.opts.fileMode,
		Locks:     w.e.opts.locks,
	}
	start := time.Now()
	lengths, sums, existing, err := c.Do()
	if err != nil {
		return Result{}, fmt.Errorf("writer: map output %s: commit: %w", w.name(), err)
	}
	res.Files = time.Since(start)
	res.Lengths, res.Checksums, res.Existing, res.BytesOut = lengths, sums, existing, sum(lengths)
	return res, nil
}

// assemble produces the finished data temp file: the single run's file as
// it is (written now if the run was kept in memory), or a merge of several
// runs; the bool reports whether it wrote the file's bytes now. Run files are
// removed once merged; on error, assemble removes what it made and
// abortLocked removes the rest.
func (w *MapWriter) assemble(ctx context.Context, res *Result) (string, segments, bool, error) {
	fsys := w.fs
	switch len(w.streams) {
	case 0:
		// No record at all: an empty data file.
		path := shufflefile.TempName(w.dataPath)
		f, err := fsys.Create(path, 0o600)
		if err != nil {
			return "", segments{}, false, err
		}
		if err := f.Close(); err != nil {
			_ = fsys.Remove(path)
			return "", segments{}, false, err
		}
		return path, newSegments(w.spec.NumPartitions, w.spec.Checksum), false, nil
	case 1:
		ru := w.streams[0].sink.(*run)
		wrote := ru.file == nil // kept in memory to the end
		if wrote {
			if err := ru.writeOut(); err != nil {
				return "", segments{}, false, err
			}
		}
		ru.releaseMemory()
		w.streams = nil // the run file is now the data temp file; Commit owns it
		return ru.file.path, ru.segments, wrote, nil
	}
	path, seg, err := w.mergeRuns(ctx, res)
	return path, seg, true, err
}

func sum(lengths []int64) int64 {
	var total int64
	for _, n := range lengths {
		total += n
	}
	return total
}
