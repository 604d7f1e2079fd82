package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
)

// snappy-java SnappyOutputStream framing; see doc.go.
const (
	snappyHeaderLen  = 16
	snappyMagicLen   = 8
	snappyMagicHead  = 0x82534e41 // the first four magic bytes, read as a big-endian int
	snappyLenLen     = 4
	snappyMinVersion = 1
	// snappyMaxExpansion bounds how many bytes a snappy block decodes to
	// per byte: a copy of at most 64 bytes costs at least 3 bytes (64/3 <
	// 22).
	snappyMaxExpansion = 22
)

var (
	snappyMagic  = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
	snappyHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	// snappyMaxChunk bounds a declared chunk length: the largest block of
	// MaxBlockSize input bytes.
	snappyMaxChunk = s2.MaxEncodedLen(MaxBlockSize)
)

func snappyMaxEncodedLen(n, blockSize int) int {
	full, rest := n/blockSize, n%blockSize
	size := snappyHeaderLen + full*(snappyLenLen+s2.MaxEncodedLen(blockSize))
	if rest > 0 {
		size += snappyLenLen + s2.MaxEncodedLen(rest)
	}
	return size
}

// snappyEncoder writes snappy-java streams: the header, then one chunk per
// block of input. An empty stream is the header alone, as snappy-java
// writes it.
type snappyEncoder struct {
	o    options
	open bool
	out  []byte
	buf  []byte // input of the stream in progress, less than one block
}

func (e *snappyEncoder) Kind() Kind      { return Snappy }
func (e *snappyEncoder) config() options { return e.o }

func (e *snappyEncoder) Encode(dst, src []byte) []byte {
	dst = append(dst, snappyHeader...)
	for len(src) > 0 {
		n := min(len(src), e.o.blockSize)
		dst = appendSnappyChunk(dst, src[:n])
		src = src[n:]
	}
	return dst
}

func (e *snappyEncoder) Reset(dst []byte) {
	e.open = true
	e.out = append(dst, snappyHeader...)
	e.buf = e.buf[:0]
}

func (e *snappyEncoder) Write(p []byte) (int, error) {
	if !e.open {
		e.Reset(nil)
	}
	e.out = writeBlocks(e.out, &e.buf, p, e.o.blockSize, appendSnappyChunk)
	return len(p), nil
}

func (e *snappyEncoder) Finish() []byte {
	if !e.open {
		e.Reset(nil)
	}
	out := e.out
	if len(e.buf) > 0 {
		out = appendSnappyChunk(out, e.buf)
	}
	e.release()
	return out
}

func (e *snappyEncoder) release() {
	e.open = false
	e.out = nil
	e.buf = e.buf[:0]
}

// appendSnappyChunk appends the big-endian length and the snappy block of
// src.
func appendSnappyChunk(dst, src []byte) []byte {
	start := len(dst)
	max := s2.MaxEncodedLen(len(src))
	dst = grow(dst, snappyLenLen+max)
	// With room for max bytes, the block is encoded in place.
	block := s2.EncodeSnappy(dst[start+snappyLenLen:], src)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(block)))
	return dst[:start+snappyLenLen+len(block)]
}

// checkSnappyHeader checks a stream header as snappy-java does: the magic,
// and a version of at least 1; off is its offset in the compressed input.
func checkSnappyHeader(h []byte, off int64) error {
	if !bytes.Equal(h[:snappyMagicLen], snappyMagic) {
		return corruptf("snappy magic %q at offset %d, want %q", h[:snappyMagicLen], off, snappyMagic)
	}
	if v := int32(binary.BigEndian.Uint32(h[8:])); v < snappyMinVersion {
		return corruptf("snappy version %d at offset %d, want at least %d", v, off+8, snappyMinVersion)
	}
	return nil
}

// checkSnappyChunkLen checks a chunk length field; off is its offset.
func checkSnappyChunkLen(v uint32, off int64) (int, error) {
	n := int32(v)
	if n <= 0 || int(n) > snappyMaxChunk {
		return 0, corruptf("snappy chunk length %d at offset %d out of range [1, %d]", n, off, snappyMaxChunk)
	}
	return int(n), nil
}

// snappyDecodedLen returns the decoded length a chunk declares; off is the
// chunk's offset.
func snappyDecodedLen(chunk []byte, off int64) (int, error) {
	n, err := snappy.DecodedLen(chunk)
	if err != nil {
		return 0, corruptf("snappy chunk at offset %d: decoded length: %v", off, err)
	}
	if n > MaxBlockSize {
		return 0, corruptf("snappy chunk at offset %d: decoded length %d exceeds %d", off, n, MaxBlockSize)
	}
	if n > snappyMaxExpansion*len(chunk) {
		return 0, corruptf("snappy chunk at offset %d: decoded length %d more than %d times chunk length %d", off, n, snappyMaxExpansion, len(chunk))
	}
	return n, nil
}

// decodeSnappyChunk decodes chunk into dst, which has the declared decoded
// length. It uses the strict snappy block decoder: snappy-java rejects the
// s2 extensions that the lenient one accepts.
func decodeSnappyChunk(dst, chunk []byte, off int64) error {
	out, err := snappy.DecodeStrict(dst[:0:len(dst)], chunk)
	if err != nil {
		return corruptf("snappy chunk at offset %d does not decode: %v", off, err)
	}
	if len(out) != len(dst) {
		return corruptf("snappy chunk at offset %d decodes to %d bytes, want %d", off, len(out), len(dst))
	}
	return nil
}

func decodeSnappy(dst, src []byte) ([]byte, error) {
	off := 0
	for off < len(src) {
		// A stream starts with a header; a later one starts another stream.
		if len(src)-off < snappyHeaderLen {
			return dst, truncatedf("snappy header at offset %d: %d of %d bytes", off, len(src)-off, snappyHeaderLen)
		}
		if err := checkSnappyHeader(src[off:], int64(off)); err != nil {
			return dst, err
		}
		off += snappyHeaderLen
		for off < len(src) {
			if len(src)-off < snappyLenLen {
				return dst, truncatedf("snappy chunk length at offset %d: %d of %d bytes", off, len(src)-off, snappyLenLen)
			}
			v := binary.BigEndian.Uint32(src[off:])
			if v == snappyMagicHead {
				break
			}
			n, err := checkSnappyChunkLen(v, int64(off))
			if err != nil {
				return dst, err
			}
			chunk := src[off+snappyLenLen:]
			if len(chunk) < n {
				return dst, truncatedf("snappy chunk at offset %d: %d of %d bytes", off, len(chunk), n)
			}
			chunk = chunk[:n]
			dlen, err := snappyDecodedLen(chunk, int64(off))
			if err != nil {
				return dst, err
			}
			start := len(dst)
			dst = grow(dst, dlen)
			if err := decodeSnappyChunk(dst[start:], chunk, int64(off)); err != nil {
				return dst[:start], err
			}
			off += snappyLenLen + n
		}
	}
	return dst, nil
}

// snappyReader decodes concatenated snappy-java streams one chunk at a time.
type snappyReader struct {
	r       io.Reader
	off     int64 // offset in the compressed input of the next field
	started bool  // a header has been read
	hdr     [snappyHeaderLen]byte
	comp    []byte // current chunk
	buf     []byte // decoded current chunk
	pos     int    // bytes of buf already read
	err     error
}

func (r *snappyReader) Read(p []byte) (int, error) {
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

// readFull reads len(b) bytes; a short read is reported as truncation of
// what, and a clean end before any byte as io.EOF.
func (r *snappyReader) readFull(b []byte, what string) error {
	n, err := io.ReadFull(r.r, b)
	switch {
	case err == io.EOF:
		return io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return truncatedf("snappy %s at offset %d: %d of %d bytes", what, r.off, n, len(b))
	}
	return err
}

// next reads chunks until one holds data, the input ends, or an error.
func (r *snappyReader) next() error {
	r.buf, r.pos = r.buf[:0], 0
	for {
		if !r.started {
			if err := r.readFull(r.hdr[:], "header"); err != nil {
				return err
			}
			if err := checkSnappyHeader(r.hdr[:], r.off); err != nil {
				return err
			}
			r.started = true
			r.off += snappyHeaderLen
		}
		if err := r.readFull(r.hdr[:snappyLenLen], "chunk length"); err != nil {
			return err
		}
		v := binary.BigEndian.Uint32(r.hdr[:])
		if v == snappyMagicHead {
			if err := r.readFull(r.hdr[snappyLenLen:], "header"); err != nil {
				if err == io.EOF {
					err = truncatedf("snappy header at offset %d: %d of %d bytes", r.off, snappyLenLen, snappyHeaderLen)
				}
				return err
			}
			if err := checkSnappyHeader(r.hdr[:], r.off); err != nil {
				return err
			}
			r.off += snappyHeaderLen
			continue
		}
		n, err := checkSnappyChunkLen(v, r.off)
		if err != nil {
			return err
		}
		if r.comp, err = readPayload(r.r, r.comp, n); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return truncatedf("snappy chunk at offset %d: %d of %d bytes", r.off, len(r.comp), n)
			}
			return err
		}
		dlen, err := snappyDecodedLen(r.comp, r.off)
		if err != nil {
			return err
		}
		if cap(r.buf) < dlen {
			r.buf = make([]byte, dlen)
		}
		r.buf = r.buf[:dlen]
		if err := decodeSnappyChunk(r.buf, r.comp, r.off); err != nil {
			r.buf = r.buf[:0]
			return err
		}
		r.off += int64(snappyLenLen + n)
		if dlen > 0 {
			return nil
		}
	}
}

func (r *snappyReader) Close() error {
	r.comp, r.buf, r.pos = nil, nil, 0
	r.err = ErrClosed
	return nil
}
