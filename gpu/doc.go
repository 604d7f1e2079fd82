// Package gpu is shuffled's door to NVIDIA GPUs through the CUDA driver
// API: device contexts, device and pinned host memory, CUDA IPC handles,
// a pool of pinned staging buffers that device bytes are copied into, and a
// hash partitioning kernel (Spark's Murmur3, seed 42, pmod, stable scatter
// into partition order) for load generators that stand in for a GPU
// executor, and an lz4 compressor (Compressor: the records of a device
// batch gathered, every block compressed in parallel, the streams
// compacted, and on request each stream's Adler-32 summed per block on
// the device and combined on the host) that makes the lz4-java streams
// package lz4ref makes, byte for byte, from plans made on the host (PlanOpaque, PlanColumnar: SHFC
// blocks or kudo tables of columns of every type of package partition,
// nested ones to any depth, from host copies of the offsets that cut them:
// HostReader, or Layout.ReadHost with copies of the caller's; Covers says
// which formats and types, and its callers serialize any other batch on
// the CPU).
//
// The implementation lives behind the cuda build tag and uses
// gorgonia.org/cu, which initializes the driver when the program starts
// and exits the process when no driver is present; without the tag every
// entry point returns ErrNotSupported and nothing links against CUDA.
//
// Invariants: every CUDA call for a device runs on that device's one
// goroutine locked to an OS thread, except the work of a batch:
// CopyAsync and HostReader.Read queue their copies (and wait for them),
// and Compressor.Compress its uploads, kernels and the streams' offsets
// and sums, from the calling goroutine's thread with the context made
// current there, on streams of their own (a copy's, a reader's, a
// compressor slot's), so that the batches of many connections do not queue behind
// each other on the device's goroutine (a copy's event is made with the
// copy and destroyed by its wait); creating and destroying streams, a
// reader's event and memory stays on it. Asynchronous copies only ever land in,
// and asynchronous uploads only ever leave, pinned host memory; a staging
// buffer is handed out again only after the copy into it has completed
// and its user released it; a host reader's pinned memory is reused only
// by its next Read, and a compressor slot's only by its next batch, after
// the last one waited for its work.
package gpu

import "github.com/shuffled/shuffled/errdefs"

var (
	// ErrNotSupported is returned by every entry point of a build without
	// the cuda tag.
	ErrNotSupported = errdefs.New(errdefs.ErrInternal, "gpu: not supported by this build (build with -tags cuda)")
	// ErrInvalid is wrapped by errors about arguments: sizes, ranges,
	// layouts, partition counts.
	ErrInvalid = errdefs.New(errdefs.ErrInternal, "gpu: invalid argument")
	// ErrClosed is returned by operations on a closed device, pool or
	// mapping.
	ErrClosed = errdefs.New(errdefs.ErrInternal, "gpu: closed")
)

// IPCHandleSize is the size of a CUDA IPC memory handle (CUipcMemHandle).
const IPCHandleSize = 64

// IPCHandle names a device allocation to another process on the same
// machine (cuIpcGetMemHandle).
type IPCHandle [IPCHandleSize]byte

// DefaultCompressSlots is how many batches a Compressor has in flight at
// once unless told otherwise (NewCompressor's slots).
const DefaultCompressSlots = 4
