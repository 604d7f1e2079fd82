package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
)

// The pool of a --gpu run stands in for a GPU executor: every batch is
// generated on the host, uploaded to device 0 and hash-partitioned there by
// gpu.Partitioner (Spark's Murmur3 of the key column, seed 42, pmod, a
// stable scatter into partition order with partition offsets), and stays
// there for the run; the daemon gets its IPC handle and layout. The
// partitioned batch is read back once, to count its serialized bytes and,
// with --verify, to compare it row for row with what partition.Partition
// makes of the same host batch. Without the cuda tag, package gpu fails
// every call; Config.Validate refuses --gpu before that.

// deviceBatch is a pool batch in device memory.
type deviceBatch struct {
	buf    *gpu.Buffer
	ipc    protocol.CUDAIPC
	region protocol.Region
}

// devicePool is the device side of a --gpu pool.
type devicePool struct {
	dev  *gpu.Device
	part *gpu.Partitioner
	bufs []*gpu.Buffer

	// rows went through the partitioner in gpuTime (the Partition calls,
	// the copy of the partition offsets back included); with --verify,
	// cpuTime is partition.Partition's time on the same batches and
	// checkedRows the rows compared.
	rows        int64
	gpuTime     time.Duration
	cpuTime     time.Duration
	checkedRows int64
}

// openDevicePool opens device 0 and loads the partition kernels.
func openDevicePool() (*devicePool, error) {
	d, err := gpu.Open(0)
	if err != nil {
		return nil, fmt.Errorf("loadgen: --gpu: %w", err)
	}
	part, err := d.NewPartitioner()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("loadgen: --gpu: %w", err)
	}
	return &devicePool{dev: d, part: part}, nil
}

func (dp *devicePool) close() {
	for _, b := range dp.bufs {
		b.Free()
	}
	dp.part.Close()
	dp.dev.Close()
}

// hostBatch generates pool batch j, not partitioned, in the layout the
// device will hold it in.
func hostBatch(cfg *Config, j int) (*poolBatch, error) {
	b, err := synthesize(cfg, j)
	if err != nil {
		return nil, err
	}
	pb := &poolBatch{index: j, rows: b.Rows, raw: b}
	size, layout := columnar.Layout(b)
	pb.layout = layout
	pb.dev = &deviceBatch{region: protocol.Region{Length: int64(size)}}
	// Whole words past the last buffer: the kernels write validity
	// bitmaps a 4-byte word at a time.
	pb.payload = make([]byte, size+columnar.Align)
	columnar.Fill(pb.payload, b, &pb.layout)
	return pb, nil
}

// add uploads pb's host batch, partitions it into device memory of its
// own, exports that, and sets pb's partition rows and serialized size.
// With --verify it checks the GPU's partitioning against the host
// partitioner's and keeps the host's batch as the pool's source for the
// verification of the outputs.
func (dp *devicePool) add(ctx context.Context, p *pool, pb *poolBatch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j := pb.index
	src, err := dp.dev.Upload(pb.payload)
	if err != nil {
		return fmt.Errorf("loadgen: --gpu: batch %d: %w", j, err)
	}
	defer src.Free()
	dst, err := dp.dev.Alloc(src.Size())
	if err != nil {
		return fmt.Errorf("loadgen: --gpu: batch %d: %w", j, err)
	}
	dp.bufs = append(dp.bufs, dst)
	start := time.Now()
	offs, err := dp.part.Partition(dst, src, gpuLayout(&pb.layout), keyColumns, p.cfg.Partitions)
	dp.gpuTime += time.Since(start)
	if err != nil {
		return fmt.Errorf("loadgen: --gpu: batch %d: %w", j, err)
	}
	dp.rows += int64(pb.rows)
	pb.layout.PartitionRows = offs
	h, err := dst.IPCHandle()
	if err != nil {
		return fmt.Errorf("loadgen: --gpu: batch %d: %w", j, err)
	}
	pb.dev.buf = dst
	pb.dev.ipc = protocol.CUDAIPC{Handle: h, Device: uint32(dp.dev.Ordinal())}

	host := make([]byte, pb.dev.region.Length)
	if err := dst.CopyTo(host, 0); err != nil {
		return fmt.Errorf("loadgen: --gpu: batch %d: %w", j, err)
	}
	got := batchView(host, &pb.layout)
	if err := got.Validate(); err != nil {
		return fmt.Errorf("%w: pool batch %d: the GPU's partitioned batch is not valid: %w", ErrMismatch, j, err)
	}
	for q := range p.cfg.Partitions {
		pb.serialized += int64(partition.SliceSize(got, q))
	}
	if p.cfg.Verify {
		start := time.Now()
		want, err := partition.Partition(pb.raw, keyColumns, p.cfg.Partitions)
		dp.cpuTime += time.Since(start)
		if err != nil {
			return fmt.Errorf("loadgen: partition batch %d: %w", j, err)
		}
		if err := sameRows(got, want); err != nil {
			return fmt.Errorf("%w: pool batch %d: the GPU partitioned it differently from the host partitioner: %w", ErrMismatch, j, err)
		}
		dp.checkedRows += int64(pb.rows)
		s := &p.sources[j]
		s.once.Do(func() { s.batch = want })
	}
	pb.payload, pb.raw = nil, nil
	return nil
}

// gpuLayout is l as package gpu spells it.
func gpuLayout(l *protocol.ColumnarLayout) gpu.Layout {
	gl := gpu.Layout{Rows: int(l.Rows), Columns: make([]gpu.Column, len(l.Columns))}
	for i, c := range l.Columns {
		gl.Columns[i] = gpu.Column{Type: partition.Type(c.Type), Validity: gpu.Range(c.Validity), Offsets: gpu.Range(c.Offsets), Data: gpu.Range(c.Data), Children: int(c.Children)}
	}
	return gl
}

// batchView is the batch that l locates in payload, its buffers aliasing
// payload (the offsets are decoded).
func batchView(payload []byte, l *protocol.ColumnarLayout) *partition.Batch {
	b := &partition.Batch{
		Rows:             int(l.Rows),
		Columns:          make([]partition.Column, len(l.Columns)),
		PartitionOffsets: make([]int32, len(l.PartitionRows)),
	}
	at := func(buf protocol.Buffer) []byte {
		if buf.Length == 0 {
			return nil
		}
		return payload[buf.Offset : buf.Offset+buf.Length]
	}
	for i, c := range l.Columns {
		pc := &b.Columns[i]
		pc.Name, pc.Type = c.Name, partition.Type(c.Type)
		pc.Precision, pc.Scale = int8(c.Precision), int8(c.Scale)
		pc.Validity, pc.Data = at(c.Validity), at(c.Data)
		if raw := at(c.Offsets); raw != nil {
			pc.Offsets = make([]int32, len(raw)/4)
			for r := range pc.Offsets {
				pc.Offsets[r] = int32(binary.LittleEndian.Uint32(raw[4*r:]))
			}
		}
	}
	for q, r := range l.PartitionRows {
		b.PartitionOffsets[q] = int32(r)
	}
	return b
}

// sameRows compares a partitioned batch with the host partitioner's and
// names the first partition bounds or row where they differ: the same
// rows in the same partitions, in the same order.
func sameRows(got, want *partition.Batch) error {
	if got.Rows != want.Rows || len(got.Columns) != len(want.Columns) {
		return fmt.Errorf("%d rows of %d columns, the host partitioner's %d of %d", got.Rows, len(got.Columns), want.Rows, len(want.Columns))
	}
	if got.NumPartitions() != want.NumPartitions() {
		return fmt.Errorf("%d partitions, the host partitioner's %d", got.NumPartitions(), want.NumPartitions())
	}
	for q := range want.NumPartitions() {
		gs, ge := got.PartitionRows(q)
		ws, we := want.PartitionRows(q)
		if gs != ws || ge != we {
			return fmt.Errorf("partition %d holds rows [%d, %d), the host partitioner's [%d, %d)", q, gs, ge, ws, we)
		}
	}
	q := 0
	for r := range want.Rows {
		for int(want.PartitionOffsets[q+1]) <= r {
			q++
		}
		for i := range want.Columns {
			if !sameValue(&got.Columns[i], &want.Columns[i], r) {
				return fmt.Errorf("row %d (partition %d), column %d %q: another value than the host partitioner's", r, q, i, want.Columns[i].Name)
			}
		}
	}
	return nil
}

// sameValue reports whether row r of g and of w are both null or hold the
// same value.
func sameValue(g, w *partition.Column, r int) bool {
	if g.IsNull(r) || w.IsNull(r) {
		return g.IsNull(r) == w.IsNull(r)
	}
	if w.Type.VarWidth() {
		return bytes.Equal(g.Data[g.Offsets[r]:g.Offsets[r+1]], w.Data[w.Offsets[r]:w.Offsets[r+1]])
	}
	n := w.Type.Width()
	return bytes.Equal(g.Data[r*n:(r+1)*n], w.Data[r*n:(r+1)*n])
}
