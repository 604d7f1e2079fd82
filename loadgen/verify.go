package loadgen

import (
	"context"
	"crypto/cipher"
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"golang.org/x/sync/errgroup"
)

// ErrMismatch is wrapped by the error of a verification that found a map
// output that differs from what was sent.
var ErrMismatch = errdefs.New(errdefs.ErrDataLoss, "loadgen: verify: committed output differs from what was sent")

// verifier checks committed map outputs against the pool they were sent
// from. Task i's partition p must hold the rows of partition p of pool
// batches i, i+1, ..., i+BatchesPerTask-1 (mod the pool size), in that
// order; so every task with the same i mod len(pool) expects the same
// digests, computed once.
type verifier struct {
	cfg    *Config
	p      *pool
	seed   maphash.Seed
	types  []partition.Type
	schema []partition.Field // what kudo tables are decoded with
	key    *iocrypt.Key      // with --encrypt: partitions are decrypted first

	expect []expectation // by task mod len(pool)
}

type expectation struct {
	once    sync.Once
	digests []digest // by partition
	err     error
}

// verifyStats counts what a verification compared.
type verifyStats struct {
	outputs    int
	partitions int64
}

// verify reads back every committed map output of r, checks its files'
// consistency and checksums (shufflefile.Verify), decodes every partition
// and compares its rows and a hash of its content with what was sent.
func verify(ctx context.Context, cfg *Config, p *pool, r runResult) (verifyStats, error) {
	s0, err := p.view(0)
	if err != nil {
		return verifyStats{}, err
	}
	b0, err := s0.schemaBatch()
	s0.close()
	if err != nil {
		return verifyStats{}, err
	}
	v := &verifier{cfg: cfg, p: p, seed: maphash.MakeSeed(), types: schemaTypes(b0), schema: partition.SchemaOf(b0), expect: make([]expectation, len(p.batches))}
	if cfg.Encrypt {
		if v.key, err = iocrypt.NewKey(cfg.ioKey[:]); err != nil {
			return verifyStats{}, err
		}
	}
	var parts atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, t := range r.tasks {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := v.task(t)
			parts.Add(n)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return verifyStats{}, err
	}
	return verifyStats{outputs: len(r.tasks), partitions: parts.Load()}, nil
}

// expected returns the digests that task's partitions must have.
func (v *verifier) expected(task int) ([]digest, error) {
	e := &v.expect[task%len(v.expect)]
	e.once.Do(func() { e.digests, e.err = v.compute(task) })
	return e.digests, e.err
}

func (v *verifier) compute(task int) ([]digest, error) {
	src := make([]*sourceView, v.cfg.BatchesPerTask)
	defer func() {
		for _, s := range src {
			s.close()
		}
	}()
	for b := range src {
		var err error
		if src[b], err = v.p.view(v.p.at(task, b).index); err != nil {
			return nil, err
		}
	}
	out := make([]digest, v.cfg.Partitions)
	h := newRowHasher(v.seed, v.types)
	var raw maphash.Hash
	var buf []byte
	for q := range out {
		if v.cfg.Payload == PayloadOpaque {
			raw.SetSeed(v.seed)
			var rows int64
			for _, s := range src {
				slice, n, err := s.opaque(q, buf[:0])
				if err != nil {
					return nil, err
				}
				raw.Write(slice)
				rows += n
				if s.payload == nil { // slice is buf, grown; else the payload's own
					buf = slice[:0]
				}
			}
			out[q] = digest{rows: rows, sum: raw.Sum64()}
			continue
		}
		h.reset()
		for _, s := range src {
			start, end := s.batch.PartitionRows(q)
			if err := h.add(s.batch, start, end); err != nil {
				return nil, err
			}
		}
		out[q] = h.digest()
	}
	return out, nil
}

// task verifies one map output and returns the partitions it compared.
func (v *verifier) task(t taskResult) (int64, error) {
	id := shufflefile.ID{Shuffle: shuffleID, Map: int64(t.task)}
	if t.dir == "" {
		return 0, fmt.Errorf("%w: %v: the daemon did not say where it wrote it", ErrMismatch, id)
	}
	want, err := v.expected(t.task)
	if err != nil {
		return 0, fmt.Errorf("loadgen: verify %v: %w", id, err)
	}
	m, err := shufflefile.Open(vfs.Default, shufflefile.Flat(t.dir), id, v.cfg.checksumAlg())
	if err != nil {
		return 0, fmt.Errorf("%w: %v in %s: %w", ErrMismatch, id, t.dir, err)
	}
	defer m.Close()
	if err := m.Verify(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrMismatch, err)
	}
	if m.NumPartitions() != v.cfg.Partitions {
		return 0, fmt.Errorf("%w: %v (%s): %d partitions, want %d", ErrMismatch, id, m.DataPath, m.NumPartitions(), v.cfg.Partitions)
	}
	if m.Size() != t.out && !t.existing {
		return 0, fmt.Errorf("%w: %v (%s): %d bytes on disk, the commit reported %d", ErrMismatch, id, m.DataPath, m.Size(), t.out)
	}
	h := newRowHasher(v.seed, v.types)
	var raw maphash.Hash
	for q := range v.cfg.Partitions {
		got, err := v.partition(m, q, h, &raw)
		if err != nil {
			return int64(q), fmt.Errorf("%w: %v (%s) partition %d: %w", ErrMismatch, id, m.DataPath, q, err)
		}
		switch w := want[q]; {
		case got.rows != w.rows:
			return int64(q), fmt.Errorf("%w: %v (%s) partition %d: %d rows, want %d", ErrMismatch, id, m.DataPath, q, got.rows, w.rows)
		case got.sum != w.sum:
			return int64(q), fmt.Errorf("%w: %v (%s) partition %d: %d rows as sent, but their content differs", ErrMismatch, id, m.DataPath, q, w.rows)
		}
	}
	return int64(v.cfg.Partitions), nil
}

// partition decodes partition q of m as it reads it and returns its
// digest: the on-disk bytes go through the decryption, the codec's
// decoder and the block decoder a block at a time, so that what it holds
// is a block of each, whatever the partition's size. Kudo tables are read
// whole (their decoder takes a partition's bytes).
func (v *verifier) partition(m *shufflefile.MapOutput, q int, h *rowHasher, raw *maphash.Hash) (digest, error) {
	sec, err := m.Partition(q)
	if err != nil {
		return digest{}, err
	}
	var r io.Reader = sec
	if v.key != nil && sec.Size() > 0 {
		var iv [iocrypt.IVSize]byte
		if _, err := io.ReadFull(sec, iv[:]); err != nil || sec.Size() == iocrypt.IVSize {
			return digest{}, fmt.Errorf("%d bytes, no IV and stream", sec.Size())
		}
		r = cipher.StreamReader{S: v.key.StreamAt(&iv, 0), R: sec}
	}
	dec, err := codec.NewReader(v.cfg.codecKind(), r)
	if err != nil {
		return digest{}, err
	}
	defer dec.Close()
	if v.cfg.Payload == PayloadKudo {
		b, err := io.ReadAll(dec)
		if err != nil {
			return digest{}, fmt.Errorf("%v decode: %w", v.cfg.codecKind(), err)
		}
		rows, blocks, err := kudoRows(b, v.schema)
		if err != nil {
			return digest{}, err
		}
		h.reset()
		for i, blk := range blocks {
			if err := h.add(blk, 0, blk.Rows); err != nil {
				return digest{}, fmt.Errorf("kudo table %d: %w", i, err)
			}
		}
		if d := h.digest(); d.rows != rows {
			return digest{}, fmt.Errorf("kudo tables of %d rows, of which %d hashed", rows, d.rows)
		}
		return h.digest(), nil
	}
	opaque := v.cfg.Payload == PayloadOpaque
	var in io.Reader = dec
	if opaque {
		raw.SetSeed(v.seed)
		in = io.TeeReader(dec, raw)
	} else {
		h.reset()
	}
	blocks := partition.NewDecoder(in, 0)
	var rows int64
	for i := 0; ; i++ {
		blk, err := blocks.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return digest{}, err
		}
		rows += int64(blk.Rows)
		if !opaque {
			if err := h.add(blk, 0, blk.Rows); err != nil {
				return digest{}, fmt.Errorf("block %d: %w", i, err)
			}
		}
	}
	if opaque {
		return digest{rows: rows, sum: raw.Sum64()}, nil
	}
	return h.digest(), nil
}
