//go:build cuda

package gpu

/*
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// HostReader makes the host copies PlanColumnar needs of device batches
// (Layout.ReadHost's, from device memory) without the device's goroutine:
// each level of the column trees is copied at once, asynchronously, on
// the reader's own stream into the reader's pinned memory, from the
// calling goroutine's thread with the context made current there, and
// waited for on one event, polled for up to copySpin as Copy.Wait does,
// then slept on until the copies have landed. A batch of flat columns
// takes one round trip; each level of lists or maps below them one more.
//
// The HostBuffers a Read returns point into the reader's pinned memory:
// they are valid until the reader's next Read or Close. A reader is for
// one goroutine at a time; keep a few per device (pinning and creating a
// stream are slow) and Close them before the device.
type HostReader struct {
	d      *Device
	stream C.CUstream
	ev     C.CUevent
	// pinned is the memory the copies land in, used[0:used) by this Read;
	// outgrown holds what a Read outgrew, still referenced by its
	// results, freed at the next Read, which gets one buffer of room for
	// everything (a quarter extra).
	pinned   *Pinned
	used     int
	outgrown []*Pinned
	wanted   int
	// The copies of a round, as the driver takes them.
	dst, src []uintptr
	n        []C.size_t
	base     uintptr
}

// NewHostReader makes a host reader of the device's allocations.
func (d *Device) NewHostReader() (*HostReader, error) {
	r := &HostReader{d: d}
	err := d.do(func() (err error) {
		r.stream, r.ev, err = readerCreate()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: making a host reader: %w", d.ordinal, err)
	}
	return r, nil
}

// Read makes l.ReadHost's host copies of the batch l locates in an
// allocation at device address src (this context's, or a Peer) that
// l.Validate has passed, and returns the same copies, the same byte count
// and the same errors: ErrInvalid for offsets that do not check out. The
// copies are valid until the reader's next Read or Close.
func (r *HostReader) Read(l *Layout, src uintptr) (HostBuffers, int64, error) {
	d := r.d
	if err := d.open(); err != nil {
		return HostBuffers{}, 0, err
	}
	if r.stream == nil {
		return HostBuffers{}, 0, fmt.Errorf("gpu: device %d: host reader: %w", d.ordinal, ErrClosed)
	}
	if err := r.reset(); err != nil {
		return HostBuffers{}, 0, err
	}
	r.base = src
	return l.readHost(r)
}

// reset frees what the last Read outgrew and, if it did, pins room for
// all it wanted.
func (r *HostReader) reset() error {
	if len(r.outgrown) == 0 {
		r.used, r.wanted = 0, 0
		return nil
	}
	var first error
	for _, p := range r.outgrown {
		if err := p.Free(); err != nil && first == nil {
			first = err
		}
	}
	r.outgrown = r.outgrown[:0]
	want := r.wanted
	if r.pinned != nil {
		if err := r.pinned.Free(); err != nil && first == nil {
			first = err
		}
		r.pinned = nil
	}
	r.used, r.wanted = 0, 0
	if first != nil {
		return fmt.Errorf("gpu: device %d: host reader: %w", r.d.ordinal, first)
	}
	p, err := r.d.AllocPinned(want + want/4)
	if err != nil {
		return err
	}
	r.pinned = p
	return nil
}

// buf hands out n bytes of the pinned memory, at a multiple of 8.
func (r *HostReader) buf(n int) ([]byte, error) {
	need := (n + 7) &^ 7
	r.wanted += need
	if r.pinned == nil || len(r.pinned.b)-r.used < need {
		if r.pinned != nil {
			r.outgrown = append(r.outgrown, r.pinned)
			r.pinned = nil
		}
		size := max(need, 64<<10)
		p, err := r.d.AllocPinned(size + size/4)
		if err != nil {
			return nil, err
		}
		r.pinned, r.used = p, 0
	}
	b := r.pinned.b[r.used : r.used+n : r.used+n]
	r.used += need
	return b, nil
}

// copy makes the copies of cs from the batch at r.base.
func (r *HostReader) copy(cs []hostCopy) error {
	r.dst, r.src, r.n = r.dst[:0], r.src[:0], r.n[:0]
	for _, c := range cs {
		if len(c.dst) == 0 {
			continue
		}
		r.dst = append(r.dst, uintptr(unsafe.Pointer(&c.dst[0])))
		r.src = append(r.src, r.base+uintptr(c.off))
		r.n = append(r.n, C.size_t(len(c.dst)))
	}
	if err := readRound(r.d.raw, r.stream, r.ev, r.dst, r.src, r.n, copySpin); err != nil {
		return fmt.Errorf("gpu: device %d: copying %d buffers to the host: %w", r.d.ordinal, len(r.n), err)
	}
	return nil
}

// Close waits for nothing (every Read has waited for its copies) and
// frees the reader's stream, event and pinned memory.
func (r *HostReader) Close() error {
	if r.stream == nil {
		return nil
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	s, ev := r.stream, r.ev
	r.stream, r.ev = nil, nil
	keep(r.d.do(func() error { return readerDestroy(s, ev) }))
	for _, p := range r.outgrown {
		keep(p.Free())
	}
	r.outgrown = nil
	if r.pinned != nil {
		keep(r.pinned.Free())
		r.pinned = nil
	}
	if first != nil {
		return fmt.Errorf("gpu: device %d: closing a host reader: %w", r.d.ordinal, first)
	}
	return nil
}
