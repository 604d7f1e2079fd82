package codec

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

const (
	// zstdBlockSize is the largest block the encoder writes.
	zstdBlockSize = 128 << 10
	// zstdMaxWindow bounds the window a decoder accepts: zstd-jni writes at
	// most 8 MiB windows up to level 19, and so does our encoder.
	zstdMaxWindow = 32 << 20
)

// zstdMaxEncodedLen bounds a frame as the encoder writes it: magic, frame
// header with content size, and the content checksum, plus per block of
// input at most 8 bytes more than the input (a block of literals that do
// not compress: block header, literals header, sequence count).
func zstdMaxEncodedLen(n int) int {
	const header = 4 + 2 + 8 // magic, descriptor and window, content size
	const checksum = 4
	const perBlock = 8
	blocks := n/zstdBlockSize + 1
	return header + n + perBlock*blocks + checksum
}

// zstdFrameWriter appends whole zstd frames (content size and checksum
// set) to dst.
type zstdFrameWriter interface {
	appendFrame(dst, src []byte) []byte
}

// newLibZstd, set in a clib build (clib.go), returns libzstd's compressor
// at a level; nil in the default, pure-Go build.
var newLibZstd func(level int) (zstdFrameWriter, error)

// zstdEncoder writes one zstd frame per stream, with a content checksum and
// (for 256 bytes of content or more) the content size. A stream written with Write is buffered and encoded in
// Finish, so that it is the same frame that Encode writes. The frames are
// klauspost/compress's, or libzstd's in a clib build.
type zstdEncoder struct {
	o    options
	enc  *zstd.Encoder
	lib  zstdFrameWriter
	open bool
	out  []byte
	buf  []byte // input of the stream in progress
}

func newZstdEncoder(o options) (*zstdEncoder, error) {
	if newLibZstd != nil {
		lib, err := newLibZstd(o.level)
		if err != nil {
			return nil, err
		}
		return &zstdEncoder{o: o, lib: lib}, nil
	}
	enc, err := newGoZstd(o.level)
	if err != nil {
		return nil, err
	}
	return &zstdEncoder{o: o, enc: enc}, nil
}

// newGoZstd returns klauspost/compress's encoder at a zstd level, writing
// frames as the encoder does.
func newGoZstd(level int) (*zstd.Encoder, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderCRC(true),
		zstd.WithZeroFrames(true),
	)
	if err != nil {
		return nil, fmt.Errorf("codec: zstd encoder at level %d: %w", level, err)
	}
	return enc, nil
}

func (e *zstdEncoder) Kind() Kind      { return Zstd }
func (e *zstdEncoder) config() options { return e.o }

func (e *zstdEncoder) Encode(dst, src []byte) []byte {
	if e.lib != nil {
		return e.lib.appendFrame(dst, src)
	}
	if dst == nil {
		// EncodeAll sizes a nil dst by the input; start from the bound
		// instead, so that it never reallocates.
		dst = make([]byte, 0, zstdMaxEncodedLen(len(src)))
	}
	return e.enc.EncodeAll(src, dst)
}

func (e *zstdEncoder) Reset(dst []byte) {
	e.open = true
	e.out = dst
	e.buf = e.buf[:0]
}

func (e *zstdEncoder) Write(p []byte) (int, error) {
	if !e.open {
		e.Reset(nil)
	}
	e.buf = append(e.buf, p...)
	return len(p), nil
}

func (e *zstdEncoder) Finish() []byte {
	if !e.open {
		e.Reset(nil)
	}
	out := e.Encode(e.out, e.buf)
	e.release()
	return out
}

func (e *zstdEncoder) release() {
	e.open = false
	e.out = nil
	e.buf = e.buf[:0]
}

// zstdDecoderOptions bound what a hostile frame can make a decoder hold.
var zstdDecoderOptions = []zstd.DOption{
	zstd.WithDecoderConcurrency(1), // decode on the caller's goroutine
	zstd.WithDecoderLowmem(true),
	zstd.WithDecoderMaxWindow(zstdMaxWindow),
}

// zstdDecoders holds decoders for Decode; with concurrency 1 a decoder
// starts no goroutine, so one that the pool drops needs no Close.
var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstdDecoderOptions...)
	if err != nil {
		panic(fmt.Sprintf("codec: zstd decoder: %v", err)) // the options are constant
	}
	return d
}}

func decodeZstd(dst, src []byte) ([]byte, error) {
	d := zstdDecoders.Get().(*zstd.Decoder)
	defer zstdDecoders.Put(d)
	start := len(dst)
	out, err := d.DecodeAll(src, dst)
	if err != nil {
		return dst[:start], zstdError(fmt.Sprintf("zstd input of %d bytes", len(src)), err)
	}
	return out, nil
}

// zstdError labels an error of the zstd decoder in what as corruption.
func zstdError(what string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return truncatedf("%s ends inside a frame", what)
	}
	return corruptf("%s: %v", what, err)
}

// zstdReader streams concatenated zstd frames. Errors of the underlying
// reader pass through as they are; the decoder's own are ErrCorrupt.
type zstdReader struct {
	src    errRecorder
	d      *zstd.Decoder
	closed bool
}

func newZstdReader(r io.Reader) (*zstdReader, error) {
	zr := &zstdReader{src: errRecorder{r: r}}
	d, err := zstd.NewReader(&zr.src, zstdDecoderOptions...)
	if err != nil {
		return nil, fmt.Errorf("codec: zstd decoder: %w", err)
	}
	zr.d = d
	return zr, nil
}

func (r *zstdReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	n, err := r.d.Read(p)
	if err != nil && err != io.EOF && (r.src.err == nil || !errors.Is(err, r.src.err)) {
		err = zstdError("zstd stream", err)
	}
	return n, err
}

func (r *zstdReader) Close() error {
	if !r.closed {
		r.closed = true
		r.d.Close()
	}
	return nil
}

// errRecorder remembers the last error other than io.EOF of its reader.
type errRecorder struct {
	r   io.Reader
	err error
}

func (e *errRecorder) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}
