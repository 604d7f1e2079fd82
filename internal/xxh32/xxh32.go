// Package xxh32 is the 32-bit xxHash of the xxHash specification, the
// checksum of every block of Spark's LZ4BlockOutputStream format (package
// codec). It is a package of its own, free of cgo, so that every build of
// codec (the clib one links C through cgo, and a cgo package cannot hold Go
// assembly) takes the same assembly loop where the CPU runs it.
package xxh32

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// xxHash32 primes, from the xxHash specification.
const (
	xxPrime1 uint32 = 2654435761
	xxPrime2 uint32 = 2246822519
	xxPrime3 uint32 = 3266489917
	xxPrime4 uint32 = 668265263
	xxPrime5 uint32 = 374761393
)

// Sum returns the 32-bit xxHash of b with the given seed.
func Sum(b []byte, seed uint32) uint32 {
	n := len(b)
	var h uint32
	if n >= 16 {
		v := [4]uint32{seed + xxPrime1 + xxPrime2, seed + xxPrime2, seed, seed - xxPrime1}
		end := n &^ 15
		xxStripes(&v, b[:end])
		b = b[end:]
		h = bits.RotateLeft32(v[0], 1) + bits.RotateLeft32(v[1], 7) +
			bits.RotateLeft32(v[2], 12) + bits.RotateLeft32(v[3], 18)
	} else {
		h = seed + xxPrime5
	}
	h += uint32(n)
	for len(b) >= 4 {
		h += binary.LittleEndian.Uint32(b) * xxPrime3
		h = bits.RotateLeft32(h, 17) * xxPrime4
		b = b[4:]
	}
	for _, c := range b {
		h += uint32(c) * xxPrime5
		h = bits.RotateLeft32(h, 11) * xxPrime1
	}
	h ^= h >> 15
	h *= xxPrime2
	h ^= h >> 13
	h *= xxPrime3
	h ^= h >> 16
	return h
}

// xxStripesGeneric runs the four lanes v over the 16-byte stripes of b
// (len(b) rounded down to a multiple of 16).
//
// It is bound by its multiplications: two per 4-byte lane, eight per
// stripe, on x86 one per cycle. Two stripes per iteration, or one 8-byte
// load split into two lanes, measured no faster.
func xxStripesGeneric(v *[4]uint32, b []byte) {
	v1, v2, v3, v4 := v[0], v[1], v[2], v[3]
	// The stripes through an unsafe pointer, without bounds checks: every
	// load ends at or before end = len(b).
	p := unsafe.Pointer(unsafe.SliceData(b))
	end := len(b) &^ 15
	for i := 0; i < end; i += 16 {
		v1 = xxRound(v1, load32(p, i))
		v2 = xxRound(v2, load32(p, i+4))
		v3 = xxRound(v3, load32(p, i+8))
		v4 = xxRound(v4, load32(p, i+12))
	}
	v[0], v[1], v[2], v[3] = v1, v2, v3, v4
}

// load32 loads the little-endian word at byte offset i of p, without a
// bounds check: the caller says why i is in bounds.
func load32(p unsafe.Pointer, i int) uint32 {
	return binary.LittleEndian.Uint32(unsafe.Slice((*byte)(unsafe.Add(p, i)), 4))
}

func xxRound(acc, in uint32) uint32 {
	return bits.RotateLeft32(acc+in*xxPrime2, 13) * xxPrime1
}
