package server

import (
	"math/bits"
	"sync"

	"golang.org/x/sys/unix"
)

// Frame payload buffers are recycled through size-classed pools (powers of
// two from 64 KiB), so a stream of large inline batches does not allocate,
// zero and fault in fresh memory for every frame. A buffer returns to its
// pool only once nothing refers to it: for an inline batch, when the writer
// lets go of the batch; for any other frame, when it has been handled.
const (
	minFrameShift = 16
	maxFrameShift = 30
)

var framePools [maxFrameShift - minFrameShift + 1]sync.Pool

// getFrame returns a buffer of length n.
func getFrame(n int) []byte {
	c := frameClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := framePools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(minFrameShift+c))
}

// putFrame recycles a buffer that getFrame returned.
func putFrame(b []byte) {
	c := frameClass(cap(b))
	if c < 0 || cap(b) != 1<<(minFrameShift+c) {
		return
	}
	b = b[:0]
	framePools[c].Put(&b)
}

// frameClass returns the pool of buffers of at least n bytes, or -1 for
// sizes outside the pools.
func frameClass(n int) int {
	if n <= 1<<minFrameShift {
		if n < 1<<(minFrameShift-1) {
			return -1 // small frames come from the reader's own buffer or a plain allocation
		}
		return 0
	}
	c := bits.Len(uint(n-1)) - minFrameShift
	if c >= len(framePools) {
		return -1
	}
	return c
}

// held is what one request frame brought that the daemon must give back:
// the descriptor passed with it (SCM_RIGHTS) and, for an inline Batch, the
// pooled buffer its payload lies in. A handler takes what it hands on
// (TakeFD, TakeInline: it is the ingest.Held of a Batch); release gives
// back the rest, once, on every path.
type held struct {
	fd     int    // -1: none, or taken
	inline []byte // nil: none, or taken
}

// TakeFD hands the descriptor to the caller, who closes it; -1 if none.
func (h *held) TakeFD() int {
	fd := h.fd
	h.fd = -1
	return fd
}

// TakeInline hands the inline frame to the caller: the function that
// recycles it, to call once nothing reads the payload.
func (h *held) TakeInline() (release func()) {
	frame := h.inline
	h.inline = nil
	if frame == nil {
		return func() {}
	}
	return func() { putFrame(frame) }
}

// release closes a descriptor nobody took. An inline frame nobody took is
// left to the collector rather than recycled: a writer that refused the
// batch may not say whether it still reads it.
func (h *held) release() {
	if h.fd >= 0 {
		unix.Close(h.fd)
		h.fd = -1
	}
	h.inline = nil
}
