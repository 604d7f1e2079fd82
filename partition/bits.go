package partition

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// countOnes returns the number of set bits among bits [start, start+n) of
// the LSB-first bitmap bm.
func countOnes(bm []byte, start, n int) int {
	if n <= 0 {
		return 0
	}
	count := 0
	i := start
	end := start + n
	for ; i < end && i&7 != 0; i++ {
		count += int(bm[i>>3] >> (i & 7) & 1)
	}
	for ; i+64 <= end; i += 64 {
		count += bits.OnesCount64(binary.LittleEndian.Uint64(bm[i>>3:]))
	}
	for ; i+8 <= end; i += 8 {
		count += bits.OnesCount8(bm[i>>3])
	}
	for ; i < end; i++ {
		count += int(bm[i>>3] >> (i & 7) & 1)
	}
	return count
}

// appendBits appends bits [start, start+n) of the LSB-first bitmap src to
// dst as ceil(n/8) bytes whose bit 0 is bit start of src; the bits past n in
// the last byte are zero.
func appendBits(dst, src []byte, start, n int) []byte {
	nb := (n + 7) / 8
	dst, out := grow(dst, nb)
	putBits(out, src, start, n)
	return dst
}

// putBits writes bits [start, start+n) of src to out[:ceil(n/8)], shifted
// to begin at bit 0, with the bits past n in the last byte zero.
func putBits(out, src []byte, start, n int) {
	nb := (n + 7) / 8
	if nb == 0 {
		return
	}
	out = out[:nb]
	first := start >> 3
	shift := uint(start & 7)
	if shift == 0 {
		copy(out, src[first:first+nb])
	} else {
		// Output byte k takes the high bits of src[first+k] and the low
		// bits of src[first+k+1]; the last source byte may not exist.
		s := src[first:]
		k := 0
		for ; k+8 < len(s) && k+8 <= nb; k += 8 {
			w := binary.LittleEndian.Uint64(s[k:])
			w = w>>shift | uint64(s[k+8])<<(64-shift)
			binary.LittleEndian.PutUint64(out[k:], w)
		}
		for ; k < nb; k++ {
			v := s[k] >> shift
			if k+1 < len(s) {
				v |= s[k+1] << (8 - shift)
			}
			out[k] = v
		}
	}
	if r := n & 7; r != 0 {
		out[nb-1] &= byte(1)<<r - 1
	}
}

// grow extends dst by n bytes and returns the extended slice and its last
// n bytes, whose contents are unspecified.
func grow(dst []byte, n int) ([]byte, []byte) {
	l := len(dst)
	dst = slices.Grow(dst, n)[:l+n]
	return dst, dst[l:]
}
