//go:build cuda

package gpu

// #include <stdint.h>
import "C"

import "runtime/cgo"

// shuffledStreamDone runs on a driver thread when a stream reaches the host
// function that notifyDone queued; it must not call CUDA.
//
//export shuffledStreamDone
func shuffledStreamDone(arg C.uintptr_t) {
	h := cgo.Handle(arg)
	close(h.Value().(chan struct{}))
	h.Delete()
}
