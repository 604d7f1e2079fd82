//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Pool hands out pinned staging buffers: chunks of a fixed size, at most
// MaxChunks of them out at once, and, for copies that must land in one
// piece, larger buffers of their own. It allocates on first use, unless
// primed; buffers come back with Release and are reused.
type Pool struct {
	d      *Device
	chunk  int
	tokens chan struct{} // one per chunk that may be out

	mu struct {
		sync.Mutex
		free       []*Pinned // chunks
		large      []*Pinned // whole-batch buffers, for reuse
		largeBytes int64
		allocated  int // chunks, out or free
		closed     bool
		copied     int64
		copyTime   time.Duration
	}
}

// NewPool makes a staging pool on d.
func NewPool(d *Device, opts ...PoolOption) (*Pool, error) {
	o, err := parsePoolOptions(opts)
	if err != nil {
		return nil, err
	}
	p := &Pool{d: d, chunk: o.chunk, tokens: make(chan struct{}, o.maxChunks)}
	for range o.prime {
		b, err := d.AllocPinned(o.chunk)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.mu.free = append(p.mu.free, b)
		p.mu.allocated++
	}
	return p, nil
}

// ChunkSize is the size of the pool's chunks.
func (p *Pool) ChunkSize() int { return p.chunk }

// Stats reads the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{Chunks: p.mu.allocated, FreeChunks: len(p.mu.free), LargeBytes: p.mu.largeBytes,
		CopiedBytes: p.mu.copied, CopyTime: p.mu.copyTime}
}

func (p *Pool) account(n int64, d time.Duration) {
	p.mu.Lock()
	p.mu.copied += n
	p.mu.copyTime += d
	p.mu.Unlock()
}

// Close frees the idle buffers; buffers still out are freed as they come
// back.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.mu.closed = true
	free, large := p.mu.free, p.mu.large
	p.mu.free, p.mu.large, p.mu.largeBytes = nil, nil, 0
	p.mu.Unlock()
	var first error
	for _, b := range append(free, large...) {
		if err := b.Free(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Staged is a pinned staging buffer out of a Pool.
type Staged struct {
	p        *Pool
	pin      *Pinned
	n        int
	chunk    bool
	released atomic.Bool
}

// Get returns a staging buffer of n bytes: a chunk when n fits one,
// waiting while all chunks are out, else a buffer of its own (reused from
// earlier large copies when one is big enough).
func (p *Pool) Get(ctx context.Context, n int) (*Staged, error) {
	return p.get(ctx, n, true)
}

// get is Get; without wait it returns nil, nil when every chunk is out.
func (p *Pool) get(ctx context.Context, n int, wait bool) (*Staged, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: staging buffer of %d bytes", ErrInvalid, n)
	}
	if n > p.chunk {
		return p.getLarge(n)
	}
	if wait {
		select {
		case p.tokens <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		select {
		case p.tokens <- struct{}{}:
		default:
			return nil, nil
		}
	}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		<-p.tokens
		return nil, fmt.Errorf("gpu: staging pool: %w", ErrClosed)
	}
	if k := len(p.mu.free); k > 0 {
		b := p.mu.free[k-1]
		p.mu.free = p.mu.free[:k-1]
		p.mu.Unlock()
		return &Staged{p: p, pin: b, n: n, chunk: true}, nil
	}
	p.mu.allocated++
	p.mu.Unlock()
	b, err := p.d.AllocPinned(p.chunk)
	if err != nil {
		p.mu.Lock()
		p.mu.allocated--
		p.mu.Unlock()
		<-p.tokens
		return nil, err
	}
	return &Staged{p: p, pin: b, n: n, chunk: true}, nil
}

func (p *Pool) getLarge(n int) (*Staged, error) {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("gpu: staging pool: %w", ErrClosed)
	}
	best := -1
	for i, b := range p.mu.large {
		if len(b.b) >= n && (best < 0 || len(b.b) < len(p.mu.large[best].b)) {
			best = i
		}
	}
	if best >= 0 {
		b := p.mu.large[best]
		p.mu.large = append(p.mu.large[:best], p.mu.large[best+1:]...)
		p.mu.largeBytes -= int64(len(b.b))
		p.mu.Unlock()
		return &Staged{p: p, pin: b, n: n}, nil
	}
	p.mu.Unlock()
	// Round up so that batches of nearly the same size share buffers.
	size := (n + p.chunk - 1) / p.chunk * p.chunk
	b, err := p.d.AllocPinned(size)
	if err != nil {
		return nil, err
	}
	return &Staged{p: p, pin: b, n: n}, nil
}

// Bytes is the buffer's n bytes; valid until Release.
func (s *Staged) Bytes() []byte { return s.pin.b[:s.n:s.n] }

func (s *Staged) ptr() unsafe.Pointer { return unsafe.Pointer(&s.pin.b[0]) }

// Release returns the buffer to its pool; only the first call counts.
func (s *Staged) Release() {
	if s.released.Swap(true) {
		return
	}
	p := s.p
	p.mu.Lock()
	switch {
	case p.mu.closed:
		p.mu.Unlock()
		s.pin.Free()
	case s.chunk:
		p.mu.free = append(p.mu.free, s.pin)
		p.mu.Unlock()
	case p.mu.largeBytes+int64(len(s.pin.b)) <= maxCachedLarge:
		p.mu.large = append(p.mu.large, s.pin)
		p.mu.largeBytes += int64(len(s.pin.b))
		p.mu.Unlock()
	default:
		p.mu.Unlock()
		s.pin.Free()
	}
	if s.chunk {
		<-p.tokens
	}
}

// Stream copies the n bytes at device address src to the host chunk by
// chunk, in order, keeping up to two copies in flight, so that one chunk
// lands while the caller uses the one before (double buffering). Each
// chunk's bytes are admitted (adm may be nil) before its copy is queued
// and released once it has landed; then use gets the chunk and its
// offset from src and owns the buffer: it must Release it, also when it
// fails. Stream returns the first error of adm, the copies or use, after
// every copy it queued has landed and every buffer that use did not get is
// released.
func (p *Pool) Stream(ctx context.Context, src uintptr, n int64, adm Admitter, use func(off int64, s *Staged) error) error {
	type inFlight struct {
		off  int64
		s    *Staged
		copy *Copy
	}
	var q []inFlight
	start := time.Now()
	var waited time.Duration
	drain := func(err error) error {
		for _, f := range q {
			f.copy.Wait()
			if adm != nil {
				adm.Release(int64(f.s.n))
			}
			f.s.Release()
		}
		return err
	}
	for off := int64(0); off < n || len(q) > 0; {
		if off < n && len(q) < streamDepth {
			// With copies in flight, never wait for a buffer or for
			// admission: the landed chunks must reach use, or chunks held
			// by Streams waiting on one another could never come back.
			size := int(min(int64(p.chunk), n-off))
			wait := len(q) == 0
			t := time.Now()
			s, err := p.get(ctx, size, wait)
			if wait {
				waited += time.Since(t)
			}
			if err != nil {
				return drain(err)
			}
			if s != nil && adm != nil {
				if wait {
					t := time.Now()
					err = adm.Acquire(ctx, int64(size))
					waited += time.Since(t)
				} else if !adm.TryAcquire(int64(size)) {
					s.Release()
					s = nil
				}
				if err != nil {
					s.Release()
					return drain(err)
				}
			}
			if s != nil {
				c, err := p.d.CopyAsync(s.ptr(), src+uintptr(off), int64(size))
				if err != nil {
					if adm != nil {
						adm.Release(int64(size))
					}
					s.Release()
					return drain(err)
				}
				q = append(q, inFlight{off: off, s: s, copy: c})
				off += int64(size)
				continue
			}
		}
		f := q[0]
		q = q[1:]
		f.copy.Wait()
		if adm != nil {
			adm.Release(int64(f.s.n))
		}
		t := time.Now()
		err := use(f.off, f.s)
		waited += time.Since(t)
		if err != nil {
			return drain(err)
		}
	}
	p.account(n, time.Since(start)-waited)
	return nil
}

// CopyAll copies the n bytes at device address src into one staging
// buffer and waits for them, admitted by adm (may be nil) while they
// land. The caller owns the buffer and must Release it.
func (p *Pool) CopyAll(ctx context.Context, src uintptr, n int64, adm Admitter) (*Staged, error) {
	if n > int64(^uint(0)>>1) {
		return nil, fmt.Errorf("%w: copy of %d bytes", ErrInvalid, n)
	}
	s, err := p.Get(ctx, int(n))
	if err != nil {
		return nil, err
	}
	if adm != nil {
		if err := adm.Acquire(ctx, n); err != nil {
			s.Release()
			return nil, err
		}
		defer adm.Release(n)
	}
	start := time.Now()
	c, err := p.d.CopyAsync(s.ptr(), src, n)
	if err != nil {
		s.Release()
		return nil, err
	}
	c.Wait()
	p.account(n, time.Since(start))
	return s, nil
}
