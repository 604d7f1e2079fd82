//go:build cuda

package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/gpu/lz4ref"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"github.com/shuffled/shuffled/writer"
)

// Unless Config.NoCUDACompress, a device batch of an lz4 map output is made
// into its records' lz4-java streams on the device (gpu.Compressor: the
// records the writer would make, gathered and compressed there), and only
// the streams cross to the host, into one staging buffer admitted by
// their size; the writer then copies, checksums and writes them as
// already-encoded records. Where the map output's checksums are Adler-32
// of the streams (writer.MapWriter.EncodedChecksum), the device sums the
// streams too and the writer takes those sums instead of summing.

// compressorOnce is a device's compressor, loaded at its first use.
type compressorOnce struct {
	once sync.Once
	c    *gpu.Compressor
	err  error
}

// compressor returns ds's compressor, loading it at the first call; log
// hears once why it could not be loaded.
func (ds *deviceState) compressor(log *slog.Logger, slots int) (*gpu.Compressor, error) {
	co := &ds.comp
	co.once.Do(func() {
		co.c, co.err = ds.dev.NewCompressor(slots)
		if co.err != nil {
			log.Warn("device batches of lz4 map outputs are compressed by the CPU pool: the GPU's lz4 kernels did not load", "device", ds.dev.Ordinal(), "err", co.err)
			return
		}
		log.Info("lz4 kernels loaded", "device", ds.dev.Ordinal(), "slots", slots, "resident_warps_per_sm", co.c.ResidentWarps(), "device_connections", gpu.DeviceConnections())
	})
	return co.c, co.err
}

// gpuCompressed counts what the device path compressed: raw bytes in,
// stream bytes copied to the host (and of them, those the device summed
// for the writer), and the time from the batch's start to
// its streams' landing; then, summed over batches, the time each step
// took: the plan (the offsets' copy included), the kernels (waiting for a
// free slot included), the streams' copy to the host (their admission
// included), and handing the records to the writer (its admission and
// queues); and, of the plan, the offsets' and bitmaps' copy to the host
// (planRead).
type gpuCompressed struct {
	raw, streams, summed, nanos            atomic.Int64
	plan, kernels, copyOut, write, batches atomic.Int64
	planRead                               atomic.Int64
}

// maxHostReaders bounds the host readers a device keeps between batches:
// one per connection planning at once on a busy node. More are made when
// more plan at once, and closed when they come back to a full list.
const maxHostReaders = 32

// hostReader takes a host reader of ds's device from its free list, or
// makes one.
func (ds *deviceState) hostReader() (*gpu.HostReader, error) {
	select {
	case r := <-ds.readers:
		return r, nil
	default:
		return ds.dev.NewHostReader()
	}
}

// putHostReader gives r back to ds's free list, or closes it when the
// list is full.
func (ds *deviceState) putHostReader(r *gpu.HostReader) {
	select {
	case ds.readers <- r:
	default:
		r.Close()
	}
}

// closeReaders closes the host readers in ds's free list (the device is
// closing: no batch is planning).
func (ds *deviceState) closeReaders() error {
	var first error
	for {
		select {
		case r := <-ds.readers:
			if err := r.Close(); err != nil && first == nil {
				first = err
			}
		default:
			return first
		}
	}
}

// DeviceTotals are the daemon's device-to-host figures so far.
type DeviceTotals struct {
	// D2HBytes and D2HNanos: the bytes copied device to host and the time
	// the copies of whole batches took, admission and hand-off included.
	D2HBytes, D2HNanos int64
	// CompressedRaw and CompressedStreams: the raw bytes the GPU
	// compressed and the stream bytes copied to the host of them;
	// SummedStreams: the stream bytes whose checksum (Adler-32) the GPU
	// computed for the writer.
	CompressedRaw, CompressedStreams, SummedStreams int64
}

// Totals returns the daemon's device-to-host figures so far.
func (p *Planes) Totals() DeviceTotals {
	return DeviceTotals{
		D2HBytes: p.dev.d2h.bytes.Load(), D2HNanos: p.dev.d2h.nanos.Load(),
		CompressedRaw: p.dev.compressed.raw.Load(), CompressedStreams: p.dev.compressed.streams.Load(),
		SummedStreams: p.dev.compressed.summed.Load(),
	}
}

// gpuCompresses reports whether o's device batches on ds are compressed
// on the GPU: no --no-cuda-compress, an lz4 map output, a block size the
// kernels support, a batch the plans lay out (gpuPlans), and kernels that
// load on the device (where any of these fails, the CPU pool serializes
// and compresses, as with --no-cuda-compress).
func (c *Conn) gpuCompresses(out *Output, m *protocol.Batch, ds *deviceState) bool {
	w := out.Writer
	if c.p.cfg.NoCUDACompress || w.Codec() != codec.LZ4 || lz4ref.CheckBlockSize(w.BlockSize()) != nil {
		return false
	}
	if gpuPlans(w.Format(), m) != nil {
		return false
	}
	_, err := ds.compressor(c.p.cfg.Log, c.p.cfg.CUDACompressSlots)
	return err == nil
}

// deviceCompressed applies a device batch of out by compressing it on the
// device at src, and returns the payload bytes taken in: none when the
// batch has no records.
func (c *Conn) deviceCompressed(out *Output, m *protocol.Batch, ds *deviceState, src uintptr, lim gpu.Admitter) (int64, error) {
	start := time.Now()
	comp, err := ds.compressor(c.p.cfg.Log, c.p.cfg.CUDACompressSlots)
	if err != nil {
		return 0, err
	}
	w := out.Writer
	stats := &c.p.dev.compressed
	size := m.Region.Length
	var pl *gpu.CompressPlan
	var copied int64
	switch m.Kind {
	case protocol.KindOpaque:
		if pl, err = gpu.PlanOpaque(m.Opaque.PartitionOffsets, size, writer.DefaultRecordSize); err != nil {
			err = fmt.Errorf("%w: Batch.opaque: %v", errdefs.ErrInvalidArgument, err)
		}
	case protocol.KindColumnar:
		pl, copied, err = planColumnar(ds, out, &m.Columnar, src, size, stats)
	default:
		return 0, fmt.Errorf("%w: Batch.kind %v", errdefs.ErrUnsupported, m.Kind)
	}
	if err != nil {
		return 0, err
	}
	pl.Adler32 = w.EncodedChecksum() == checksum.Adler32
	t1 := time.Now()
	stats.plan.Add(int64(t1.Sub(start)))
	res, err := comp.Compress(src, size, pl, w.BlockSize())
	if err != nil {
		return 0, err
	}
	t2 := time.Now()
	stats.kernels.Add(int64(t2.Sub(t1)))
	stats.batches.Add(1)
	if res.Size == 0 {
		res.Release()
		return 0, nil
	}
	staged, err := ds.pool.CopyAll(c.ctx, res.Ptr, res.Size, lim)
	res.Release()
	if err != nil {
		return 0, err
	}
	streams := staged.Bytes()
	recs := make([]writer.EncodedRecord, len(pl.Records))
	for i, r := range pl.Records {
		s := res.Streams[i]
		recs[i] = writer.EncodedRecord{Partition: r.Partition, Stream: streams[s.Offset : s.Offset+s.Length : s.Offset+s.Length], Raw: r.Len}
		if res.Adler32 != nil {
			recs[i].Sum, recs[i].SumAlg = res.Adler32[i], checksum.Adler32
		}
	}
	stats.raw.Add(pl.RawBytes)
	stats.streams.Add(res.Size)
	if res.Adler32 != nil {
		stats.summed.Add(res.Size)
	}
	t3 := time.Now()
	stats.copyOut.Add(int64(t3.Sub(t2)))
	stats.nanos.Add(int64(t3.Sub(start)))
	c.p.dev.d2h.bytes.Add(res.Size + copied)
	c.p.dev.d2h.nanos.Add(int64(t3.Sub(start)))
	err = w.WriteEncoded(c.ctx, recs, staged.Release)
	stats.write.Add(int64(time.Since(t3)))
	if err != nil {
		return 0, err
	}
	return size, nil
}

// planColumnar plans a columnar device batch of out: its layout checked
// (against the columns declared at Open for kudo), the offsets of its
// String, Binary, List and Map columns and the bitmaps of its Void
// columns copied to the host (a gpu.HostReader of ds's, for the time
// planColumnar runs: the plan needs them for the records' sizes, split
// points and children's rows, and keeps nothing of them) and checked. It
// returns the bytes it copied; a layout that does not check out is of
// class errdefs.ErrInvalidArgument.
func planColumnar(ds *deviceState, out *Output, cl *protocol.ColumnarLayout, src uintptr, size int64, stats *gpuCompressed) (*gpu.CompressPlan, int64, error) {
	invalid := func(err error) (*gpu.CompressPlan, int64, error) {
		return nil, 0, fmt.Errorf("%w: columnar layout: %v", errdefs.ErrInvalidArgument, err)
	}
	if cl.Rows < 0 || cl.Rows > partition.MaxRows {
		return invalid(fmt.Errorf("rows %d out of range [0,%d]", cl.Rows, partition.MaxRows))
	}
	l := gpu.Layout{Rows: int(cl.Rows), Columns: make([]gpu.Column, len(cl.Columns))}
	meta := make([]gpu.ColumnMeta, len(cl.Columns))
	for i := range cl.Columns {
		c := &cl.Columns[i]
		if !columnar.Supported(c.Type) {
			return nil, 0, fmt.Errorf("%w: column %d %q: type %v is not supported by this build", errdefs.ErrUnsupported, i, c.Name, c.Type)
		}
		t := partition.Type(c.Type)
		if err := partition.CheckDecimal(t, int(c.Precision), int(c.Scale)); err != nil {
			return invalid(fmt.Errorf("column %d %q: %v", i, c.Name, err))
		}
		l.Columns[i] = gpu.Column{Type: t, Validity: gpu.Range(c.Validity), Offsets: gpu.Range(c.Offsets), Data: gpu.Range(c.Data), Children: int(c.Children)}
		meta[i] = gpu.ColumnMeta{Name: c.Name, Precision: int8(c.Precision), Scale: int8(c.Scale)}
	}
	if err := l.Validate(size); err != nil {
		return invalid(err)
	}
	if err := out.checkColumns(columnar.Skeleton(cl)); err != nil {
		return nil, 0, err
	}
	start := time.Now()
	rd, err := ds.hostReader()
	if err != nil {
		return nil, 0, err
	}
	defer ds.putHostReader(rd)
	host, copied, err := rd.Read(&l, src)
	stats.planRead.Add(int64(time.Since(start)))
	if errors.Is(err, gpu.ErrInvalid) {
		return invalid(err)
	}
	if err != nil {
		return nil, 0, err
	}
	pl, err := gpu.PlanColumnar(out.Writer.Format(), l, meta, host, cl.PartitionRows, size, writer.DefaultRecordSize)
	if err != nil {
		return invalid(err)
	}
	return pl, copied, nil
}

// logDeviceTotals logs to a connection's log, when a connection that sent
// device batches ends, the daemon's device-to-host totals so far.
func (p *Planes) logDeviceTotals(log *slog.Logger) {
	s := func(n *atomic.Int64) float64 { return float64(n.Load()) / 1e9 }
	gpuCompressed := &p.dev.compressed
	var copyRun time.Duration // the staged copies' own time, waits for buffers and admission left out
	devices := &p.dev.devices
	devices.mu.Lock()
	for _, ds := range devices.m {
		copyRun += ds.pool.Stats().CopyTime
	}
	devices.mu.Unlock()
	log.Info("device batches", "d2h_bytes", p.dev.d2h.bytes.Load(),
		"gpu_compressed_raw_bytes", gpuCompressed.raw.Load(), "gpu_compressed_stream_bytes", gpuCompressed.streams.Load(),
		"gpu_summed_stream_bytes", gpuCompressed.summed.Load(),
		"gpu_compress_s", s(&gpuCompressed.nanos), "gpu_compressed_batches", gpuCompressed.batches.Load(),
		"gpu_plan_s", s(&gpuCompressed.plan), "gpu_plan_read_s", s(&gpuCompressed.planRead), "gpu_kernels_s", s(&gpuCompressed.kernels),
		"gpu_copy_out_s", s(&gpuCompressed.copyOut), "gpu_copy_run_s", copyRun.Seconds(), "gpu_write_s", s(&gpuCompressed.write))
}
