//go:build !cuda

package gpu

import (
	"context"
	"unsafe"
)

// Supported reports whether this build reaches CUDA devices.
const Supported = false

// Device is a CUDA device with a context of this process. This build has
// none: Open fails with ErrNotSupported, so no Device exists.
type Device struct{ _ [0]func() }

// Open returns ErrNotSupported.
func Open(ordinal int) (*Device, error) { return nil, ErrNotSupported }

func (d *Device) Name() string                                              { return "" }
func (d *Device) Ordinal() int                                              { return -1 }
func (d *Device) Close() error                                              { return ErrNotSupported }
func (d *Device) Alloc(n int64) (*Buffer, error)                            { return nil, ErrNotSupported }
func (d *Device) Upload(src []byte) (*Buffer, error)                        { return nil, ErrNotSupported }
func (d *Device) AllocPinned(n int) (*Pinned, error)                        { return nil, ErrNotSupported }
func (d *Device) OpenIPC(h IPCHandle) (*Peer, error)                        { return nil, ErrNotSupported }
func (d *Device) NewPartitioner() (*Partitioner, error)                     { return nil, ErrNotSupported }
func (d *Device) LoadPartitioner(ptx []byte) (*Partitioner, error)          { return nil, ErrNotSupported }
func (d *Device) CopyToHost(dst unsafe.Pointer, src uintptr, n int64) error { return ErrNotSupported }
func (d *Device) CopyAsync(dst unsafe.Pointer, src uintptr, n int64) (*Copy, error) {
	return nil, ErrNotSupported
}
func (d *Device) NewHostReader() (*HostReader, error) { return nil, ErrNotSupported }

// Buffer is a device allocation of this process. This build has none.
type Buffer struct{ _ [0]func() }

func (b *Buffer) Size() int64                          { return 0 }
func (b *Buffer) Ptr() uintptr                         { return 0 }
func (b *Buffer) Free() error                          { return ErrNotSupported }
func (b *Buffer) Zero() error                          { return ErrNotSupported }
func (b *Buffer) CopyFrom(off int64, src []byte) error { return ErrNotSupported }
func (b *Buffer) CopyTo(dst []byte, off int64) error   { return ErrNotSupported }
func (b *Buffer) IPCHandle() (IPCHandle, error)        { return IPCHandle{}, ErrNotSupported }

// Peer is a device allocation of another process. This build has none.
type Peer struct{ _ [0]func() }

func (p *Peer) Ptr() uintptr { return 0 }
func (p *Peer) Size() int64  { return 0 }
func (p *Peer) Close() error { return ErrNotSupported }

// Pinned is page-locked host memory. This build has none.
type Pinned struct{ _ [0]func() }

func (p *Pinned) Bytes() []byte { return nil }
func (p *Pinned) Free() error   { return ErrNotSupported }

// Copy is a device-to-host copy in flight. This build has none.
type Copy struct{ _ [0]func() }

func (c *Copy) Wait() error { return ErrNotSupported }

// HostReader makes the host copies PlanColumnar needs of device batches.
// This build has none.
type HostReader struct{ _ [0]func() }

func (r *HostReader) Read(l *Layout, src uintptr) (HostBuffers, int64, error) {
	return HostBuffers{}, 0, ErrNotSupported
}
func (r *HostReader) Close() error { return ErrNotSupported }

// Pool is a pool of pinned staging buffers. This build has none.
type Pool struct{ _ [0]func() }

// NewPool returns ErrNotSupported.
func NewPool(d *Device, opts ...PoolOption) (*Pool, error) { return nil, ErrNotSupported }

func (p *Pool) ChunkSize() int                                  { return 0 }
func (p *Pool) Stats() PoolStats                                { return PoolStats{} }
func (p *Pool) Close() error                                    { return ErrNotSupported }
func (p *Pool) Get(ctx context.Context, n int) (*Staged, error) { return nil, ErrNotSupported }
func (p *Pool) Stream(ctx context.Context, src uintptr, n int64, adm Admitter, use func(off int64, s *Staged) error) error {
	return ErrNotSupported
}
func (p *Pool) CopyAll(ctx context.Context, src uintptr, n int64, adm Admitter) (*Staged, error) {
	return nil, ErrNotSupported
}

// Staged is a pinned staging buffer. This build has none.
type Staged struct{ _ [0]func() }

func (s *Staged) Bytes() []byte { return nil }
func (s *Staged) Release()      {}

// Partitioner hash-partitions columnar batches on a device. This build
// has none.
type Partitioner struct{ _ [0]func() }

func (p *Partitioner) Partition(dst, src *Buffer, l Layout, keyCols []int, numPartitions int) ([]int64, error) {
	return nil, ErrNotSupported
}
func (p *Partitioner) Close() error { return ErrNotSupported }
