package loadgen

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"golang.org/x/sync/errgroup"
)

// keyColumns are the columns the generator hashes to partition rows: every
// synth schema's key is column 0.
var keyColumns = []int{0}

// poolBatch is one pre-generated, hash-partitioned batch in the form the
// run sends it.
type poolBatch struct {
	index int
	rows  int
	// serialized is the length of its partitions' blocks: the uncompressed
	// bytes the daemon compresses, whichever the payload kind.
	serialized int64

	// batch is the partitioned batch itself, kept only for the in-process
	// writer's columnar path; nil otherwise.
	batch *partition.Batch
	// The payload is in payload (Go memory) or, for the memfd data plane,
	// in a sealed memfd; layout (columnar) or offsets (opaque) locate its
	// parts.
	payload []byte
	memfd   *client.Memfd
	layout  protocol.ColumnarLayout
	offsets []int64
	// dev is the batch in device memory, with --gpu; payload and raw only
	// carry the host batch until it is there.
	dev *deviceBatch
	raw *partition.Batch
	// held is the bytes of batch's buffers when the pool keeps the batch
	// instead of a payload.
	held int64
}

// poolForm says what a pool keeps of each batch.
type poolForm struct {
	payload string // PayloadColumnar, PayloadKudo or PayloadOpaque
	memfd   bool   // payload in a sealed memfd instead of Go memory
	batch   bool   // keep the partitioned batch (in-process columnar writes)
	device  bool   // partition on the GPU and keep the batch there (--gpu)
}

// pool is the run's batches, generated once. Task i sends batch
// (i+b) mod len(batches) as its batch b.
type pool struct {
	cfg     Config
	batches []*poolBatch
	bytes   int64 // payload (or batch) bytes held, on the host or the device
	dev     *devicePool

	// sources caches batches regenerated for verification.
	sources []sourceBatch
}

type sourceBatch struct {
	once  sync.Once
	batch *partition.Batch
	err   error
}

// poolSize returns how many distinct batches a run of cfg uses.
func poolSize(cfg *Config) int {
	n := cfg.PoolBatches
	if cfg.Tasks > 0 && cfg.Tasks*cfg.BatchesPerTask < n {
		n = cfg.Tasks * cfg.BatchesPerTask
	}
	return n
}

// newPool generates the batches of cfg, GOMAXPROCS at a time.
func newPool(ctx context.Context, cfg *Config, form poolForm) (*pool, error) {
	p := &pool{cfg: *cfg, batches: make([]*poolBatch, poolSize(cfg))}
	p.sources = make([]sourceBatch, len(p.batches))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for j := range p.batches {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			pb, err := p.build(j, form)
			if err != nil {
				return err
			}
			p.batches[j] = pb
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		p.close()
		return nil, err
	}
	if form.device {
		// One batch at a time: the partitioner serializes its calls, and
		// its figures are the kernels' own.
		var err error
		if p.dev, err = openDevicePool(); err != nil {
			p.close()
			return nil, err
		}
		for _, pb := range p.batches {
			if err := p.dev.add(ctx, p, pb); err != nil {
				p.close()
				return nil, err
			}
		}
	}
	for _, pb := range p.batches {
		if pb.dev != nil {
			p.bytes += pb.dev.buf.Size()
		}
		p.bytes += int64(len(pb.payload)) + pb.held
		if pb.memfd != nil {
			p.bytes += int64(pb.memfd.Size())
		}
	}
	return p, nil
}

// at returns batch b of task i.
func (p *pool) at(task, b int) *poolBatch {
	return p.batches[(task+b)%len(p.batches)]
}

// taskBytes returns the serialized bytes and rows that task i sends.
func (p *pool) task(task int) (serialized, rows int64) {
	for b := range p.cfg.BatchesPerTask {
		pb := p.at(task, b)
		serialized += pb.serialized
		rows += int64(pb.rows)
	}
	return serialized, rows
}

// close releases the memfds and the device memory.
func (p *pool) close() {
	for _, pb := range p.batches {
		if pb != nil && pb.memfd != nil {
			pb.memfd.Close()
		}
	}
	if p.dev != nil {
		p.dev.close()
	}
}

// batchSeed derives pool batch j's generator seed from the run's seed.
func batchSeed(seed int64, j int) int64 {
	return int64(uint64(seed)*0x9e3779b97f4a7c15 + uint64(j)*0xbf58476d1ce4e5b9)
}

// generate returns pool batch j, partitioned: a pure function of the
// configuration.
func generate(cfg *Config, j int) (*partition.Batch, error) {
	b, err := synthesize(cfg, j)
	if err != nil {
		return nil, err
	}
	pb, err := partition.Partition(b, keyColumns, cfg.Partitions)
	if err != nil {
		return nil, fmt.Errorf("loadgen: partition batch %d: %w", j, err)
	}
	return pb, nil
}

// synthesize returns pool batch j before partitioning.
func synthesize(cfg *Config, j int) (*partition.Batch, error) {
	var opts []synth.Option
	if cfg.Skew != 0 {
		opts = append(opts, synth.WithKeySkew(cfg.Skew))
	}
	if cfg.Nulls > 0 {
		opts = append(opts, synth.WithNulls(cfg.Nulls))
	}
	b, err := synth.Generate(cfg.Schema, batchSeed(cfg.Seed, j), cfg.Rows, opts...)
	if err != nil {
		return nil, fmt.Errorf("loadgen: generate batch %d: %w", j, err)
	}
	return b, nil
}

// source returns pool batch j as it was generated, regenerating it (once)
// if the pool did not keep it.
func (p *pool) source(j int) (*partition.Batch, error) {
	if b := p.batches[j].batch; b != nil {
		return b, nil
	}
	s := &p.sources[j]
	s.once.Do(func() { s.batch, s.err = generate(&p.cfg, j) })
	return s.batch, s.err
}

// A sourceView is pool batch j as verification reads it back: the
// payload that was sent (in Go memory, or a read-only view of its sealed
// memfd) or, where the pool keeps none (device batches), the batch
// regenerated.
type sourceView struct {
	batch   *partition.Batch // columnar and kudo payloads, or regenerated
	payload []byte           // opaque payloads
	offsets []int64
	unmap   func() error
}

// view returns pool batch j for verification; close it when done. A view
// of a payload the pool holds costs no copy: the whole input is not held
// twice.
func (p *pool) view(j int) (*sourceView, error) {
	pb := p.batches[j]
	if pb.batch != nil {
		return &sourceView{batch: pb.batch}, nil
	}
	data := pb.payload
	s := &sourceView{}
	if pb.memfd != nil {
		b, unmap, err := pb.memfd.View()
		if err != nil {
			return nil, fmt.Errorf("loadgen: pool batch %d: %w", j, err)
		}
		data, s.unmap = b, unmap
	}
	if data == nil && pb.memfd == nil { // a device batch: none kept on the host
		b, err := p.source(j)
		if err != nil {
			return nil, err
		}
		return &sourceView{batch: b}, nil
	}
	if p.cfg.Payload == PayloadOpaque {
		s.payload, s.offsets = data, pb.offsets
		return s, nil
	}
	b, err := columnar.View(&pb.layout, data)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("loadgen: pool batch %d: %w", j, err)
	}
	s.batch = b
	return s, nil
}

// close lets go of the view's mapping, if any.
func (s *sourceView) close() {
	if s != nil && s.unmap != nil {
		_ = s.unmap()
		s.unmap = nil
	}
}

// opaque appends partition q's serialized slice to buf and returns it
// with its rows.
func (s *sourceView) opaque(q int, buf []byte) ([]byte, int64, error) {
	if s.payload == nil {
		start, end := s.batch.PartitionRows(q)
		return partition.AppendSlice(buf, s.batch, q), int64(end - start), nil
	}
	slice := s.payload[s.offsets[q]:s.offsets[q+1]]
	var rows int64
	for off := 0; off < len(slice); {
		b, n, err := partition.DecodeBlock(slice[off:])
		if err != nil {
			return nil, 0, fmt.Errorf("loadgen: pool partition %d: %w", q, err)
		}
		rows += int64(b.Rows)
		off += n
	}
	return slice, rows, nil
}

// schemaBatch returns a batch with the pool's columns.
func (s *sourceView) schemaBatch() (*partition.Batch, error) {
	if s.batch != nil {
		return s.batch, nil
	}
	for q := 0; q+1 < len(s.offsets); q++ {
		if slice := s.payload[s.offsets[q]:s.offsets[q+1]]; len(slice) > 0 {
			b, _, err := partition.DecodeBlock(slice)
			return b, err
		}
	}
	return nil, fmt.Errorf("loadgen: pool batch with no rows: no columns to verify against")
}

func (p *pool) build(j int, form poolForm) (*poolBatch, error) {
	if form.device {
		return hostBatch(&p.cfg, j)
	}
	b, err := generate(&p.cfg, j)
	if err != nil {
		return nil, err
	}
	pb := &poolBatch{index: j, rows: b.Rows}
	for q := range p.cfg.Partitions {
		start, end := b.PartitionRows(q)
		if p.cfg.Payload == PayloadOpaque {
			pb.serialized += int64(partition.SliceSize(b, q))
		} else {
			pb.serialized += int64(p.cfg.format().Size(b, start, end))
		}
	}
	if form.batch {
		pb.batch = b
	}
	var size int
	if form.payload == PayloadOpaque {
		pb.offsets = make([]int64, p.cfg.Partitions+1)
		for q := range p.cfg.Partitions {
			pb.offsets[q+1] = pb.offsets[q] + int64(partition.SliceSize(b, q))
		}
		size = int(pb.offsets[p.cfg.Partitions])
	} else {
		size, pb.layout = columnar.Layout(b)
	}
	if form.payload != PayloadOpaque && form.batch && !form.memfd {
		pb.held = int64(size) // the in-process writer takes the batch itself
		return pb, nil
	}
	var dst []byte
	if form.memfd {
		if pb.memfd, err = client.NewMemfd(size); err != nil {
			return nil, fmt.Errorf("loadgen: batch %d: %w", j, err)
		}
		dst = pb.memfd.Bytes()
	} else {
		pb.payload = make([]byte, size)
		dst = pb.payload
	}
	if form.payload == PayloadOpaque {
		for q := range p.cfg.Partitions {
			partition.AppendSlice(dst[pb.offsets[q]:pb.offsets[q]], b, q)
		}
	} else {
		columnar.Fill(dst, b, &pb.layout)
	}
	if pb.memfd != nil {
		if err := pb.memfd.Seal(); err != nil {
			pb.memfd.Close()
			return nil, fmt.Errorf("loadgen: batch %d: %w", j, err)
		}
	}
	return pb, nil
}

func putUint32(b []byte, v uint32) {
	_ = b[3]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
