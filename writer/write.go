package writer

import (
	"context"
	"fmt"

	"github.com/shuffled/shuffled/partition"
)

// checkPartition validates a partition id and starts a new run when it goes
// backwards.
func (w *MapWriter) checkPartition(p int) error {
	if p < 0 || p >= w.spec.NumPartitions {
		return fmt.Errorf("%w: map output %s: partition %d out of range [0,%d)", ErrInvalid, w.name(), p, w.spec.NumPartitions)
	}
	if w.cur == nil || (p < w.last && w.spec.Sink == nil) {
		if w.early != nil { // MarkLast was wrong: merge at Commit after all
			w.dropEarlyMerge()
			w.early = nil
		}
		if err := w.startRun(); err != nil {
			return err
		}
	}
	w.last = p
	if w.lastMarked && !w.lastRun {
		w.lastRun = true
		w.startEarlyMerge()
		if w.spec.Sink == nil && len(w.streams) == 1 {
			// No run follows the first: the record that continues it
			// sends it to its file, which becomes the data file.
			w.streams[0].sink.(*run).markLast()
		}
	}
	return nil
}

// startRun closes the current run's queue, if any, and starts a new stream.
func (w *MapWriter) startRun() error {
	n := len(w.streams) + 1
	if w.spec.Sink == nil && (n > MaxRuns || n*w.spec.NumPartitions > maxRunSegments) {
		err := fmt.Errorf("%w: map output %s: run %d of %d partitions exceeds %d runs or %d run segments", ErrTooManyRuns, w.name(), n, w.spec.NumPartitions, MaxRuns, maxRunSegments)
		w.fail(err)
		return err
	}
	if n > 2 && w.spec.Sink == nil && w.spec.RunState != nil {
		if err := w.spec.RunState(int64(w.spec.NumPartitions) * RunTableBytes); err != nil {
			err = fmt.Errorf("writer: map output %s: run %d: %w", w.name(), n, err)
			w.fail(err)
			return err
		}
	}
	var s sink
	if w.spec.Sink != nil {
		cs, err := w.spec.Sink(SinkSpec{FS: w.fs, DataPath: w.dataPath, NumPartitions: w.spec.NumPartitions, Checksum: w.spec.Checksum, Space: w.spec.Space})
		if err != nil {
			err = fmt.Errorf("writer: map output %s: sink: %w", w.name(), err)
			w.fail(err)
			return err
		}
		s = custom{cs}
	} else {
		ru, err := w.newRun(len(w.streams) == 0)
		if err != nil {
			err = fmt.Errorf("writer: map output %s: run %d: %w", w.name(), len(w.streams), err)
			w.fail(err)
			return err
		}
		s = ru
	}
	if len(w.streams) == 1 && w.spec.Sink == nil {
		if err := w.streams[0].sink.(*run).follow(); err != nil {
			err = fmt.Errorf("writer: map output %s: run 0: %w", w.name(), err)
			_ = s.close(true)
			s.remove()
			w.fail(err)
			return err
		}
	}
	if w.cur != nil {
		w.submitHeld() // the records held back belong to the stream closed now
		w.cur.close()
	}
	w.cur = w.startStream(s)
	w.streams = append(w.streams, w.cur)
	return nil
}

// WriteBatch adds a columnar batch: each partition's slice is serialized (see
// package partition) into one record, or several when it is larger than the
// engine's record size. The batch must have the map output's number of
// partitions and is validated first; an invalid batch is an ErrInvalid error
// and nothing of it is written. The batch's buffers must stay unchanged
// until onDone (may be nil) is called, once no record refers to them any
// more; onDone is called exactly once, also when WriteBatch fails, and may
// be called before WriteBatch returns.
func (w *MapWriter) WriteBatch(ctx context.Context, b *partition.Batch, onDone func()) error {
	return w.WriteBatchHooks(ctx, b, BatchHooks{Done: onDone})
}

// BatchHooks tell the caller of WriteBatchHooks or WriteOpaqueHooks how
// the writer reads the batch's bytes, so that it can let go of memory the
// writer no longer reads (the daemon drops the pages of a mapped memfd).
// Every field may be nil.
type BatchHooks struct {
	// Validated is called once the batch is checked, before any record
	// of it is admitted (a columnar batch's checks read its offsets and
	// validity); not at all if the check fails.
	Validated func()
	// Read is called, from the worker that encoded it, once each record
	// of the batch no longer refers to the batch's bytes: n is what the
	// record held of them (its limiter quota). Calls may be concurrent.
	Read func(n int64)
	// Done is the onDone of WriteBatch and WriteOpaque: called exactly
	// once, after the last Read, when no record refers to the batch's
	// bytes any more; also when the call fails, and possibly before it
	// returns.
	Done func()
}

// WriteBatchHooks is WriteBatch that tells h how the batch's bytes are
// read.
func (w *MapWriter) WriteBatchHooks(ctx context.Context, b *partition.Batch, h BatchHooks) error {
	ref := newBatchRef(h.Done)
	ref.read = h.Read
	defer ref.release()
	if err := b.Validate(); err != nil {
		return fmt.Errorf("%w: map output %s: batch: %w", ErrInvalid, w.name(), err)
	}
	if h.Validated != nil {
		h.Validated()
	}
	if n := b.NumPartitions(); n != w.spec.NumPartitions {
		return fmt.Errorf("%w: map output %s: batch has %d partitions, want %d", ErrInvalid, w.name(), n, w.spec.NumPartitions)
	}
	return w.writing(ctx, func(ctx context.Context) error { return w.writeColumnar(ctx, b, ref) })
}

// writeColumnar queues the records of every partition's slice of b. The
// caller holds w.mu.
func (w *MapWriter) writeColumnar(ctx context.Context, b *partition.Batch, ref *batchRef) error {
	for p := range w.spec.NumPartitions {
		start, end := b.PartitionRows(p)
		if start == end {
			continue
		}
		if err := w.checkPartition(p); err != nil {
			return err
		}
		var bounds []int
		if w.spec.Format.Size(b, start, end) <= w.e.opts.recordSize {
			bounds = []int{start, end}
		} else {
			bounds = w.spec.Format.Split(b, start, end, w.e.opts.recordSize)
		}
		for i := 1; i < len(bounds); i++ {
			lo, hi := bounds[i-1], bounds[i]
			r := &record{w: w, partition: p, cols: b, rowStart: lo, rowEnd: hi, batch: ref}
			r.quota = int64(w.spec.Format.Size(b, lo, hi))
			if err := w.enqueue(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Write adds an opaque record: partition p's bytes, already serialized by
// the client. Bytes larger than the engine's record size are split into
// several records (codec streams concatenate, so the partition decodes to
// the same bytes). Write returns once every record is admitted; data must
// stay unchanged until Commit or Abort returns (WriteOpaque says exactly
// when). Empty data is a no-op: empty partitions occupy no bytes.
func (w *MapWriter) Write(ctx context.Context, p int, data []byte) error {
	if p < 0 || p >= w.spec.NumPartitions {
		return fmt.Errorf("%w: map output %s: partition %d out of range [0,%d)", ErrInvalid, w.name(), p, w.spec.NumPartitions)
	}
	return w.writing(ctx, func(ctx context.Context) error { return w.writeOpaque(ctx, p, data, nil) })
}

// WriteOpaque adds an opaque batch: partition p is data[offsets[p]:
// offsets[p+1]], for the map output's numPartitions+1 offsets (the first 0,
// non-decreasing, the last len(data)). Invalid offsets are an ErrInvalid
// error and nothing is written. data must stay unchanged until onDone (may
// be nil) is called, once no record refers to it any more; onDone is called
// exactly once, also when WriteOpaque fails.
func (w *MapWriter) WriteOpaque(ctx context.Context, data []byte, offsets []int64, onDone func()) error {
	return w.WriteOpaqueHooks(ctx, data, offsets, BatchHooks{Done: onDone})
}

// WriteOpaqueHooks is WriteOpaque that tells h how the batch's bytes are
// read.
func (w *MapWriter) WriteOpaqueHooks(ctx context.Context, data []byte, offsets []int64, h BatchHooks) error {
	ref := newBatchRef(h.Done)
	ref.read = h.Read
	defer ref.release()
	if err := checkOffsets(offsets, w.spec.NumPartitions, int64(len(data))); err != nil {
		return fmt.Errorf("%w: map output %s: %w", ErrInvalid, w.name(), err)
	}
	if h.Validated != nil {
		h.Validated()
	}
	return w.writing(ctx, func(ctx context.Context) error {
		for p := range w.spec.NumPartitions {
			if err := w.writeOpaque(ctx, p, data[offsets[p]:offsets[p+1]], ref); err != nil {
				return err
			}
		}
		return nil
	})
}

func checkOffsets(offsets []int64, numPartitions int, size int64) error {
	if len(offsets) != numPartitions+1 {
		return fmt.Errorf("%d partition offsets, want %d", len(offsets), numPartitions+1)
	}
	if offsets[0] != 0 {
		return fmt.Errorf("partition offset[0] = %d, want 0", offsets[0])
	}
	for p := 1; p < len(offsets); p++ {
		if offsets[p] < offsets[p-1] {
			return fmt.Errorf("partition offset[%d] = %d < offset[%d] = %d", p, offsets[p], p-1, offsets[p-1])
		}
	}
	if last := offsets[numPartitions]; last != size {
		return fmt.Errorf("partition offset[%d] = %d, want the payload length %d", numPartitions, last, size)
	}
	return nil
}

// writeOpaque queues partition p's bytes as records of at most the record
// size. The caller holds w.mu.
func (w *MapWriter) writeOpaque(ctx context.Context, p int, data []byte, ref *batchRef) error {
	if len(data) == 0 {
		return nil
	}
	if err := w.checkPartition(p); err != nil {
		return err
	}
	size := w.e.opts.recordSize
	for len(data) > 0 {
		n := min(len(data), size)
		r := &record{w: w, partition: p, quota: int64(n), data: data[:n], batch: ref}
		if err := w.enqueue(ctx, r); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}
