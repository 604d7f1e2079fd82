//go:build clib

package codec

// The clib build tag links the system's liblz4 and libzstd (Debian:
// liblz4-dev, libzstd-dev): their compressors, the C that lz4-java and
// zstd-jni call, are the reference that the pure-Go ones are tested and
// measured against (BenchmarkLZ4Block, BenchmarkZstdRecord). In this build
// the zstd encoder writes libzstd's frames (ZSTD_compress2 at the stream's
// level, content size and checksum set, as the default build's frames); the
// lz4 encoder stays pure Go, which writes LZ4_compress_default's blocks at
// its speed, unless UseCLZ4 switches it to the C.

/*
#cgo LDFLAGS: -llz4 -lzstd
#include <lz4.h>
#include <zstd.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

func init() {
	newLibZstd = func(level int) (zstdFrameWriter, error) { return newCZstd(level) }
}

// useCLZ4 is UseCLZ4's switch.
var useCLZ4 atomic.Bool

// UseCLZ4 makes every lz4 encoder of the process compress its blocks with
// liblz4's LZ4_compress_default (on) or with the pure-Go block compressor
// (off, the default), from its next block on. Both write the same bytes, so
// streams do not change; it is for benchmarks that measure the pure-Go
// compressor against C in one program (writer's BenchmarkWrite, mode
// ceiling-c). Only in the clib build.
func UseCLZ4(on bool) { useCLZ4.Store(on) }

// cLZ4Block is LZ4_compress_default(src, dst) when UseCLZ4 switched it on:
// the block's length and true; else 0 and false. src must not be empty.
func cLZ4Block(dst, src []byte) (int, bool) {
	if !useCLZ4.Load() {
		return 0, false
	}
	return cLZ4Compress(src, dst), true
}

// cLZ4Compress is LZ4_compress_default(src, dst): the length of the LZ4
// block written into dst, or 0 when it does not fit. src must not be empty.
func cLZ4Compress(src, dst []byte) int {
	if len(dst) == 0 {
		return 0
	}
	return int(C.LZ4_compress_default(
		(*C.char)(unsafe.Pointer(&src[0])), (*C.char)(unsafe.Pointer(&dst[0])),
		C.int(len(src)), C.int(len(dst))))
}

// cZstd is a libzstd compression context at one level.
type cZstd struct {
	ctx   *C.ZSTD_CCtx
	level int
}

func newCZstd(level int) (*cZstd, error) {
	ctx := C.ZSTD_createCCtx()
	if ctx == nil {
		return nil, fmt.Errorf("codec: ZSTD_createCCtx failed")
	}
	z := &cZstd{ctx: ctx, level: level}
	// A pool may drop an encoder: its context goes with it.
	runtime.AddCleanup(z, func(ctx *C.ZSTD_CCtx) { C.ZSTD_freeCCtx(ctx) }, ctx)
	for _, p := range []struct {
		param C.ZSTD_cParameter
		value C.int
	}{
		{C.ZSTD_c_compressionLevel, C.int(level)},
		{C.ZSTD_c_checksumFlag, 1},
		{C.ZSTD_c_contentSizeFlag, 1},
	} {
		if r := C.ZSTD_CCtx_setParameter(ctx, p.param, p.value); C.ZSTD_isError(r) != 0 {
			return nil, fmt.Errorf("codec: ZSTD_CCtx_setParameter(%d, %d): %s", p.param, p.value, C.GoString(C.ZSTD_getErrorName(r)))
		}
	}
	return z, nil
}

// compress appends one zstd frame of src to dst. It writes into the room
// dst has when that is at least zstdMaxEncodedLen (which holds any frame),
// so that a buffer sized by MaxEncodedLen is not reallocated.
func (z *cZstd) compress(dst, src []byte) ([]byte, error) {
	start := len(dst)
	room := cap(dst) - start
	if room < zstdMaxEncodedLen(len(src)) {
		room = int(C.ZSTD_compressBound(C.size_t(len(src))))
	}
	dst = grow(dst, room)
	var in unsafe.Pointer
	if len(src) > 0 {
		in = unsafe.Pointer(&src[0])
	}
	r := C.ZSTD_compress2(z.ctx, unsafe.Pointer(&dst[start]), C.size_t(room), in, C.size_t(len(src)))
	if bound := int(C.ZSTD_compressBound(C.size_t(len(src)))); C.ZSTD_isError(r) != 0 && room < bound {
		dst = grow(dst[:start], bound) // not expected: our bound holds any frame
		room = bound
		r = C.ZSTD_compress2(z.ctx, unsafe.Pointer(&dst[start]), C.size_t(room), in, C.size_t(len(src)))
	}
	runtime.KeepAlive(z)
	if C.ZSTD_isError(r) != 0 {
		return dst[:start], fmt.Errorf("codec: ZSTD_compress2 of %d bytes into %d: %s", len(src), room, C.GoString(C.ZSTD_getErrorName(r)))
	}
	return dst[:start+int(r)], nil
}

// appendFrame is compress for the encoder, which has no error to return:
// ZSTD_compress2 fails only on a context that cannot be, or a level
// newCZstd refused.
func (z *cZstd) appendFrame(dst, src []byte) []byte {
	out, err := z.compress(dst, src)
	if err != nil {
		panic(err)
	}
	return out
}
