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

// Launch shapes of the lz4 kernels, matching kernels/lz4.cu.
const (
	lz4Warps       = 4    // warps per block of lz4_compress, one block each
	lz4ScanThreads = 1024 // the one block of lz4_scan
	lz4CopyThreads = 256  // threads per block of lz4_gather and lz4_compact
	lz4JobSize     = 24   // struct Job
	lz4OpSize      = 32   // struct Op
)

var lz4KernelNames = [...]string{"lz4_gather", "lz4_compress", "lz4_scan", "lz4_compact"}

// Compressor turns the records of device batches into lz4-java streams
// on one device with the kernels of kernels/lz4.cu: the same bytes as
// package lz4ref makes of the same records. Its scratch memory grows to
// the largest batch seen; a Compress holds it until its result is
// released, so calls are serialized.
type Compressor struct {
	d      *Device
	mod    cu.Module
	fn     map[string]cu.Function
	stream cu.Stream

	mu      sync.Mutex // held from Compress to Compressed.Release
	scratch map[string]*Buffer
}

// NewCompressor loads the lz4 kernels built into the program.
func (d *Device) NewCompressor() (*Compressor, error) {
	return d.LoadCompressor([]byte(lz4PTX))
}

// LoadCompressor loads the lz4 kernels from PTX (or a cubin) built from
// kernels/lz4.cu.
func (d *Device) LoadCompressor(ptx []byte) (*Compressor, error) {
	c := &Compressor{d: d, fn: make(map[string]cu.Function), scratch: make(map[string]*Buffer)}
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
		c.stream, err = cu.MakeStream(cu.NonBlocking)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: lz4 kernels: %w", d.ordinal, err)
	}
	return c, nil
}

// Close frees the scratch memory and unloads the kernels. A result not
// yet released holds it up.
func (c *Compressor) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, b := range c.scratch {
		b.Free()
		delete(c.scratch, k)
	}
	return c.d.do(func() error {
		c.stream.Destroy()
		return c.mod.Unload()
	})
}

// buf returns scratch buffer name of at least n bytes.
func (c *Compressor) buf(name string, n int64) (*Buffer, error) {
	n = max(n, 256)
	if b := c.scratch[name]; b != nil && b.size >= n {
		return b, nil
	} else if b != nil {
		b.Free()
		delete(c.scratch, name)
	}
	b, err := c.d.Alloc(n + n/4)
	if err != nil {
		return nil, err
	}
	c.scratch[name] = b
	return b, nil
}

// Compressed is the result of Compress: every record's stream, one after
// the other in device memory, readable until Release.
type Compressed struct {
	c *Compressor
	// Ptr and Size locate the streams; Streams[i] is record i's, relative
	// to Ptr.
	Ptr     uintptr
	Size    int64
	Streams []Range
	once    sync.Once
}

// Release lets the compressor reuse the memory of the streams.
func (r *Compressed) Release() {
	r.once.Do(func() {
		if r.c != nil {
			r.c.mu.Unlock()
		}
	})
}

// Compress makes every record of pl into one lz4-java stream of blockSize
// blocks (lz4ref.CheckBlockSize): for a columnar plan it first gathers
// the records out of the batch of size bytes at device address src (an
// allocation of the device or a Peer), for an opaque one the records are
// src's bytes. It returns once the streams are in device memory; the
// caller copies them to the host and releases the result.
func (c *Compressor) Compress(src uintptr, size int64, pl *CompressPlan, blockSize int) (*Compressed, error) {
	if err := lz4ref.CheckBlockSize(blockSize); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := pl.check(size); err != nil {
		return nil, err
	}
	c.mu.Lock()
	res, err := c.compress(src, pl, blockSize)
	if err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("gpu: device %d: compressing %d records: %w", c.d.ordinal, len(pl.Records), err)
	}
	return res, nil
}

func (c *Compressor) compress(src uintptr, pl *CompressPlan, blockSize int) (*Compressed, error) {
	res := &Compressed{c: c, Streams: make([]Range, len(pl.Records))}
	if len(pl.Records) == 0 {
		return res, nil
	}
	jobs, first, slots := pl.jobs(blockSize)
	njobs := int64(len(jobs))
	level := uint32(lz4ref.Level(blockSize))
	bufs := map[string]int64{
		"jobs": lz4JobSize * njobs, "slots": slots, "sizes": 8 * njobs, "offs": 8 * (njobs + 1), "out": slots,
	}
	if pl.Gathered > 0 {
		bufs["gather"], bufs["ops"], bufs["meta"] = pl.Gathered, lz4OpSize*int64(len(pl.Ops)), int64(len(pl.Meta))
	}
	b := map[string]*Buffer{}
	for name, n := range bufs {
		buf, err := c.buf(name, n)
		if err != nil {
			return nil, err
		}
		b[name] = buf
	}
	payload := src
	if pl.Gathered > 0 {
		payload = uintptr(b["gather"].ptr)
	}
	jb := make([]byte, lz4JobSize*njobs)
	for i, j := range jobs {
		e := jb[lz4JobSize*i:]
		if j.len > 0 {
			binary.LittleEndian.PutUint64(e, uint64(payload)+uint64(j.src))
		}
		binary.LittleEndian.PutUint64(e[8:], uint64(j.slot))
		binary.LittleEndian.PutUint32(e[16:], uint32(j.len))
		binary.LittleEndian.PutUint32(e[20:], level)
	}
	var ob []byte
	if pl.Gathered > 0 {
		ob = make([]byte, lz4OpSize*len(pl.Ops))
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
	done := make(chan struct{})
	err := c.d.do(func() error {
		k := lz4Launcher{c: c}
		if pl.Gathered > 0 {
			k.upload(b["ops"], ob)
			k.upload(b["meta"], pl.Meta)
			k.memset(b["gather"].ptr, pl.Gathered)
			k.launch("lz4_gather", len(pl.Ops), lz4CopyThreads, b["ops"].ptr, int64(len(pl.Ops)))
		}
		k.upload(b["jobs"], jb)
		k.launch("lz4_compress", int((njobs+lz4Warps-1)/lz4Warps), 32*lz4Warps, b["jobs"].ptr, njobs, b["slots"].ptr, b["sizes"].ptr)
		k.launch("lz4_scan", 1, lz4ScanThreads, b["sizes"].ptr, b["offs"].ptr, njobs)
		k.launch("lz4_compact", int(njobs), lz4CopyThreads, b["jobs"].ptr, b["sizes"].ptr, b["offs"].ptr, b["slots"].ptr, b["out"].ptr, njobs)
		if k.err == nil {
			k.err = notifyDone(C.CUstream(unsafe.Pointer(c.stream.C())), done)
		}
		return k.err
	})
	if err != nil {
		return nil, err
	}
	<-done
	offs := make([]int64, njobs+1)
	// The kernels are done; a fault of theirs surfaces in this copy.
	if err := c.d.do(func() error {
		return cu.MemcpyDtoH(unsafe.Pointer(&offs[0]), b["offs"].ptr, 8*(njobs+1))
	}); err != nil {
		return nil, err
	}
	for i := range pl.Records {
		lo, hi := offs[first[i]], offs[first[i+1]]
		res.Streams[i] = Range{Offset: lo, Length: hi - lo}
	}
	res.Ptr, res.Size = uintptr(b["out"].ptr), offs[njobs]
	return res, nil
}

// lz4Launcher queues copies and kernels on the compressor's stream and
// keeps the first error; it runs on the device's goroutine.
type lz4Launcher struct {
	c    *Compressor
	args [8]uint64
	ptrs [8]unsafe.Pointer
	err  error
}

func (k *lz4Launcher) upload(dst *Buffer, src []byte) {
	if k.err != nil || len(src) == 0 {
		return
	}
	// From pageable memory the call returns once src is staged.
	if err := cu.MemcpyHtoDAsync(dst.ptr, unsafe.Pointer(&src[0]), int64(len(src)), k.c.stream); err != nil {
		k.err = fmt.Errorf("upload: %w", err)
	}
}

func (k *lz4Launcher) memset(ptr cu.DevicePtr, n int64) {
	if k.err == nil {
		if err := cu.MemsetD8Async(ptr, 0, n, k.c.stream); err != nil {
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
	if err := k.c.fn[name].Launch(grid, 1, 1, block, 1, 1, 0, k.c.stream, k.ptrs[:len(args)]); err != nil {
		k.err = fmt.Errorf("kernel %s: %w", name, err)
	}
}
