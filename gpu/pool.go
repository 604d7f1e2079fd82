package gpu

import (
	"context"
	"fmt"
	"time"
)

// Pool defaults: four 8 MiB chunks, enough for one chunk in use while
// the next ones land.
const (
	DefaultChunkSize = 8 << 20
	DefaultMaxChunks = 4
	// maxCachedLarge bounds the bytes of whole-batch buffers kept for reuse.
	maxCachedLarge = 512 << 20
	// streamDepth is the number of copies a Stream keeps in flight, each
	// on a stream of its own.
	streamDepth = 3
)

// PoolOption configures a Pool.
type PoolOption func(*poolOptions) error

type poolOptions struct {
	chunk, maxChunks, prime int
}

// WithChunkSize sets the size of a staging chunk (default 8 MiB).
func WithChunkSize(n int) PoolOption {
	return func(o *poolOptions) error {
		if n < 4096 || n > 1<<30 {
			return fmt.Errorf("%w: chunk size %d out of range [4096, 1GiB]", ErrInvalid, n)
		}
		o.chunk = n
		return nil
	}
}

// WithMaxChunks bounds the chunks out at once (default 4, at least 2: one
// landing while the other is in use).
func WithMaxChunks(n int) PoolOption {
	return func(o *poolOptions) error {
		if n < 2 || n > 1024 {
			return fmt.Errorf("%w: max chunks %d out of range [2, 1024]", ErrInvalid, n)
		}
		o.maxChunks = n
		return nil
	}
}

// WithPrime allocates n chunks when the pool is made instead of on first
// use. Pinning costs time up front; BenchmarkPoolStart shows how much and
// what the first copy gains.
func WithPrime(n int) PoolOption {
	return func(o *poolOptions) error {
		if n < 0 {
			return fmt.Errorf("%w: prime %d chunks", ErrInvalid, n)
		}
		o.prime = n
		return nil
	}
}

func parsePoolOptions(opts []PoolOption) (poolOptions, error) {
	o := poolOptions{chunk: DefaultChunkSize, maxChunks: DefaultMaxChunks}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if o.prime > o.maxChunks {
		return o, fmt.Errorf("%w: prime %d chunks, more than max chunks %d", ErrInvalid, o.prime, o.maxChunks)
	}
	return o, nil
}

// PoolStats counts a pool's pinned buffers and the copies into them.
type PoolStats struct {
	Chunks, FreeChunks int   // chunks allocated, and of them idle
	LargeBytes         int64 // bytes of idle whole-batch buffers
	// CopiedBytes landed through Stream and CopyAll in CopyTime: the
	// time they ran, less the time spent waiting for buffers, admission
	// or the caller's use of landed chunks: the copies' own rate.
	CopiedBytes int64
	CopyTime    time.Duration
}

// Admitter admits bytes before they are copied to the host and releases
// them once they have landed; the daemon's limiter is one. TryAcquire
// admits only if that needs no wait.
type Admitter interface {
	Acquire(ctx context.Context, n int64) error
	TryAcquire(n int64) bool
	Release(n int64)
}

// MaxGPUPartitions bounds the partition count of Partitioner.Partition:
// one warp keeps a 4-byte counter per partition in 48 KiB of shared memory.
const MaxGPUPartitions = sharedBytes / 4

const sharedBytes = 48 << 10
