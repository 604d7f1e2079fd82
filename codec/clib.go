//go:build clib

package codec

// The clib build tag links the system's liblz4 and libzstd (Debian:
// liblz4-dev, libzstd-dev): their compressors, the C that lz4-java and
// zstd-jni call, are the reference that the pure-Go ones are tested and
// measured against (BenchmarkLZ4Block, BenchmarkZstdRecord).

/*
#cgo LDFLAGS: -llz4 -lzstd
#include <lz4.h>
#include <zstd.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

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
	for _, p := range []struct {
		param C.ZSTD_cParameter
		value C.int
	}{
		{C.ZSTD_c_compressionLevel, C.int(level)},
		{C.ZSTD_c_checksumFlag, 1},
		{C.ZSTD_c_contentSizeFlag, 1},
	} {
		if r := C.ZSTD_CCtx_setParameter(ctx, p.param, p.value); C.ZSTD_isError(r) != 0 {
			C.ZSTD_freeCCtx(ctx)
			return nil, fmt.Errorf("codec: ZSTD_CCtx_setParameter(%d, %d): %s", p.param, p.value, C.GoString(C.ZSTD_getErrorName(r)))
		}
	}
	return z, nil
}

// compress appends one zstd frame of src to dst, which must have room for
// ZSTD_compressBound(len(src)) more bytes.
func (z *cZstd) compress(dst, src []byte) ([]byte, error) {
	start := len(dst)
	bound := int(C.ZSTD_compressBound(C.size_t(len(src))))
	dst = grow(dst, bound)
	var in unsafe.Pointer
	if len(src) > 0 {
		in = unsafe.Pointer(&src[0])
	}
	r := C.ZSTD_compress2(z.ctx, unsafe.Pointer(&dst[start]), C.size_t(bound), in, C.size_t(len(src)))
	if C.ZSTD_isError(r) != 0 {
		return dst[:start], fmt.Errorf("codec: ZSTD_compress2 of %d bytes: %s", len(src), C.GoString(C.ZSTD_getErrorName(r)))
	}
	return dst[:start+int(r)], nil
}

func (z *cZstd) close() { C.ZSTD_freeCCtx(z.ctx) }
