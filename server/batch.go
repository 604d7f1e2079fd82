package server

import (
	"encoding/binary"
	"fmt"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/ingest"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/writer"
)

// maxInline is the largest inline payload announced: the frame limit less
// room for the Batch head and its layout (partition offsets, column
// descriptors), so a payload of max_inline bytes still fits in a frame.
func maxInline(maxFrame int) int { return max(maxFrame-1<<20, maxFrame/2) }

// batch applies one Batch. Any failure aborts the map output; later
// requests on its handle get Aborted.
func (sess *session) batch(id uint32, m *protocol.Batch, h *held) error {
	o, ok := sess.outputs[m.Handle]
	if !ok {
		return fmt.Errorf("%w: handle %d is not an open map output of this connection", errdefs.ErrNotFound, m.Handle)
	}
	if o.failed != nil {
		return fmt.Errorf("%w: map output %d/%d: %v", writer.ErrAborted, o.id.Shuffle, o.id.Map, o.failed)
	}
	err := sess.applyBatch(o, m, h)
	if err != nil {
		o.failed = err
		sess.abort(o, "batch failed")
		return err
	}
	sess.send(id, &protocol.BatchAccepted{})
	return nil
}

// applyBatch checks the batch against its map output and hands it to the
// data planes, which hand it to the writer. What they take of h (the
// descriptor, the inline frame) they own; the caller releases the rest.
func (sess *session) applyBatch(o *output, m *protocol.Batch, h *held) error {
	if o.last {
		return fmt.Errorf("%w: Batch on map output %d/%d after its last batch (Batch.flags LAST)", errdefs.ErrFailedPrecondition, o.id.Shuffle, o.id.Map)
	}
	if m.Kind != o.kind {
		return fmt.Errorf("%w: Batch.kind %v, but the map output was opened %v", errdefs.ErrFailedPrecondition, m.Kind, o.kind)
	}
	field, parts := "partition_offsets", len(m.Opaque.PartitionOffsets)-1
	if m.Kind == protocol.KindColumnar {
		field, parts = "partition_rows", len(m.Columnar.PartitionRows)-1
	}
	if parts != o.w.NumPartitions() {
		return fmt.Errorf("%w: Batch.%s has %d entries (%d partitions), but the map output was opened with num_partitions %d, want %d entries",
			errdefs.ErrFailedPrecondition, field, parts+1, parts, o.w.NumPartitions(), o.w.NumPartitions()+1)
	}
	if m.Flags&protocol.BatchLast != 0 {
		o.last = true
		o.w.MarkLast() // a merge of several runs may start in this batch
	}
	if limit := maxInline(sess.s.cfg.MaxFrame); m.Plane == protocol.PlaneInline && len(m.Inline) > limit {
		return fmt.Errorf("%w: Batch inline length %d exceeds max_inline %d; send larger batches in a memfd", errdefs.ErrResourceExhausted, len(m.Inline), limit)
	}
	bytesIn, err := sess.data.Apply(sess.log, ingest.Output{Writer: o.w, Schema: o.schema}, m, h)
	if err != nil {
		return err
	}
	sess.s.metrics.BytesIn.Add(float64(bytesIn))
	return nil
}

// failUndecoded aborts the open map output that a Batch which failed to
// decode names (its payload starts with the u64 handle), as any batch that
// fails validation does: a later Commit of it gets Aborted.
func (sess *session) failUndecoded(f *protocol.Frame, err error) {
	if f.Type != protocol.TypeBatch || len(f.Payload) < 8 {
		return
	}
	o, ok := sess.outputs[binary.LittleEndian.Uint64(f.Payload)]
	if !ok || o.failed != nil {
		return
	}
	o.failed = err
	sess.abort(o, "batch failed")
}
