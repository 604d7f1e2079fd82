package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"

	"github.com/pierrec/lz4/v4"

	"github.com/shuffled/shuffled/internal/xxh32"
)

// lz4-java LZ4BlockOutputStream framing; see doc.go.
const (
	lz4HeaderLen    = 21 // magic, token, compressed length, original length, checksum
	lz4MethodRaw    = 0x10
	lz4MethodLZ4    = 0x20
	lz4LevelBase    = 10
	lz4Seed         = 0x9747b28c
	lz4ChecksumMask = 0x0FFFFFFF
	// lz4MaxExpansion bounds how many bytes an LZ4 block decodes to per
	// byte: a match costs at least 3 bytes plus one per 255 of length.
	lz4MaxExpansion = 255
)

var lz4Magic = []byte("LZ4Block")

// lz4Level returns the level bits of the token for a block size:
// max(0, ceil(log2(blockSize)) - 10), as lz4-java computes them.
func lz4Level(blockSize int) byte {
	return byte(max(0, bits.Len(uint(blockSize-1))-lz4LevelBase))
}

func lz4MaxEncodedLen(n, blockSize int) int {
	blocks := (n + blockSize - 1) / blockSize
	return n + (blocks+1)*lz4HeaderLen
}

// lz4Encoder writes lz4-java block streams. Its block compressor
// (lz4block.go) makes the same blocks as the reference LZ4_compress_default
// that lz4-java's native compressor calls, so a stream is the bytes Spark
// writes for the same input. The compressor's hash tables live in the
// encoder, so steady-state encoding does not allocate.
type lz4Encoder struct {
	o     options
	level byte
	c     lz4Compressor
	open  bool
	out   []byte
	buf   []byte // input of the stream in progress, less than one block
	// scratch takes a block when the output has no room for the
	// compressor's bound.
	scratch []byte
}

func newLZ4Encoder(o options) *lz4Encoder {
	return &lz4Encoder{o: o, level: lz4Level(o.blockSize)}
}

func (e *lz4Encoder) Kind() Kind      { return LZ4 }
func (e *lz4Encoder) config() options { return e.o }

func (e *lz4Encoder) Encode(dst, src []byte) []byte {
	for len(src) > 0 {
		n := min(len(src), e.o.blockSize)
		dst = e.appendBlock(dst, src[:n])
		src = src[n:]
	}
	return e.appendEndMark(dst)
}

func (e *lz4Encoder) Reset(dst []byte) {
	e.open = true
	e.out = dst
	e.buf = e.buf[:0]
}

func (e *lz4Encoder) Write(p []byte) (int, error) {
	if !e.open {
		e.Reset(nil)
	}
	e.out = writeBlocks(e.out, &e.buf, p, e.o.blockSize, e.appendBlock)
	return len(p), nil
}

func (e *lz4Encoder) Finish() []byte {
	if !e.open {
		e.Reset(nil)
	}
	if len(e.buf) > 0 {
		e.out = e.appendBlock(e.out, e.buf)
	}
	out := e.appendEndMark(e.out)
	e.release()
	return out
}

func (e *lz4Encoder) release() {
	e.open = false
	e.out = nil
	e.buf = e.buf[:0]
}

// appendBlock appends one block holding src (1..blockSize bytes), stored
// raw when compression does not make it smaller, as LZ4BlockOutputStream
// decides. The compressor writes into dst when dst has room for its bound,
// else into the encoder's scratch buffer, and the block is copied from
// there.
func (e *lz4Encoder) appendBlock(dst, src []byte) []byte {
	start := len(dst)
	bound := lz4Bound(len(src))
	var payload []byte
	if cap(dst)-start-lz4HeaderLen >= bound {
		payload = dst[start+lz4HeaderLen : start+lz4HeaderLen+bound]
	} else {
		if len(e.scratch) < bound {
			e.scratch = make([]byte, lz4Bound(e.o.blockSize))
		}
		payload = e.scratch
	}
	// liblz4's LZ4_compress_default in a clib build where UseCLZ4 switched
	// it on (the same bytes); in the default build cLZ4Block is inlined away.
	n, ok := cLZ4Block(payload, src)
	if !ok {
		n = e.c.compress(payload, src)
	}
	method := byte(lz4MethodLZ4)
	if n == 0 || n >= len(src) {
		method = lz4MethodRaw
		payload, n = src, len(src)
	}
	dst = grow(dst, lz4HeaderLen+n)
	if &payload[0] != &dst[start+lz4HeaderLen] {
		copy(dst[start+lz4HeaderLen:], payload[:n])
	}
	h := dst[start:]
	copy(h, lz4Magic)
	h[8] = method | e.level
	binary.LittleEndian.PutUint32(h[9:], uint32(n))
	binary.LittleEndian.PutUint32(h[13:], uint32(len(src)))
	binary.LittleEndian.PutUint32(h[17:], LZ4Checksum(src))
	return dst
}

// appendEndMark appends the empty raw block that ends a stream.
func (e *lz4Encoder) appendEndMark(dst []byte) []byte {
	start := len(dst)
	dst = grow(dst, lz4HeaderLen)
	h := dst[start:]
	copy(h, lz4Magic)
	h[8] = lz4MethodRaw | e.level
	clear(h[9:])
	return dst
}

// lz4Block is a parsed block header.
type lz4Block struct {
	method  byte
	compLen int
	origLen int
	check   uint32
}

func (b lz4Block) endMark() bool { return b.origLen == 0 }

// parseLZ4Header checks a block header as lz4-java's LZ4BlockInputStream
// does; off is its offset in the compressed input.
func parseLZ4Header(h []byte, off int64) (lz4Block, error) {
	if !bytes.Equal(h[:8], lz4Magic) {
		return lz4Block{}, corruptf("lz4 magic %q at offset %d, want %q", h[:8], off, lz4Magic)
	}
	token := h[8]
	method := token & 0xF0
	if method != lz4MethodRaw && method != lz4MethodLZ4 {
		return lz4Block{}, corruptf("lz4 token 0x%02x at offset %d: method 0x%02x, want 0x10 or 0x20", token, off+8, method)
	}
	compLen := int32(binary.LittleEndian.Uint32(h[9:]))
	origLen := int32(binary.LittleEndian.Uint32(h[13:]))
	check := binary.LittleEndian.Uint32(h[17:])
	limit := int32(1) << (lz4LevelBase + token&0x0F)
	switch {
	case origLen < 0 || origLen > limit:
		return lz4Block{}, corruptf("lz4 original length %d at offset %d out of range [0, %d] for token 0x%02x", origLen, off+13, limit, token)
	case compLen < 0:
		return lz4Block{}, corruptf("lz4 compressed length %d at offset %d is negative", compLen, off+9)
	case (origLen == 0) != (compLen == 0):
		return lz4Block{}, corruptf("lz4 compressed length %d at offset %d with original length %d", compLen, off+9, origLen)
	case method == lz4MethodRaw && compLen != origLen:
		return lz4Block{}, corruptf("lz4 raw block at offset %d: compressed length %d, original length %d", off, compLen, origLen)
	case method == lz4MethodLZ4 && compLen >= origLen:
		return lz4Block{}, corruptf("lz4 compressed block at offset %d: compressed length %d not below original length %d", off, compLen, origLen)
	case method == lz4MethodLZ4 && int64(origLen) > lz4MaxExpansion*int64(compLen):
		return lz4Block{}, corruptf("lz4 compressed block at offset %d: original length %d more than %d times compressed length %d", off, origLen, lz4MaxExpansion, compLen)
	case origLen == 0 && check != 0:
		return lz4Block{}, corruptf("lz4 end mark at offset %d: checksum 0x%08x, want 0", off, check)
	}
	return lz4Block{method: method, compLen: int(compLen), origLen: int(origLen), check: check}, nil
}

// decodeLZ4Block decodes payload into dst, which has the block's original
// length, and checks the checksum; off is the block's offset. A raw payload
// may already be dst.
func decodeLZ4Block(dst, payload []byte, b lz4Block, off int64) error {
	switch {
	case b.method == lz4MethodLZ4:
		n, err := lz4.UncompressBlock(payload, dst)
		if err != nil {
			return corruptf("lz4 block at offset %d does not decode: %v", off, err)
		}
		if n != len(dst) {
			return corruptf("lz4 block at offset %d decodes to %d bytes, header says %d", off, n, len(dst))
		}
	case &dst[0] != &payload[0]:
		copy(dst, payload)
	}
	if sum := LZ4Checksum(dst); sum != b.check {
		return corruptf("lz4 block at offset %d: checksum 0x%08x, header says 0x%08x", off, sum, b.check)
	}
	return nil
}

func decodeLZ4(dst, src []byte) ([]byte, error) {
	off := 0
	inStream := false
	for off < len(src) {
		if len(src)-off < lz4HeaderLen {
			return dst, truncatedf("lz4 block header at offset %d: %d of %d bytes", off, len(src)-off, lz4HeaderLen)
		}
		b, err := parseLZ4Header(src[off:off+lz4HeaderLen], int64(off))
		if err != nil {
			return dst, err
		}
		if b.endMark() {
			inStream = false
			off += lz4HeaderLen
			continue
		}
		inStream = true
		payload := src[off+lz4HeaderLen:]
		if len(payload) < b.compLen {
			return dst, truncatedf("lz4 block at offset %d: %d of %d payload bytes", off, len(payload), b.compLen)
		}
		start := len(dst)
		dst = grow(dst, b.origLen)
		if err := decodeLZ4Block(dst[start:], payload[:b.compLen], b, int64(off)); err != nil {
			return dst[:start], err
		}
		off += lz4HeaderLen + b.compLen
	}
	if inStream {
		return dst, truncatedf("lz4 stream ends at offset %d without an end mark", off)
	}
	return dst, nil
}

// lz4Reader decodes concatenated lz4 block streams one block at a time.
type lz4Reader struct {
	r        io.Reader
	off      int64 // offset in the compressed input of the next header
	inStream bool
	hdr      [lz4HeaderLen]byte
	comp     []byte // compressed payload of the current block
	buf      []byte // decoded current block
	pos      int    // bytes of buf already read
	err      error
}

func (r *lz4Reader) Read(p []byte) (int, error) {
	for r.pos == len(r.buf) {
		if r.err != nil {
			return 0, r.err
		}
		r.err = r.next()
	}
	n := copy(p, r.buf[r.pos:])
	r.pos += n
	return n, nil
}

// next reads blocks until one holds data, the input ends, or an error.
func (r *lz4Reader) next() error {
	r.buf, r.pos = r.buf[:0], 0
	for {
		n, err := io.ReadFull(r.r, r.hdr[:])
		switch {
		case err == io.EOF:
			if r.inStream {
				return truncatedf("lz4 stream ends at offset %d without an end mark", r.off)
			}
			return io.EOF
		case errors.Is(err, io.ErrUnexpectedEOF):
			return truncatedf("lz4 block header at offset %d: %d of %d bytes", r.off, n, lz4HeaderLen)
		case err != nil:
			return err
		}
		b, err := parseLZ4Header(r.hdr[:], r.off)
		if err != nil {
			return err
		}
		if b.endMark() {
			r.inStream = false
			r.off += lz4HeaderLen
			continue
		}
		r.inStream = true
		// A raw payload is read in place; a compressed one is read whole
		// before the decoded block is allocated.
		var payload []byte
		if b.method == lz4MethodRaw {
			r.buf, err = readPayload(r.r, r.buf, b.compLen)
			payload = r.buf
		} else {
			r.comp, err = readPayload(r.r, r.comp, b.compLen)
			payload = r.comp
		}
		if err != nil {
			r.buf = r.buf[:0]
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return truncatedf("lz4 block at offset %d: %d of %d payload bytes", r.off, len(payload), b.compLen)
			}
			return err
		}
		if b.method == lz4MethodLZ4 {
			if cap(r.buf) < b.origLen {
				r.buf = make([]byte, b.origLen)
			}
			r.buf = r.buf[:b.origLen]
		}
		if err := decodeLZ4Block(r.buf, payload, b, r.off); err != nil {
			r.buf = r.buf[:0]
			return err
		}
		r.off += int64(lz4HeaderLen + b.compLen)
		return nil
	}
}

func (r *lz4Reader) Close() error {
	r.comp, r.buf, r.pos = nil, nil, 0
	r.err = ErrClosed
	return nil
}

// LZ4Checksum is the checksum of an lz4 block in lz4-java's framing: the
// xxHash32 of the block's raw bytes with seed 0x9747b28c, masked with
// 0x0FFFFFFF.
func LZ4Checksum(raw []byte) uint32 { return xxh32.Sum(raw, lz4Seed) & lz4ChecksumMask }
