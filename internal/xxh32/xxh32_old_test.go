package xxh32

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// xxh32Old is the previous Sum, one stripe per iteration in pure Go: the
// reference of TestXXH32MatchesOld and FuzzXXH32 and the baseline of
// BenchmarkXXH32Impl.
func xxh32Old(b []byte, seed uint32) uint32 {
	n := len(b)
	var h uint32
	if n >= 16 {
		v1 := seed + xxPrime1 + xxPrime2
		v2 := seed + xxPrime2
		v3 := seed
		v4 := seed - xxPrime1
		// The stripes through an unsafe pointer, without bounds checks:
		// every load ends at or before end <= n.
		p := unsafe.Pointer(unsafe.SliceData(b))
		end := n &^ 15
		for i := 0; i < end; i += 16 {
			v1 = xxRound(v1, load32(p, i))
			v2 = xxRound(v2, load32(p, i+4))
			v3 = xxRound(v3, load32(p, i+8))
			v4 = xxRound(v4, load32(p, i+12))
		}
		b = b[end:]
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) +
			bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
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
