package loadgen

import (
	"context"
	"fmt"
	"hash/maphash"
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
	b0, err := p.source(0)
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
	src := make([]*partition.Batch, v.cfg.BatchesPerTask)
	for b := range src {
		var err error
		if src[b], err = v.p.source(v.p.at(task, b).index); err != nil {
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
			for _, b := range src {
				buf = partition.AppendSlice(buf[:0], b, q)
				raw.Write(buf)
				start, end := b.PartitionRows(q)
				rows += int64(end - start)
			}
			out[q] = digest{rows: rows, sum: raw.Sum64()}
			continue
		}
		h.reset()
		for _, b := range src {
			start, end := b.PartitionRows(q)
			if err := h.add(b, start, end); err != nil {
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
	var dec []byte
	for q := range v.cfg.Partitions {
		enc, err := m.ReadPartition(q)
		if err != nil {
			return int64(q), err
		}
		if v.key != nil && len(enc) > 0 {
			if len(enc) <= iocrypt.IVSize {
				return int64(q), fmt.Errorf("%w: %v (%s) partition %d: %d bytes, no IV and stream", ErrMismatch, id, m.DataPath, q, len(enc))
			}
			plain := make([]byte, len(enc)-iocrypt.IVSize)
			v.key.StreamAt((*[iocrypt.IVSize]byte)(enc), 0).XORKeyStream(plain, enc[iocrypt.IVSize:])
			enc = plain
		}
		if dec, err = codec.Decode(v.cfg.codecKind(), dec[:0], enc); err != nil {
			return int64(q), fmt.Errorf("%w: %v (%s) partition %d: %v decode: %w", ErrMismatch, id, m.DataPath, q, v.cfg.codecKind(), err)
		}
		var rows int64
		var blocks []*partition.Batch
		if v.cfg.Payload == PayloadKudo {
			rows, blocks, err = kudoRows(dec, v.schema)
		} else {
			rows, blocks, err = blockRows(dec)
		}
		if err != nil {
			return int64(q), fmt.Errorf("%w: %v (%s) partition %d: %w", ErrMismatch, id, m.DataPath, q, err)
		}
		var got digest
		if v.cfg.Payload == PayloadOpaque {
			raw.SetSeed(v.seed)
			raw.Write(dec)
			got = digest{rows: rows, sum: raw.Sum64()}
		} else {
			h.reset()
			for i, blk := range blocks {
				if err := h.add(blk, 0, blk.Rows); err != nil {
					return int64(q), fmt.Errorf("%w: %v (%s) partition %d block %d: %w", ErrMismatch, id, m.DataPath, q, i, err)
				}
			}
			got = h.digest()
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
