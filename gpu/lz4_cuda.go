//go:build cuda

package gpu

/*
#include <cuda.h>
*/
import "C"

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/shuffled/shuffled/gpu/lz4ref"
	"gorgonia.org/cu"
)

// lz4PTX is kernels/lz4.cu compiled to PTX; the driver compiles it for
// the device when the module is loaded.
//
//go:embed kernels/lz4.ptx
var lz4PTX string

// Launch shapes of the lz4 kernels, matching kernels/lz4.cu. The warps
// per block of lz4_compress (WARPS there) are read from the loaded
// kernel: its __launch_bounds__ are 32 threads a warp.
const (
	lz4HashBytes   = 2 << 12 // the hash table of a warp (u16 entries)
	lz4SmemSlack   = 16      // shared memory past the block: the copy's alignment
	lz4ScanThreads = 1024    // the one block of lz4_scan
	lz4CopyThreads = 256     // threads per block of lz4_gather and lz4_compact
	lz4JobSize     = 24      // struct Job
	lz4OpSize      = 32      // struct Op
)

// lz4AdlerThreads is the threads per block of lz4_adler (ADLER_THREADS).
const lz4AdlerThreads = 256

var lz4KernelNames = [...]string{"lz4_gather", "lz4_compress", "lz4_compress_smem", "lz4_scan", "lz4_compact", "lz4_adler"}

// Compressor turns the records of device batches into lz4-java streams
// on one device with the kernels of kernels/lz4.cu: the same bytes as
// package lz4ref makes of the same records. It has a number of slots,
// each a stream of its own with scratch memory that grows to the largest
// batch it has seen; a Compress takes a free slot (waiting while every
// slot is out) and holds it until its result is released, so that as
// many batches as there are slots are compressed, copied out and
// written at the same time.
type Compressor struct {
	d   *Device
	mod cu.Module
	fn  map[string]cu.Function
	// smem: lz4_compress_smem (each warp copies its block into shared
	// memory first) rather than lz4_compress (reads global memory, the
	// default: measured faster, docs/benchmarks.md "GPU").
	smem bool
	// warps: warps per block of lz4_compress, each compressing one lz4
	// block (its maximum threads per block over 32).
	warps int
	// resident: how many warps of lz4_compress an SM holds at once (the
	// occupancy calculator's blocks per SM times warps).
	resident int
	slots    chan *lz4Slot
	all      []*lz4Slot
}

// lz4Slot is one batch's worth of a Compressor: its stream and scratch.
type lz4Slot struct {
	stream  cu.Stream
	scratch scratch
	// offs and sums are pinned memory the streams' offsets and the
	// blocks' Adler-32 land in, and jobs, ops and meta the pinned memory
	// the kernels' inputs are uploaded from (asynchronously: the slot is
	// reused only after its last batch's wait), each grown like the
	// scratch.
	offs, sums, jobs, ops, meta *Pinned
}

// growPinned returns the first n bytes of *p, pinned memory that it
// replaces with a quarter more than n when it is smaller.
func growPinned(d *Device, p **Pinned, n int) ([]byte, error) {
	if *p == nil || len((*p).b) < n {
		if *p != nil {
			(*p).Free()
			*p = nil
		}
		need := max(n, 256)
		np, err := d.AllocPinned(need + need/4)
		if err != nil {
			return nil, err
		}
		*p = np
	}
	return (*p).b[:n:n], nil
}

// pinnedSlice returns *p, the slot's pinned memory, grown like the
// scratch to room for at least n values of T (256 bytes at least), as a
// slice of n values.
func pinnedSlice[T int64 | uint32](d *Device, p **Pinned, n int64) ([]T, error) {
	size := int64(unsafe.Sizeof(*new(T)))
	b, err := growPinned(d, p, int(size*max(n, 256/size)))
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), nil
}

// free frees the slot's scratch and pinned memory.
func (s *lz4Slot) free() {
	s.scratch.free()
	for _, p := range []**Pinned{&s.offs, &s.sums, &s.jobs, &s.ops, &s.meta} {
		if *p != nil {
			(*p).Free()
			*p = nil
		}
	}
}

// Slots is the number of batches the compressor has in flight at most.
func (c *Compressor) Slots() int { return len(c.all) }

// UseSharedMemory chooses between the two compress kernels, which make
// the same bytes: true copies each block into shared memory before
// compressing it, false (the default) reads it from global memory. On an
// H200 the global kernel is about 1.5 times as fast: the 40 KiB of shared
// memory a warp needs for a 32 KiB block leave 5 warps per SM instead of
// 25, and a batch fits the L2 cache anyway. It must not be called while a
// Compress is running.
func (c *Compressor) UseSharedMemory(on bool) { c.smem = on }

// NewCompressor loads the lz4 kernels built into the program, with slots
// batches in flight (DefaultCompressSlots when slots <= 0).
func (d *Device) NewCompressor(slots int) (*Compressor, error) {
	return d.LoadCompressor([]byte(lz4PTX), slots)
}

// LoadCompressor loads the lz4 kernels from PTX (or a cubin) built from
// kernels/lz4.cu, with slots batches in flight (DefaultCompressSlots when
// slots <= 0).
func (d *Device) LoadCompressor(ptx []byte, slots int) (*Compressor, error) {
	if slots <= 0 {
		slots = DefaultCompressSlots
	}
	c := &Compressor{d: d, fn: make(map[string]cu.Function), slots: make(chan *lz4Slot, slots)}
	err := d.do(func() (err error) {
		if c.mod, err = cu.LoadData(string(ptx)); err != nil {
			return fmt.Errorf("loading the module: %w", err)
		}
		for _, name := range lz4KernelNames {
			f, err := c.mod.Function(name)
			if err != nil {
				return fmt.Errorf("kernel %s: %w", name, err)
			}
			c.fn[name] = f
		}
		// The largest block (64 KiB) takes more than the 48 KiB of
		// dynamic shared memory a kernel gets without asking.
		smem := lz4HashBytes + lz4ref.MaxBlockSize + lz4SmemSlack
		if err := funcSetAttribute(c.fn["lz4_compress_smem"], C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem); err != nil {
			return fmt.Errorf("lz4_compress_smem: %d bytes of shared memory: %w", smem, err)
		}
		threads, err := funcAttribute(c.fn["lz4_compress"], C.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
		if err != nil {
			return fmt.Errorf("lz4_compress: threads per block: %w", err)
		}
		if threads < 32 || threads%32 != 0 {
			return fmt.Errorf("lz4_compress: %d threads per block, not whole warps", threads)
		}
		c.warps = threads / 32
		if c.resident, err = residentBlocks(c.fn["lz4_compress"], threads, 0); err != nil {
			return fmt.Errorf("lz4_compress: occupancy: %w", err)
		}
		c.resident *= c.warps
		for range slots {
			s := &lz4Slot{scratch: newScratch(d)}
			if s.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
				return err
			}
			c.all = append(c.all, s)
			c.slots <- s
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: lz4 kernels: %w", d.ordinal, err)
	}
	return c, nil
}

// Close frees the scratch memory and unloads the kernels. Results not
// yet released hold it up.
func (c *Compressor) Close() error {
	for range c.all {
		s := <-c.slots
		s.free()
	}
	return c.d.do(func() error {
		for _, s := range c.all {
			s.stream.Destroy()
		}
		return c.mod.Unload()
	})
}

// ResidentWarps is how many warps of the compress kernel each SM holds at
// once, each compressing one lz4 block, by the occupancy calculator.
func (c *Compressor) ResidentWarps() int { return c.resident }

// Compressed is the result of Compress: every record's stream, one after
// the other in device memory, readable until Release.
type Compressed struct {
	c    *Compressor
	slot *lz4Slot
	// Ptr and Size locate the streams; Streams[i] is record i's, relative
	// to Ptr.
	Ptr     uintptr
	Size    int64
	Streams []Range
	// Adler32[i] is the Adler-32 of record i's stream, when the plan asked
	// for it (CompressPlan.Adler32); nil otherwise.
	Adler32 []uint32
	once    sync.Once
}

// Release lets the compressor reuse the memory of the streams.
func (r *Compressed) Release() {
	r.once.Do(func() {
		if r.slot != nil {
			r.c.slots <- r.slot
		}
	})
}

// Compress makes every record of pl into one lz4-java stream of blockSize
// blocks (lz4ref.CheckBlockSize): for a columnar plan it first gathers
// the records out of the batch of size bytes at device address src (an
// allocation of the device or a Peer), for an opaque one the records are
// src's bytes. It returns once the streams are in device memory; the
// caller copies them to the host and releases the result. With
// pl.Adler32 the device also sums every stream (Compressed.Adler32).
func (c *Compressor) Compress(src uintptr, size int64, pl *CompressPlan, blockSize int) (*Compressed, error) {
	if err := lz4ref.CheckBlockSize(blockSize); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := pl.check(size); err != nil {
		return nil, err
	}
	s := <-c.slots
	res, err := c.compress(s, src, pl, blockSize)
	if err != nil {
		c.slots <- s
		return nil, fmt.Errorf("gpu: device %d: compressing %d records: %w", c.d.ordinal, len(pl.Records), err)
	}
	return res, nil
}

func (c *Compressor) compress(s *lz4Slot, src uintptr, pl *CompressPlan, blockSize int) (*Compressed, error) {
	res := &Compressed{c: c, slot: s, Streams: make([]Range, len(pl.Records))}
	if len(pl.Records) == 0 {
		return res, nil
	}
	jobs, first, slots := pl.jobs(blockSize)
	njobs := int64(len(jobs))
	level := uint32(lz4ref.Level(blockSize))
	bufs := map[string]int64{
		"jobs": lz4JobSize * njobs, "slots": slots, "sizes": 8 * njobs, "offs": 8 * (njobs + 1), "out": slots,
	}
	if pl.Adler32 {
		bufs["sums"] = 4 * njobs
	}
	if pl.Gathered > 0 {
		bufs["gather"], bufs["ops"], bufs["meta"] = pl.Gathered, lz4OpSize*int64(len(pl.Ops)), int64(len(pl.Meta))
	}
	b := map[string]*Buffer{}
	for name, n := range bufs {
		buf, err := s.scratch.get(name, n)
		if err != nil {
			return nil, err
		}
		b[name] = buf
	}
	payload := src
	if pl.Gathered > 0 {
		payload = uintptr(b["gather"].ptr)
	}
	jb, err := growPinned(c.d, &s.jobs, int(lz4JobSize*njobs))
	if err != nil {
		return nil, err
	}
	for i, j := range jobs {
		e := jb[lz4JobSize*i:]
		if j.len > 0 {
			binary.LittleEndian.PutUint64(e, uint64(payload)+uint64(j.src))
		}
		binary.LittleEndian.PutUint64(e[8:], uint64(j.slot))
		binary.LittleEndian.PutUint32(e[16:], uint32(j.len))
		binary.LittleEndian.PutUint32(e[20:], level)
	}
	var ob, mb []byte
	if pl.Gathered > 0 {
		if ob, err = growPinned(c.d, &s.ops, lz4OpSize*len(pl.Ops)); err != nil {
			return nil, err
		}
		if mb, err = growPinned(c.d, &s.meta, len(pl.Meta)); err != nil {
			return nil, err
		}
		copy(mb, pl.Meta)
		for i, o := range pl.Ops {
			e := ob[lz4OpSize*i:]
			from := uint64(src)
			if o.FromMeta {
				from = uint64(b["meta"].ptr)
			}
			binary.LittleEndian.PutUint64(e, uint64(o.Kind)|uint64(o.Shift&7)<<8|uint64(uint32(o.Base))<<32)
			binary.LittleEndian.PutUint64(e[8:], uint64(o.N))
			binary.LittleEndian.PutUint64(e[16:], from+uint64(o.Src))
			binary.LittleEndian.PutUint64(e[24:], uint64(b["gather"].ptr)+uint64(o.Dst))
		}
	}
	offs, err := pinnedSlice[int64](c.d, &s.offs, njobs+1)
	if err != nil {
		return nil, err
	}
	var sums []uint32
	if pl.Adler32 {
		if sums, err = pinnedSlice[uint32](c.d, &s.sums, njobs); err != nil {
			return nil, err
		}
	}
	// Queued from this thread, not the device's goroutine: batches of
	// many connections go to their slots' streams at once.
	var landed *Copy
	err = c.d.onThread(func() error {
		k := lz4Launcher{c: c, stream: s.stream}
		if pl.Gathered > 0 {
			k.upload(b["ops"], ob)
			k.upload(b["meta"], mb)
			k.memset(b["gather"].ptr, pl.Gathered)
			k.launch("lz4_gather", len(pl.Ops), lz4CopyThreads, b["ops"].ptr, int64(len(pl.Ops)))
		}
		k.upload(b["jobs"], jb)
		if c.smem {
			k.smem = lz4HashBytes + blockSize + lz4SmemSlack
			k.launch("lz4_compress_smem", int(njobs), 32, b["jobs"].ptr, njobs, b["slots"].ptr, b["sizes"].ptr)
			k.smem = 0
		} else {
			w := int64(c.warps)
			k.launch("lz4_compress", int((njobs+w-1)/w), 32*c.warps, b["jobs"].ptr, njobs, b["slots"].ptr, b["sizes"].ptr)
		}
		k.launch("lz4_scan", 1, lz4ScanThreads, b["sizes"].ptr, b["offs"].ptr, njobs)
		k.launch("lz4_compact", int(njobs), lz4CopyThreads, b["jobs"].ptr, b["sizes"].ptr, b["offs"].ptr, b["slots"].ptr, b["out"].ptr, njobs)
		if pl.Adler32 {
			k.launch("lz4_adler", int(njobs), lz4AdlerThreads, b["offs"].ptr, b["out"].ptr, b["sums"].ptr, njobs)
			// Before the offsets' copy, whose event the wait is for.
			k.download(unsafe.Pointer(&sums[0]), b["sums"], 4*njobs)
		}
		if k.err == nil {
			// The streams' offsets follow the kernels on their stream,
			// so that one wait sees both done.
			ev, err := copyEvent(c.d.raw, unsafe.Pointer(&offs[0]), uintptr(b["offs"].ptr), 8*(njobs+1), C.CUstream(unsafe.Pointer(s.stream.C())))
			if err != nil {
				k.err = fmt.Errorf("copying the streams' offsets: %w", err)
			} else {
				landed = &Copy{d: c.d, ev: ev}
			}
		}
		if k.err != nil && k.queued {
			// The slot goes back to the free list: its pinned
			// memory must not be written while an upload of it
			// may still be reading.
			k.stream.Synchronize()
		}
		return k.err
	})
	if err != nil {
		return nil, err
	}
	// The kernels take milliseconds: block, don't poll. A fault of
	// theirs surfaces here.
	if err := landed.wait(0); err != nil {
		return nil, err
	}
	for i := range pl.Records {
		lo, hi := offs[first[i]], offs[first[i+1]]
		res.Streams[i] = Range{Offset: lo, Length: hi - lo}
	}
	if pl.Adler32 {
		res.Adler32 = combineAdler32(sums, offs, first)
	}
	res.Ptr, res.Size = uintptr(b["out"].ptr), offs[njobs]
	return res, nil
}

// lz4Launcher queues copies and kernels on a slot's stream and keeps the
// first error; it runs on a thread the context is current on
// (Device.onThread).
type lz4Launcher struct {
	c      *Compressor
	stream cu.Stream
	smem   int // dynamic shared memory of the next launch
	args   [8]uint64
	ptrs   [8]unsafe.Pointer
	err    error
	queued bool // whether anything was queued
}

// upload queues a copy of src, pinned memory that must stay untouched
// until the stream's work has completed, into dst.
func (k *lz4Launcher) upload(dst *Buffer, src []byte) {
	if k.err != nil || len(src) == 0 {
		return
	}
	k.queued = true
	if err := cu.MemcpyHtoDAsync(dst.ptr, unsafe.Pointer(&src[0]), int64(len(src)), k.stream); err != nil {
		k.err = fmt.Errorf("upload: %w", err)
	}
}

// download queues a copy of n bytes of src into dst, pinned memory that
// must be read only after a wait for the stream's work.
func (k *lz4Launcher) download(dst unsafe.Pointer, src *Buffer, n int64) {
	if k.err != nil || n == 0 {
		return
	}
	k.queued = true
	if err := cu.MemcpyDtoHAsync(dst, src.ptr, n, k.stream); err != nil {
		k.err = fmt.Errorf("download: %w", err)
	}
}

func (k *lz4Launcher) memset(ptr cu.DevicePtr, n int64) {
	if k.err == nil {
		k.queued = true
		if err := cu.MemsetD8Async(ptr, 0, n, k.stream); err != nil {
			k.err = fmt.Errorf("memset: %w", err)
		}
	}
}

// launch queues kernel name; every argument is one 64-bit slot.
func (k *lz4Launcher) launch(name string, grid, block int, args ...any) {
	if k.err != nil || grid == 0 {
		return
	}
	for i, a := range args {
		switch v := a.(type) {
		case cu.DevicePtr:
			k.args[i] = uint64(v)
		case int64:
			k.args[i] = uint64(v)
		default:
			panic(fmt.Sprintf("gpu: kernel %s argument %d of type %T", name, i, a))
		}
		k.ptrs[i] = unsafe.Pointer(&k.args[i])
	}
	k.queued = true
	if err := k.c.fn[name].Launch(grid, 1, 1, block, 1, 1, k.smem, k.stream, k.ptrs[:len(args)]); err != nil {
		k.err = fmt.Errorf("kernel %s: %w", name, err)
	}
}
