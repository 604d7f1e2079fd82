// Package lz4ref is the Go reference of the GPU lz4 compressor of package
// gpu (kernels/lz4.cu): the same block compressor, bit for bit, and the
// same lz4-java LZ4BlockOutputStream framing, so that a machine without a
// GPU can test the format, and a device run can compare the kernels'
// output with it byte for byte.
//
// The block compressor is greedy and parse-ordered, so that one CUDA warp
// can run it 32 positions at a time with the same result as this loop:
//
//   - A hash table of 1<<HashLog 16-bit positions, all empty at the start of
//     every block; the hash of position i is the 4 bytes at i, read
//     little-endian, times 2654435761, shifted right by 32-HashLog.
//   - Positions are examined in order from 0. Examining position i inserts
//     it (table[hash] = i, after reading the previous entry, its candidate).
//     The candidate is a match when it is not empty and its 4 bytes equal
//     those at i; the match then extends forward while bytes are equal and
//     its end stays at most len-LastLiterals, and backward over the
//     literals before it (down to the end of the last match) while the
//     bytes before it equal those before the candidate, as LZ4's own
//     compressor does.
//   - After a match that ends at e, examination goes on at e (the
//     positions inside the match are not inserted); otherwise at i+1.
//   - Matches start at most at len-MFLimit-1; the rest of the block, at
//     least its last MFLimit+1 bytes, is the final literal run.
//   - A block whose compressed form is not smaller than the block is stored
//     raw. Blocks of less than MFLimit+1 bytes are always raw.
//
// Block sizes are limited to MaxBlockSize (positions fit 16 bits, offsets
// never exceed 65535).
package lz4ref

import (
	"encoding/binary"
	"fmt"
	"github.com/shuffled/shuffled/codec"
	"math/bits"
)

// Limits and constants of the block compressor and the framing.
const (
	// MinBlockSize and MaxBlockSize bound the block size of a stream:
	// lz4-java refuses blocks under 64 bytes; positions and offsets of
	// this compressor fit 16 bits.
	MinBlockSize = 64
	MaxBlockSize = 64 << 10
	// HashLog is log2 of the hash table's entries.
	HashLog = 12
	// MinMatch, LastLiterals and MFLimit are LZ4's block rules: a match
	// is at least 4 bytes, the last 5 bytes are literals, and no match
	// starts in the last 12 bytes.
	MinMatch     = 4
	LastLiterals = 5
	MFLimit      = 12
	// HeaderLen is the length of a block header of the framing: magic,
	// token, compressed length, original length, checksum.
	HeaderLen = 21
	// Seed and ChecksumMask make a block's checksum: xxHash32 of the raw
	// block with Seed, masked.
	Seed         = 0x9747b28c
	ChecksumMask = 0x0FFFFFFF

	methodRaw = 0x10
	methodLZ4 = 0x20
	hashMul   = 2654435761
	empty     = 0xFFFF
)

// Magic starts every block header.
const Magic = "LZ4Block"

// CheckBlockSize returns an error for a block size this compressor does
// not support.
func CheckBlockSize(n int) error {
	if n < MinBlockSize || n > MaxBlockSize {
		return fmt.Errorf("lz4ref: block size %d out of range [%d, %d]", n, MinBlockSize, MaxBlockSize)
	}
	return nil
}

// Level returns the level bits of the token for a block size, as
// lz4-java computes them: max(0, ceil(log2(blockSize)) - 10).
func Level(blockSize int) byte {
	return byte(max(0, bits.Len(uint(blockSize-1))-10))
}

func hash(v uint32) uint32 { return (v * hashMul) >> (32 - HashLog) }

// CompressBlock compresses src (at most MaxBlockSize bytes) into dst as
// one LZ4 block and returns its length, or 0 when the block would not be
// smaller than src (it is then stored raw). dst needs len(src)-1 bytes;
// past what the result says, its bytes are unspecified.
func CompressBlock(dst, src []byte) int {
	n := len(src)
	if n > MaxBlockSize {
		panic(fmt.Sprintf("lz4ref: block of %d bytes, more than %d", n, MaxBlockSize))
	}
	if n < MFLimit+1 {
		return 0
	}
	dst = dst[:n-1] // a compressed block must be smaller than src
	var table [1 << HashLog]uint16
	for i := range table {
		table[i] = empty
	}
	lastStart := n - MFLimit - 1
	matchLimit := n - LastLiterals
	out, anchor, p := 0, 0, 0
	ok := true
	for p <= lastStart {
		v := binary.LittleEndian.Uint32(src[p:])
		h := hash(v)
		c := int(table[h])
		table[h] = uint16(p)
		if c == empty || binary.LittleEndian.Uint32(src[c:]) != v {
			p++
			continue
		}
		l := MinMatch
		for p+l < matchLimit && src[p+l] == src[c+l] {
			l++
		}
		for p > anchor && c > 0 && src[p-1] == src[c-1] {
			p, c, l = p-1, c-1, l+1
		}
		if out, ok = putSequence(dst, out, src[anchor:p], p-c, l); !ok {
			return 0
		}
		p += l
		anchor = p
	}
	if out, ok = putSequence(dst, out, src[anchor:], 0, 0); !ok {
		return 0
	}
	return out
}

// putSequence writes one sequence (the literals, then a match of length
// ml at offset off; ml 0 for the last sequence) at dst[out:] and returns
// the new length, or false when it does not fit.
func putSequence(dst []byte, out int, lit []byte, off, ml int) (int, bool) {
	ll := len(lit)
	need := 1 + ll + (ll+255-15)/255
	if ml > 0 {
		need += 2 + (ml-MinMatch+255-15)/255
	}
	if out+need > len(dst) {
		return out, false
	}
	token := byte(min(ll, 15)) << 4
	if ml > 0 {
		token |= byte(min(ml-MinMatch, 15))
	}
	dst[out] = token
	out++
	out = putLength(dst, out, ll)
	out += copy(dst[out:], lit)
	if ml > 0 {
		binary.LittleEndian.PutUint16(dst[out:], uint16(off))
		out += 2
		out = putLength(dst, out, ml-MinMatch)
	}
	return out, true
}

// putLength writes the extra bytes of a token length n (n-15 as 255s and
// a remainder) when n >= 15.
func putLength(dst []byte, out, n int) int {
	if n < 15 {
		return out
	}
	n -= 15
	for ; n >= 255; n -= 255 {
		dst[out] = 255
		out++
	}
	dst[out] = byte(n)
	return out + 1
}

// Checksum is a block's checksum in the framing: xxHash32 of the raw
// block with Seed, masked with ChecksumMask.
func Checksum(b []byte) uint32 { return codec.LZ4Checksum(b) }

// AppendBlock appends one framed block holding src (1..MaxBlockSize
// bytes) to dst, compressed or raw, with the level bits of level.
func AppendBlock(dst, src []byte, level byte) []byte {
	start := len(dst)
	dst = grow(dst, HeaderLen+len(src))
	payload := dst[start+HeaderLen:]
	method := byte(methodLZ4)
	n := CompressBlock(payload, src)
	if n == 0 {
		method = methodRaw
		n = copy(payload, src)
	}
	dst = dst[:start+HeaderLen+n]
	putHeader(dst[start:], method|level, n, len(src), Checksum(src))
	return dst
}

// AppendEndMark appends the empty raw block that ends a stream.
func AppendEndMark(dst []byte, level byte) []byte {
	start := len(dst)
	dst = grow(dst, HeaderLen)
	putHeader(dst[start:], methodRaw|level, 0, 0, 0)
	return dst
}

func putHeader(h []byte, token byte, compLen, origLen int, sum uint32) {
	copy(h, Magic)
	h[8] = token
	binary.LittleEndian.PutUint32(h[9:], uint32(compLen))
	binary.LittleEndian.PutUint32(h[13:], uint32(origLen))
	binary.LittleEndian.PutUint32(h[17:], sum)
}

// AppendStream appends one complete stream holding src to dst: src cut
// into blocks of blockSize bytes (the last one shorter), each framed, then
// the end mark. An empty src is the end mark alone. It panics on a block
// size that CheckBlockSize refuses.
func AppendStream(dst, src []byte, blockSize int) []byte {
	if err := CheckBlockSize(blockSize); err != nil {
		panic(err)
	}
	level := Level(blockSize)
	for len(src) > 0 {
		k := min(len(src), blockSize)
		dst = AppendBlock(dst, src[:k], level)
		src = src[k:]
	}
	return AppendEndMark(dst, level)
}

// MaxStreamLen is the largest stream AppendStream makes of n bytes.
func MaxStreamLen(n int64, blockSize int) int64 {
	return n + (Blocks(n, blockSize)+1)*HeaderLen
}

// Blocks is the number of blocks of a stream of n bytes (the end mark not
// counted).
func Blocks(n int64, blockSize int) int64 {
	return (n + int64(blockSize) - 1) / int64(blockSize)
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}
