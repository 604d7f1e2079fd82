package codec

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/shuffled/shuffled/errdefs"
)

// Kind names a compression codec, as Spark's spark.io.compression.codec does.
type Kind uint8

const (
	// None stores bytes as they are.
	None Kind = iota
	// LZ4 is lz4-java's LZ4BlockOutputStream framing (Spark's default codec).
	LZ4
	// Zstd is standard zstd frames, as zstd-jni reads them.
	Zstd
	// Snappy is snappy-java's SnappyOutputStream framing.
	Snappy
)

// Limits and defaults of the options.
const (
	// DefaultBlockSize is Spark's spark.io.compression.{lz4,snappy}.blockSize.
	DefaultBlockSize = 32 << 10
	// MinLZ4BlockSize and MaxBlockSize bound an lz4 block size, as lz4-java
	// does. MaxBlockSize also bounds a snappy block size, and decoders refuse
	// blocks that declare more.
	MinLZ4BlockSize = 64
	MaxBlockSize    = 32 << 20
	// DefaultLevel is Spark's spark.io.compression.zstd.level.
	DefaultLevel = 1
	// MinLevel and MaxLevel bound a zstd level.
	MinLevel = 1
	MaxLevel = 22
)

var (
	// ErrUnknown reports a codec name or Kind that is not one of ours.
	ErrUnknown = errdefs.New(errdefs.ErrInternal, "codec: unknown codec")
	// ErrInvalidOption reports an option value out of range.
	ErrInvalidOption = errdefs.New(errdefs.ErrInternal, "codec: invalid option")
	// ErrCorrupt reports a malformed stream: bad magic, a length out of
	// range, a checksum mismatch, a block that does not decode, or a stream
	// cut short (such errors also match io.ErrUnexpectedEOF).
	ErrCorrupt = errdefs.New(errdefs.ErrDataLoss, "codec: corrupt stream")
	// ErrClosed reports a Read on a closed reader.
	ErrClosed = errdefs.New(errdefs.ErrFailedPrecondition, "codec: reader closed")
)

// Parse returns the codec named s ("none", "lz4", "zstd" or "snappy"),
// case-insensitively.
func Parse(s string) (Kind, error) {
	switch strings.ToLower(s) {
	case "none":
		return None, nil
	case "lz4":
		return LZ4, nil
	case "zstd":
		return Zstd, nil
	case "snappy":
		return Snappy, nil
	}
	return None, fmt.Errorf("%w %q (want none, lz4, zstd or snappy)", ErrUnknown, s)
}

// String returns the name that Parse accepts.
func (k Kind) String() string {
	switch k {
	case None:
		return "none"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	case Snappy:
		return "snappy"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k <= Snappy }

// options holds the settings of one kind of encoder. It is comparable, so a
// Pool can tell its own encoders from others.
type options struct {
	kind      Kind
	blockSize int
	level     int
}

// Option sets an encoder setting; it fails on a value out of range.
type Option func(*options) error

// WithBlockSize sets the uncompressed size of an lz4 or snappy block
// (default DefaultBlockSize): MinLZ4BlockSize..MaxBlockSize for lz4, as
// lz4-java checks, and 1..MaxBlockSize for snappy. Other kinds ignore it.
func WithBlockSize(n int) Option {
	return func(o *options) error {
		switch o.kind {
		case LZ4:
			if n < MinLZ4BlockSize || n > MaxBlockSize {
				return fmt.Errorf("%w: lz4 block size %d out of range [%d, %d]", ErrInvalidOption, n, MinLZ4BlockSize, MaxBlockSize)
			}
		case Snappy:
			if n < 1 || n > MaxBlockSize {
				return fmt.Errorf("%w: snappy block size %d out of range [1, %d]", ErrInvalidOption, n, MaxBlockSize)
			}
		}
		o.blockSize = n
		return nil
	}
}

// WithLevel sets the zstd compression level, MinLevel..MaxLevel (default
// DefaultLevel); it maps onto the encoder's speed settings as zstd's
// levels do: 1-2 fastest, 3-5 default, 6-9 better, 10-22 best. Other kinds
// ignore it.
func WithLevel(level int) Option {
	return func(o *options) error {
		if o.kind == Zstd && (level < MinLevel || level > MaxLevel) {
			return fmt.Errorf("%w: zstd level %d out of range [%d, %d]", ErrInvalidOption, level, MinLevel, MaxLevel)
		}
		o.level = level
		return nil
	}
}

func newOptions(k Kind, opts []Option) (options, error) {
	if !k.valid() {
		return options{}, fmt.Errorf("%w: %v", ErrUnknown, k)
	}
	o := options{kind: k, blockSize: DefaultBlockSize, level: DefaultLevel}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return options{}, err
		}
	}
	return o, nil
}

// Encoder produces complete codec streams. It is not safe for concurrent
// use; it is reusable, and holds no reference to a caller's buffer once
// Finish returns.
type Encoder interface {
	// Encode appends one complete codec stream holding src to dst and
	// returns the extended slice. It leaves a stream in progress alone.
	Encode(dst, src []byte) []byte
	// Reset starts a stream that appends to dst.
	Reset(dst []byte)
	// Write adds p to the stream in progress (one started by Reset, or else
	// one that appends to a nil slice). It never fails.
	Write(p []byte) (int, error)
	// Finish ends the stream in progress and returns the extended buffer.
	Finish() []byte
	// Kind returns the codec the encoder writes.
	Kind() Kind
}

// encoder is what every Encoder of this package also is.
type encoder interface {
	Encoder
	config() options
	// release drops the stream in progress and any reference to a caller's
	// buffer.
	release()
}

var (
	_ encoder = (*noneEncoder)(nil)
	_ encoder = (*lz4Encoder)(nil)
	_ encoder = (*zstdEncoder)(nil)
	_ encoder = (*snappyEncoder)(nil)
)

// NewEncoder returns an encoder for kind k.
func NewEncoder(k Kind, opts ...Option) (Encoder, error) {
	o, err := newOptions(k, opts)
	if err != nil {
		return nil, err
	}
	return newEncoder(o)
}

func newEncoder(o options) (encoder, error) {
	switch o.kind {
	case None:
		return &noneEncoder{o: o}, nil
	case LZ4:
		return newLZ4Encoder(o), nil
	case Zstd:
		return newZstdEncoder(o)
	case Snappy:
		return &snappyEncoder{o: o}, nil
	}
	return nil, fmt.Errorf("%w: %v", ErrUnknown, o.kind)
}

// MaxEncodedLen returns the largest stream an encoder of kind k with opts
// writes for n input bytes, whether through Encode or Write, so that a dst
// with that much spare capacity is never reallocated. It returns -1 for a
// negative n, an unknown kind or an invalid option.
func MaxEncodedLen(k Kind, n int, opts ...Option) int {
	o, err := newOptions(k, opts)
	if err != nil || n < 0 {
		return -1
	}
	return o.maxEncodedLen(n)
}

func (o options) maxEncodedLen(n int) int {
	switch o.kind {
	case None:
		return n
	case LZ4:
		return lz4MaxEncodedLen(n, o.blockSize)
	case Zstd:
		return zstdMaxEncodedLen(n)
	case Snappy:
		return snappyMaxEncodedLen(n, o.blockSize)
	}
	return -1
}

// Decode appends to dst the decoded bytes of every codec stream of kind k
// concatenated in src, and returns the extended slice. It checks every
// magic, length and checksum. On error the returned slice holds dst
// followed by a prefix, possibly empty, of the decoded bytes.
func Decode(k Kind, dst, src []byte) ([]byte, error) {
	switch k {
	case None:
		return append(dst, src...), nil
	case LZ4:
		return decodeLZ4(dst, src)
	case Zstd:
		return decodeZstd(dst, src)
	case Snappy:
		return decodeSnappy(dst, src)
	}
	return dst, fmt.Errorf("%w: %v", ErrUnknown, k)
}

// NewReader returns a reader of the decoded bytes of every codec stream of
// kind k concatenated in r. It checks what Decode checks; it holds at most
// one block of each side in memory (a zstd window for zstd). Close releases
// its buffers; it does not close r.
func NewReader(k Kind, r io.Reader) (io.ReadCloser, error) {
	switch k {
	case None:
		return &noneReader{r: r}, nil
	case LZ4:
		return &lz4Reader{r: r}, nil
	case Zstd:
		return newZstdReader(r)
	case Snappy:
		return &snappyReader{r: r}, nil
	}
	return nil, fmt.Errorf("%w: %v", ErrUnknown, k)
}

// corruptf returns an ErrCorrupt error; the message names the codec, the
// field, its value and the offset in the compressed input.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// truncatedf returns an error matching both ErrCorrupt and
// io.ErrUnexpectedEOF.
func truncatedf(format string, args ...any) error {
	args = append(append([]any{ErrCorrupt}, args...), io.ErrUnexpectedEOF)
	return fmt.Errorf("%w: "+format+": %w", args...)
}

// grow extends b by n bytes of unspecified content and returns the extended
// slice; it reallocates only when cap(b)-len(b) < n.
func grow(b []byte, n int) []byte {
	return slices.Grow(b, n)[:len(b)+n]
}

// readPayload reads n bytes from r into buf, reusing its capacity. It grows
// buf only as bytes arrive, so that a length declared by a hostile header
// costs memory only for bytes that really follow. If r ends first, it
// returns the bytes read and io.EOF (none) or io.ErrUnexpectedEOF.
func readPayload(r io.Reader, buf []byte, n int) ([]byte, error) {
	const firstChunk = 64 << 10
	buf = buf[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n-len(buf), max(len(buf), firstChunk)))
		}
		m, err := io.ReadFull(r, buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil {
			if err == io.EOF && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

// writeBlocks appends p to a block-framed stream being built (lz4-java and
// snappy-java frame fixed-size blocks): whole blocks of p go straight to
// emit, and the rest waits in *buf, of capacity size, for the next write
// or the end of the stream.
func writeBlocks(out []byte, buf *[]byte, p []byte, size int, emit func(dst, block []byte) []byte) []byte {
	for len(p) > 0 {
		if len(*buf) == 0 && len(p) >= size {
			out = emit(out, p[:size])
			p = p[size:]
			continue
		}
		if *buf == nil {
			*buf = make([]byte, 0, size)
		}
		k := min(size-len(*buf), len(p))
		*buf = append(*buf, p[:k]...)
		p = p[k:]
		if len(*buf) == size {
			out = emit(out, *buf)
			*buf = (*buf)[:0]
		}
	}
	return out
}
