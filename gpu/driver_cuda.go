//go:build cuda

package gpu

// The driver calls gorgonia.org/cu lacks: pinned host memory, CUDA IPC
// and host functions on a stream.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

extern void shuffledStreamDone(uintptr_t);

static void CUDA_CB streamDone(void *arg) { shuffledStreamDone((uintptr_t)arg); }

static CUresult launchDone(CUstream s, uintptr_t arg) {
	return cuLaunchHostFunc(s, streamDone, (void *)arg);
}

static CUresult hostAlloc(void **p, size_t n) {
	return cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_PORTABLE);
}

static CUresult ipcGet(CUipcMemHandle *h, uintptr_t ptr) {
	return cuIpcGetMemHandle(h, (CUdeviceptr)ptr);
}

static CUresult ipcOpen(uintptr_t *ptr, CUipcMemHandle *h) {
	CUdeviceptr p = 0;
	CUresult r = cuIpcOpenMemHandle(&p, *h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	*ptr = (uintptr_t)p;
	return r;
}

static CUresult ipcClose(uintptr_t ptr) { return cuIpcCloseMemHandle((CUdeviceptr)ptr); }

// copyRecord queues a device-to-host copy on s and an event after it, with
// ctx made current on the calling thread (any thread: the copy path does
// not go through the context's goroutine).
static CUresult copyRecord(CUcontext ctx, void *dst, uintptr_t src, size_t n, CUstream s, CUevent *ev) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	// Blocking sync: a cuEventSynchronize on the event sleeps until it
	// completes instead of spinning on a core (the context's scheduling
	// flag does not apply to events); cuEventQuery is unaffected.
	r = cuEventCreate(ev, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS) return r;
	if (n > 0) {
		r = cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, n, s);
		if (r != CUDA_SUCCESS) {
			cuEventDestroy(*ev);
			return r;
		}
	}
	r = cuEventRecord(*ev, s);
	if (r != CUDA_SUCCESS) cuEventDestroy(*ev);
	return r;
}

// waitEvent waits for ev: it polls (cuEventQuery) for up to spin_ns
// nanoseconds, then sleeps in cuEventSynchronize (at once with spin_ns 0
// if the first poll finds the work pending). A poll that fails still
// waits for the work, and its error is the result.
static CUresult waitEvent(CUevent ev, long long spin_ns) {
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		CUresult r = cuEventQuery(ev);
		if (r == CUDA_SUCCESS) return r;
		if (r != CUDA_ERROR_NOT_READY) {
			cuEventSynchronize(ev);
			return r;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((long long)(t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) >= spin_ns) {
			return cuEventSynchronize(ev);
		}
	}
}

// eventFinish waits for the event (waitEvent, polling for up to spin_ns)
// and destroys it.
static CUresult eventFinish(CUcontext ctx, CUevent ev, long long spin_ns) {
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	r = waitEvent(ev, spin_ns);
	CUresult d = cuEventDestroy(ev);
	return r != CUDA_SUCCESS ? r : d;
}

// readerCreate makes a host reader's stream (not synchronized with the
// legacy default stream) and its event (a waiter sleeps, no timing).
static CUresult readerCreate(CUstream *s, CUevent *ev) {
	CUresult r = cuStreamCreate(s, CU_STREAM_NON_BLOCKING);
	if (r != CUDA_SUCCESS) return r;
	r = cuEventCreate(ev, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS) cuStreamDestroy(*s);
	return r;
}

static CUresult readerDestroy(CUstream s, CUevent ev) {
	CUresult r = cuEventDestroy(ev);
	CUresult d = cuStreamDestroy(s);
	return r != CUDA_SUCCESS ? r : d;
}

// readRound queues count device-to-host copies (n[i] bytes at src[i] into
// the pinned dst[i]) on s and ev after them, with ctx made current on the
// calling thread, and waits for ev (waitEvent: polls for up to spin_ns,
// then the thread sleeps until the copies have landed). A copy that
// cannot be queued ends the queueing, but those queued before it are
// still waited for. *failed is set to the failing step: 0 none, 1 a copy,
// 2 the event.
static CUresult readRound(CUcontext ctx, CUstream s, CUevent ev, const uintptr_t *dst, const uintptr_t *src, const size_t *n, int count, long long spin_ns, int *failed) {
	*failed = 0;
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) return r;
	for (int i = 0; i < count && r == CUDA_SUCCESS; i++) {
		r = cuMemcpyDtoHAsync((void *)dst[i], (CUdeviceptr)src[i], n[i], s);
	}
	if (r != CUDA_SUCCESS) *failed = 1;
	CUresult w = cuEventRecord(ev, s);
	if (w == CUDA_SUCCESS) {
		w = waitEvent(ev, spin_ns);
	} else {
		CUresult ss = cuStreamSynchronize(s);
		(void)ss;
	}
	if (r == CUDA_SUCCESS && w != CUDA_SUCCESS) {
		*failed = 2;
		r = w;
	}
	return r;
}

static CUresult setCurrent(CUcontext ctx) { return cuCtxSetCurrent(ctx); }

static CUresult currentCtx(CUcontext *ctx) { return cuCtxGetCurrent(ctx); }

static CUresult copyDtoHAsync(void *dst, uintptr_t src, size_t n, CUstream s) {
	return cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, n, s);
}

static const char *errName(CUresult r) {
	const char *s = 0;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == 0) return "CUDA_ERROR_UNKNOWN";
	return s;
}
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// cudaError is a CUresult other than CUDA_SUCCESS.
type cudaError struct {
	op   string
	code int
	name string
}

func (e *cudaError) Error() string { return fmt.Sprintf("gpu: %s: %s (%d)", e.op, e.name, e.code) }

func check(op string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return &cudaError{op: op, code: int(r), name: C.GoString(C.errName(r))}
}

// cuFunc is f's driver handle.
func cuFunc(f cu.Function) C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(&f)) }

// funcSetAttribute sets attribute a of kernel f to v.
func funcSetAttribute(f cu.Function, a C.CUfunction_attribute, v int) error {
	return check("cuFuncSetAttribute", C.cuFuncSetAttribute(cuFunc(f), a, C.int(v)))
}

// funcAttribute is attribute a of kernel f.
func funcAttribute(f cu.Function, a C.CUfunction_attribute) (int, error) {
	var v C.int
	err := check("cuFuncGetAttribute", C.cuFuncGetAttribute(&v, a, cuFunc(f)))
	return int(v), err
}

// residentBlocks is how many blocks of threads threads (and smem bytes of
// dynamic shared memory) of kernel f an SM holds at once, by the
// occupancy calculator (registers, shared memory and its carveout).
func residentBlocks(f cu.Function, threads, smem int) (int, error) {
	var n C.int
	err := check("cuOccupancyMaxActiveBlocksPerMultiprocessor", C.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, cuFunc(f), C.int(threads), C.size_t(smem)))
	return int(n), err
}

func hostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := check("cuMemHostAlloc", C.hostAlloc(&p, C.size_t(n))); err != nil {
		return nil, err
	}
	return p, nil
}

func hostFree(p unsafe.Pointer) error { return check("cuMemFreeHost", C.cuMemFreeHost(p)) }

func ipcGet(ptr uintptr) (IPCHandle, error) {
	var h C.CUipcMemHandle
	if err := check("cuIpcGetMemHandle", C.ipcGet(&h, C.uintptr_t(ptr))); err != nil {
		return IPCHandle{}, err
	}
	var out IPCHandle
	copy(out[:], C.GoBytes(unsafe.Pointer(&h), C.int(unsafe.Sizeof(h))))
	return out, nil
}

func ipcOpen(h IPCHandle) (uintptr, error) {
	var ch C.CUipcMemHandle
	C.memcpy(unsafe.Pointer(&ch), unsafe.Pointer(&h[0]), C.size_t(len(h)))
	var ptr C.uintptr_t
	if err := check("cuIpcOpenMemHandle", C.ipcOpen(&ptr, &ch)); err != nil {
		return 0, err
	}
	return uintptr(ptr), nil
}

func ipcClose(ptr uintptr) error { return check("cuIpcCloseMemHandle", C.ipcClose(C.uintptr_t(ptr))) }

// copyAsync queues a device-to-host copy into pinned memory on stream s.
func copyAsync(dst unsafe.Pointer, src uintptr, n int64, s C.CUstream) error {
	return check("cuMemcpyDtoHAsync", C.copyDtoHAsync(dst, C.uintptr_t(src), C.size_t(n), s))
}

// copyEvent queues a device-to-host copy into pinned memory on stream s of
// context ctx, followed by an event, from the calling thread.
func copyEvent(ctx C.CUcontext, dst unsafe.Pointer, src uintptr, n int64, s C.CUstream) (C.CUevent, error) {
	var ev C.CUevent
	if err := check("cuMemcpyDtoHAsync", C.copyRecord(ctx, dst, C.uintptr_t(src), C.size_t(n), s, &ev)); err != nil {
		return nil, err
	}
	return ev, nil
}

// eventFinish waits for ev, polling for up to spin before it sleeps in
// the driver, and destroys it.
func eventFinish(ctx C.CUcontext, ev C.CUevent, spin time.Duration) error {
	return check("cuEventSynchronize", C.eventFinish(ctx, ev, C.longlong(spin)))
}

// setCurrent makes ctx current on the calling thread (lock it first).
func setCurrent(ctx C.CUcontext) error { return check("cuCtxSetCurrent", C.setCurrent(ctx)) }

// currentContext is the context current on the calling thread.
func currentContext() (C.CUcontext, error) {
	var c C.CUcontext
	if err := check("cuCtxGetCurrent", C.currentCtx(&c)); err != nil {
		return nil, err
	}
	return c, nil
}

// notifyDone queues a host function on s that closes done once every
// earlier operation of s has completed.
func notifyDone(s C.CUstream, done chan struct{}) error {
	h := cgo.NewHandle(done)
	if err := check("cuLaunchHostFunc", C.launchDone(s, C.uintptr_t(h))); err != nil {
		h.Delete()
		return err
	}
	return nil
}

// readerCreate makes a host reader's stream and event; call it with the
// context current.
func readerCreate() (C.CUstream, C.CUevent, error) {
	var s C.CUstream
	var ev C.CUevent
	if err := check("cuStreamCreate", C.readerCreate(&s, &ev)); err != nil {
		return nil, nil, err
	}
	return s, ev, nil
}

// readerDestroy destroys what readerCreate made; call it with the context
// current.
func readerDestroy(s C.CUstream, ev C.CUevent) error {
	return check("cuStreamDestroy", C.readerDestroy(s, ev))
}

// readRound makes the copies of n[i] bytes at device address src[i] into
// pinned host memory at dst[i] on stream s of context ctx, from the
// calling thread, and returns once they have landed, polling for them for
// up to spin before it sleeps.
func readRound(ctx C.CUcontext, s C.CUstream, ev C.CUevent, dst, src []uintptr, n []C.size_t, spin time.Duration) error {
	if len(n) == 0 {
		return nil
	}
	var failed C.int
	r := C.readRound(ctx, s, ev, (*C.uintptr_t)(unsafe.Pointer(&dst[0])), (*C.uintptr_t)(unsafe.Pointer(&src[0])), &n[0], C.int(len(n)), C.longlong(spin), &failed)
	op := "cuCtxSetCurrent"
	switch failed {
	case 1:
		op = "cuMemcpyDtoHAsync"
	case 2:
		op = "cuEventSynchronize"
	}
	return check(op, r)
}
