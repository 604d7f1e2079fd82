//go:build cuda

package gpu

/*
#include <cuda.h>
*/
import "C"

import (
	_ "embed"
	"fmt"
	"sync"
	"unsafe"

	"github.com/shuffled/shuffled/partition"
	"gorgonia.org/cu"
)

// partitionPTX is kernels/partition.cu compiled to PTX; the driver
// compiles it for the device when the module is loaded.
//
//go:embed kernels/partition.ptx
var partitionPTX string

// Launch shapes of the partition kernels, matching kernels/partition.cu.
const (
	threads     = 256
	scanThreads = 1024
	scanTile    = 4 * scanThreads
	tileRows    = 2048 // rows per warp in partition_count and partition_rank
)

var kernelNames = [...]string{
	"hash_init", "hash_fixed", "hash_var", "partition_count", "partition_rank", "partition_offsets",
	"scatter_fixed", "scatter_validity", "scatter_lengths", "scatter_chars",
	"scan_reduce", "scan_tiles", "scan_down",
}

// Partitioner hash-partitions columnar batches on one device with the
// kernels of kernels/partition.cu. Its scratch memory grows to the largest
// batch seen; calls are serialized.
type Partitioner struct {
	d      *Device
	mod    cu.Module
	fn     map[string]cu.Function
	stream cu.Stream

	mu      sync.Mutex
	scratch scratch
}

// NewPartitioner loads the partition kernels built into the program.
func (d *Device) NewPartitioner() (*Partitioner, error) {
	return d.LoadPartitioner([]byte(partitionPTX))
}

// LoadPartitioner loads the partition kernels from PTX (or a cubin) built
// from kernels/partition.cu.
func (d *Device) LoadPartitioner(ptx []byte) (*Partitioner, error) {
	p := &Partitioner{d: d, fn: make(map[string]cu.Function), scratch: newScratch(d)}
	err := d.do(func() (err error) {
		if p.mod, err = cu.LoadData(string(ptx)); err != nil {
			return fmt.Errorf("loading the module: %w", err)
		}
		for _, name := range kernelNames {
			f, err := p.mod.Function(name)
			if err != nil {
				return fmt.Errorf("kernel %s: %w", name, err)
			}
			p.fn[name] = f
		}
		p.stream, err = cu.MakeStream(cu.NonBlocking)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: partition kernels: %w", d.ordinal, err)
	}
	return p, nil
}

// Close frees the scratch memory and unloads the kernels.
func (p *Partitioner) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scratch.free()
	return p.d.do(func() error {
		p.stream.Destroy()
		return p.mod.Unload()
	})
}

// hashKind is the hash_fixed kind of a fixed-width key type.
func hashKind(t partition.Type) (int64, bool) {
	switch t {
	case partition.Bool:
		return 0, true
	case partition.Int8:
		return 1, true
	case partition.Int16:
		return 2, true
	case partition.Int32, partition.Date32:
		return 3, true
	case partition.Int64, partition.TimestampMicros, partition.Decimal64:
		return 4, true
	case partition.Float32:
		return 5, true
	case partition.Float64:
		return 6, true
	case partition.Decimal128:
		return 7, true
	case partition.Decimal32:
		return 8, true
	}
	return 0, false
}

// Partition reorders the batch that l locates in src into hash partition
// order in dst, laid out by the same l: row r goes to partition
// pmod(hash(r), numPartitions) with Spark's Murmur3 of the key columns
// (seed 42, each key's hash the seed of the next, nulls skipped), rows
// keep their relative order within a partition, exactly as
// partition.Partition does on the host. It returns the numPartitions+1
// partition row offsets. String offsets in dst start at 0.
func (p *Partitioner) Partition(dst, src *Buffer, l Layout, keyCols []int, numPartitions int) ([]int64, error) {
	if numPartitions < 1 || numPartitions > MaxGPUPartitions {
		return nil, fmt.Errorf("%w: numPartitions = %d, want 1 to %d", ErrInvalid, numPartitions, MaxGPUPartitions)
	}
	if dst.d != p.d || src.d != p.d {
		return nil, fmt.Errorf("%w: buffers of another device", ErrInvalid)
	}
	for _, b := range []*Buffer{src, dst} {
		if err := l.Validate(b.size); err != nil {
			return nil, err
		}
	}
	for _, k := range keyCols {
		if k < 0 || k >= len(l.Columns) {
			return nil, fmt.Errorf("%w: key column %d out of range [0,%d)", ErrInvalid, k, len(l.Columns))
		}
	}
	for i, c := range l.Columns {
		if c.Type.Nested() {
			return nil, fmt.Errorf("%w: column %d: the GPU partitioner moves flat columns only, not %v", ErrInvalid, i, c.Type)
		}
		if c.Validity.Length > 0 && (c.Validity.Offset%4 != 0 || c.Validity.Offset+(c.Validity.Length+3)&^3 > dst.size) {
			return nil, fmt.Errorf("%w: column %d validity at %d: want a multiple of 4 with whole words inside the allocation", ErrInvalid, i, c.Validity.Offset)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rows := int64(l.Rows)
	offsets := make([]int64, numPartitions+1)
	if rows == 0 {
		return offsets, p.d.do(func() error { return cu.Memcpy(dst.ptr, src.ptr, src.size) })
	}
	nparts := int64(numPartitions)
	tiles := (rows + tileRows - 1) / tileRows
	var maxScan int64 = nparts * tiles
	for _, c := range l.Columns {
		if c.Type.VarWidth() {
			maxScan = max(maxScan, rows+1)
		}
	}
	hash, err := p.scratch.get("hash", 4*rows)
	if err != nil {
		return nil, err
	}
	idx, err := p.scratch.get("dst", 4*rows)
	if err != nil {
		return nil, err
	}
	counts, err := p.scratch.get("counts", 4*max(nparts*tiles, rows+1))
	if err != nil {
		return nil, err
	}
	scanned, err := p.scratch.get("scanned", 4*nparts*tiles)
	if err != nil {
		return nil, err
	}
	sums, err := p.scratch.get("sums", 4*((maxScan+scanTile-1)/scanTile))
	if err != nil {
		return nil, err
	}
	offs, err := p.scratch.get("offsets", 8*(nparts+1))
	if err != nil {
		return nil, err
	}
	warps := min(8, sharedBytes/(4*numPartitions))
	shared := warps * 4 * numPartitions
	blocks := int((tiles + int64(warps) - 1) / int64(warps))
	grid := func(n int64) int { return int((n + threads - 1) / threads) }
	at := func(b *Buffer, r Range) uintptr {
		if r.Length == 0 {
			return 0
		}
		return uintptr(b.ptr) + uintptr(r.Offset)
	}
	done := make(chan struct{})
	err = p.d.do(func() error {
		k := launcher{p: p}
		k.launch("hash_init", grid(rows), threads, 0, hash.ptr, rows)
		for _, key := range keyCols {
			c := l.Columns[key]
			if c.Type.VarWidth() {
				k.launch("hash_var", grid(rows), threads, 0, hash.ptr, at(src, c.Offsets), at(src, c.Data), at(src, c.Validity), rows)
				continue
			}
			kind, _ := hashKind(c.Type)
			k.launch("hash_fixed", grid(rows), threads, 0, hash.ptr, at(src, c.Data), at(src, c.Validity), kind, rows)
		}
		k.launch("partition_count", blocks, 32*warps, shared, hash.ptr, counts.ptr, rows, nparts, int64(tileRows), tiles)
		k.scan(uintptr(counts.ptr), uintptr(scanned.ptr), uintptr(sums.ptr), nparts*tiles)
		k.launch("partition_rank", blocks, 32*warps, shared, hash.ptr, scanned.ptr, idx.ptr, rows, nparts, int64(tileRows), tiles)
		k.launch("partition_offsets", grid(nparts+1), threads, 0, scanned.ptr, offs.ptr, nparts, tiles, rows)
		for _, c := range l.Columns {
			if c.Validity.Length > 0 {
				k.memset(at(dst, c.Validity), (c.Validity.Length+3)&^3)
				k.launch("scatter_validity", grid(rows), threads, 0, at(dst, c.Validity), at(src, c.Validity), idx.ptr, rows)
			}
			if !c.Type.VarWidth() {
				k.launch("scatter_fixed", grid(rows), threads, 0, at(dst, c.Data), at(src, c.Data), idx.ptr, int64(c.Type.Width()), rows)
				continue
			}
			// counts is free again: it holds the output lengths, scanned
			// into the output offsets.
			k.launch("scatter_lengths", grid(rows+1), threads, 0, counts.ptr, at(src, c.Offsets), idx.ptr, rows)
			k.scan(uintptr(counts.ptr), at(dst, c.Offsets), uintptr(sums.ptr), rows+1)
			k.launch("scatter_chars", int((32*rows+threads-1)/threads), threads, 0, at(dst, c.Data), at(dst, c.Offsets), at(src, c.Data), at(src, c.Offsets), idx.ptr, rows)
		}
		if k.err == nil {
			k.err = notifyDone(C.CUstream(unsafe.Pointer(p.stream.C())), done)
		}
		return k.err
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: partitioning %d rows: %w", p.d.ordinal, rows, err)
	}
	<-done
	// The kernels are done; a fault of theirs surfaces in this copy.
	if err := p.d.do(func() error {
		return cu.MemcpyDtoH(unsafe.Pointer(&offsets[0]), offs.ptr, 8*(nparts+1))
	}); err != nil {
		return nil, fmt.Errorf("gpu: device %d: partitioning %d rows: %w", p.d.ordinal, rows, err)
	}
	return offsets, nil
}

// launcher queues kernels on the partitioner's stream and keeps the first
// error; it runs on the device's goroutine.
type launcher struct {
	p    *Partitioner
	args [16]uint64
	ptrs [16]unsafe.Pointer
	err  error
}

// launch queues kernel name; every argument is passed as one 64-bit slot
// (cu.DevicePtr, uintptr or int64).
func (k *launcher) launch(name string, grid, block, shared int, args ...any) {
	if k.err != nil || grid == 0 {
		return
	}
	for i, a := range args {
		switch v := a.(type) {
		case cu.DevicePtr:
			k.args[i] = uint64(v)
		case uintptr:
			k.args[i] = uint64(v)
		case int64:
			k.args[i] = uint64(v)
		default:
			panic(fmt.Sprintf("gpu: kernel %s argument %d of type %T", name, i, a))
		}
		k.ptrs[i] = unsafe.Pointer(&k.args[i])
	}
	if err := k.p.fn[name].Launch(grid, 1, 1, block, 1, 1, shared, k.p.stream, k.ptrs[:len(args)]); err != nil {
		k.err = fmt.Errorf("kernel %s: %w", name, err)
	}
}

// scan queues an exclusive scan of n uint32 at in into out.
func (k *launcher) scan(in, out, sums uintptr, n int64) {
	tiles := (n + scanTile - 1) / scanTile
	k.launch("scan_reduce", int(tiles), scanThreads, 0, in, sums, n)
	k.launch("scan_tiles", 1, scanThreads, 0, sums, tiles)
	k.launch("scan_down", int(tiles), scanThreads, 0, in, out, sums, n)
}

func (k *launcher) memset(ptr uintptr, n int64) {
	if k.err == nil {
		if err := cu.MemsetD8Async(cu.DevicePtr(ptr), 0, n, k.p.stream); err != nil {
			k.err = fmt.Errorf("memset: %w", err)
		}
	}
}
