//go:build cuda

package gpu

/*
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// Supported reports whether this build reaches CUDA devices.
const Supported = true

// Device is one CUDA device with a context of this process on it. Every
// CUDA call for the device runs on the context's goroutine, locked to an
// OS thread; the methods are safe for concurrent use.
type Device struct {
	ordinal int
	dev     cu.Device
	name    string
	ctx     *cu.Ctx
	// d2h are the streams of device-to-host copies, taken in turn: a
	// copy's completion notice (a host function) holds back its own
	// stream only, while the next copy runs on another.
	d2h  [streamDepth]cu.Stream
	next atomic.Uint32
	// raw is the context's driver handle, for the copy path, which makes
	// it current on whatever thread calls (see CopyAsync).
	raw C.CUcontext

	mu struct {
		sync.Mutex
		closed bool
	}
}

// Open creates a context on device ordinal. Creating a context takes
// about a tenth of a second; keep the Device for the process's life.
func Open(ordinal int) (*Device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("gpu: counting devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: device ordinal %d out of range [0,%d)", ErrInvalid, ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: %w", ordinal, err)
	}
	cctx, err := makeContext(dev)
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: creating a context: %w", ordinal, err)
	}
	d := &Device{ordinal: ordinal, dev: dev, ctx: cu.CtxFromCUContext(dev, cctx, cu.SchedBlockingSync)}
	started := make(chan error)
	go d.ctx.Run(started)
	if err := <-started; err != nil {
		return nil, fmt.Errorf("gpu: device %d: binding the context: %w", ordinal, err)
	}
	if d.name, err = dev.Name(); err != nil {
		d.name = fmt.Sprintf("device %d", ordinal)
	}
	if err := d.ctx.Do(func() (err error) {
		if d.raw, err = currentContext(); err != nil {
			return err
		}
		for i := range d.d2h {
			if d.d2h[i], err = cu.MakeStream(cu.NonBlocking); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		d.ctx.Close()
		return nil, fmt.Errorf("gpu: device %d: creating a stream: %w", ordinal, err)
	}
	return d, nil
}

// makeContext creates a context and pops it off this thread, for the
// context's own goroutine to take over.
func makeContext(dev cu.Device) (cu.CUContext, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cctx, err := dev.MakeContext(cu.SchedBlockingSync)
	if err != nil {
		return cctx, err
	}
	if _, err := cu.PopCurrentCtx(); err != nil {
		cctx.Destroy()
		return cctx, err
	}
	return cctx, nil
}

// open returns an ErrClosed error once the device is closed.
func (d *Device) open() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return fmt.Errorf("gpu: device %d: %w", d.ordinal, ErrClosed)
	}
	return nil
}

// do runs fn on the device's goroutine.
func (d *Device) do(fn func() error) error {
	if err := d.open(); err != nil {
		return err
	}
	return d.ctx.Do(fn)
}

// onThread runs fn on the calling goroutine, locked to its OS thread with
// the device's context made current there: for queueing work on a
// stream of the caller's (cu's thin wrappers of the driver use the
// thread's current context) without waiting for the device's goroutine.
// Calls that allocate, free or create stay on that goroutine (do).
func (d *Device) onThread(fn func() error) error {
	if err := d.open(); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := setCurrent(d.raw); err != nil {
		return err
	}
	return fn()
}

// Name is the device's name, such as "NVIDIA H200".
func (d *Device) Name() string { return d.name }

// Ordinal is the device's ordinal in this process.
func (d *Device) Ordinal() int { return d.ordinal }

// Close waits for the device's work and destroys the context; every
// allocation, mapping and module of it goes with it.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return nil
	}
	d.mu.closed = true
	d.mu.Unlock()
	err := d.ctx.Do(func() error {
		if err := cu.Synchronize(); err != nil {
			return err
		}
		for i := range d.d2h {
			d.d2h[i].Destroy()
		}
		return nil
	})
	if cerr := d.ctx.Close(); err == nil {
		err = cerr
	}
	return err
}

// Buffer is a device allocation of this process.
type Buffer struct {
	d    *Device
	ptr  cu.DevicePtr
	size int64
}

// Alloc allocates n bytes of device memory.
func (d *Device) Alloc(n int64) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: allocation of %d bytes", ErrInvalid, n)
	}
	b := &Buffer{d: d, size: n}
	err := d.do(func() (err error) {
		b.ptr, err = cu.MemAlloc(n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: allocating %d bytes on device %d: %w", n, d.ordinal, err)
	}
	return b, nil
}

// Upload allocates device memory for src and copies src into it.
func (d *Device) Upload(src []byte) (*Buffer, error) {
	b, err := d.Alloc(max(int64(len(src)), 1))
	if err != nil {
		return nil, err
	}
	if err := b.CopyFrom(0, src); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// Size is the allocation's size in bytes.
func (b *Buffer) Size() int64 { return b.size }

// Ptr is the allocation's device address.
func (b *Buffer) Ptr() uintptr { return uintptr(b.ptr) }

// Free releases the allocation.
func (b *Buffer) Free() error {
	if b.ptr == 0 {
		return nil
	}
	err := b.d.do(func() error { return cu.MemFree(b.ptr) })
	b.ptr = 0
	return err
}

func (b *Buffer) check(off int64, n int) error {
	if off < 0 || int64(n) > b.size || off > b.size-int64(n) {
		return fmt.Errorf("%w: %d bytes at %d of a %d-byte allocation", ErrInvalid, n, off, b.size)
	}
	return nil
}

// CopyFrom copies src into the allocation at off, synchronously.
func (b *Buffer) CopyFrom(off int64, src []byte) error {
	if err := b.check(off, len(src)); err != nil || len(src) == 0 {
		return err
	}
	return b.d.do(func() error {
		return cu.MemcpyHtoD(b.ptr+cu.DevicePtr(off), unsafe.Pointer(&src[0]), int64(len(src)))
	})
}

// CopyTo copies len(dst) bytes of the allocation at off into dst,
// synchronously.
func (b *Buffer) CopyTo(dst []byte, off int64) error {
	if err := b.check(off, len(dst)); err != nil || len(dst) == 0 {
		return err
	}
	return b.d.do(func() error {
		return cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), b.ptr+cu.DevicePtr(off), int64(len(dst)))
	})
}

// Zero sets the allocation's bytes to 0.
func (b *Buffer) Zero() error {
	return b.d.do(func() error { return cu.MemsetD8(b.ptr, 0, b.size) })
}

// IPCHandle exports the allocation to other processes of the machine.
func (b *Buffer) IPCHandle() (IPCHandle, error) {
	var h IPCHandle
	err := b.d.do(func() (err error) {
		h, err = ipcGet(uintptr(b.ptr))
		return err
	})
	return h, err
}

// Peer is a device allocation of another process, opened from its IPC
// handle. Its bytes are readable until Close.
type Peer struct {
	d    *Device
	ptr  uintptr
	size int64
}

// OpenIPC maps another process's allocation into this context. A handle
// of this process's own allocation is refused by the driver.
func (d *Device) OpenIPC(h IPCHandle) (*Peer, error) {
	p := &Peer{d: d}
	err := d.do(func() (err error) {
		if p.ptr, err = ipcOpen(h); err != nil {
			return err
		}
		size, _, err := cu.DevicePtr(p.ptr).AddressRange()
		if err != nil {
			ipcClose(p.ptr)
			return err
		}
		p.size = size
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: opening an IPC handle: %w", d.ordinal, err)
	}
	return p, nil
}

// Ptr is the mapping's device address.
func (p *Peer) Ptr() uintptr { return p.ptr }

// Size is the size of the mapped allocation.
func (p *Peer) Size() int64 { return p.size }

// Close unmaps the allocation; the exporting process's memory is not
// affected.
func (p *Peer) Close() error {
	if p.ptr == 0 {
		return nil
	}
	err := p.d.do(func() error { return ipcClose(p.ptr) })
	p.ptr = 0
	return err
}

// Pinned is page-locked host memory, reachable by every context of the
// process (portable): the only host memory that asynchronous copies use.
type Pinned struct {
	d *Device
	b []byte
}

// AllocPinned allocates n bytes of pinned host memory. Pinning is slow
// (it maps and locks every page): allocate once, reuse.
func (d *Device) AllocPinned(n int) (*Pinned, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: pinned allocation of %d bytes", ErrInvalid, n)
	}
	var p unsafe.Pointer
	err := d.do(func() (err error) {
		p, err = hostAlloc(n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: pinning %d bytes: %w", n, err)
	}
	return &Pinned{d: d, b: unsafe.Slice((*byte)(p), n)}, nil
}

// Bytes is the pinned memory; it is valid until Free.
func (p *Pinned) Bytes() []byte { return p.b }

// Free releases the pinned memory.
func (p *Pinned) Free() error {
	if p.b == nil {
		return nil
	}
	ptr := unsafe.Pointer(&p.b[0])
	p.b = nil
	return p.d.do(func() error { return hostFree(ptr) })
}

// Copy is a device-to-host copy in flight.
type Copy struct {
	d  *Device
	ev C.CUevent
}

// CopyAsync queues a copy of n bytes at device address src (an allocation
// of this context or a Peer) into pinned memory at dst and returns without
// waiting. Consecutive copies go to different streams and may overlap. dst
// must be pinned memory (Pinned or Staged) and stay allocated until Wait
// returns.
//
// Unlike the device's other calls, the copy is queued from the calling
// goroutine's thread, with the context made current there, and Wait polls
// its event: neither waits for another goroutine (the context's, or a
// completion callback's) to be scheduled, which takes up to a preemption
// slice while compression holds every P.
func (d *Device) CopyAsync(dst unsafe.Pointer, src uintptr, n int64) (*Copy, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: copy of %d bytes", ErrInvalid, n)
	}
	if err := d.open(); err != nil {
		return nil, err
	}
	st := d.d2h[int(d.next.Add(1))%len(d.d2h)]
	ev, err := copyEvent(d.raw, dst, src, n, C.CUstream(unsafe.Pointer(st.C())))
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: copying %d bytes to the host: %w", d.ordinal, n, err)
	}
	return &Copy{d: d, ev: ev}, nil
}

// copySpin bounds how long Wait polls a copy before it blocks in the
// driver. A copy that lands within it is seen at once; one that shares
// the copy engines with the copies of many other slots (16 copies of 7
// MiB at once take about 2 ms each: BenchmarkCopyWait) is waited for
// asleep, and costs no core. On the H100 node with 16 slots, 200 µs
// instead of 5 ms took the daemon's CPU from 0.78 to 0.58 s per GB at the
// same MB/s (docs/benchmarks.md).
const copySpin = 200 * time.Microsecond

// Wait blocks until the copy has landed. It polls for up to copySpin (in
// the driver call, so that the landing is seen at once), then sleeps in
// the driver (the copy's event is a blocking-sync one). It is not
// cancellable: the destination must not be reused before the device is
// done writing it. Wait must be called once.
func (c *Copy) Wait() error { return c.wait(copySpin) }

// wait is Wait polling for up to spin; with spin 0 it blocks in the
// driver at once if the copy has not landed (for work that takes
// milliseconds, such as kernels queued before the copy).
func (c *Copy) wait(spin time.Duration) error {
	if err := eventFinish(c.d.raw, c.ev, spin); err != nil {
		return fmt.Errorf("gpu: device %d: copy to the host: %w", c.d.ordinal, err)
	}
	return nil
}

// CopyToHost copies n bytes at device address src into dst and waits: a
// plain cuMemcpyDtoH, the baseline that staged copies are measured
// against.
func (d *Device) CopyToHost(dst unsafe.Pointer, src uintptr, n int64) error {
	return d.do(func() error { return cu.MemcpyDtoH(dst, cu.DevicePtr(src), n) })
}
