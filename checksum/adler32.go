package checksum

import "encoding/binary"

// Adler-32 (RFC 1950): s1 = 1 + the sum of the bytes, s2 = the sum of the
// successive values of s1, both modulo adlerBase; the checksum is s2<<16 | s1.
const (
	adlerBase = 65521
	// adlerNMax is the most bytes that can be summed into s1, s2 < adlerBase
	// before s2 may overflow 32 bits: the largest n with
	// 255·n·(n+1)/2 + (n+1)·(adlerBase−1) < 2^32.
	adlerNMax = 5552
	// adlerBlock is the number of bytes the unrolled loop sums per step.
	adlerBlock = 32
	// adlerChunk is adlerNMax rounded down to whole blocks.
	adlerChunk = adlerNMax / adlerBlock * adlerBlock
)

// SWAR constants for eight bytes read as a little-endian uint64 x, with
// e = x & lanes holding bytes 0, 2, 4, 6 and o = x>>8 & lanes holding bytes
// 1, 3, 5, 7, each in a 16-bit lane (lane 0 lowest).
const (
	lanes = 0x00ff_00ff_00ff_00ff
	// (v * laneSum) >> 48 is the sum of v's four 16-bit lanes, as long as
	// that sum is below 2^16 (then no lane carries into the next).
	laneSum = 0x0001_0001_0001_0001
	// (e * weightsEven) >> 48 = 8·b0 + 6·b2 + 4·b4 + 2·b6 and
	// (o * weightsOdd) >> 48 = 7·b1 + 5·b3 + 3·b5 + 1·b7: the top lane of
	// the product collects lane i times lane 3−i of the constant. Summed
	// they give Σ (8−i)·b_i, the part of s2 that eight bytes add beyond 8·s1.
	weightsEven = 8<<48 | 6<<32 | 4<<16 | 2
	weightsOdd  = 7<<48 | 5<<32 | 3<<16 | 1
)

// adler32Update returns the Adler-32 checksum of the bytes summed in sum
// followed by p; it equals what hash/adler32 computes.
//
// The bytes are taken 32 at a time as four little-endian words. For a block
// of bytes b_0..b_31, s2 grows by 32·s1 + Σ (32−i)·b_i and s1 by Σ b_i;
// with word k's bytes weighted (8−j) + 8·(3−k), this is
//
//	s2 += 32·s1 + 8·Σ_k (3−k)·S_k + Σ_k W_k
//
// where S_k is the byte sum of word k and W_k its weighted sum Σ (8−j)·b_j.
// Lane-wise additions of the split words before the horizontal sums keep the
// multiplications to four per block. Every partial sum is bounded by the
// byte-at-a-time value it replaces, so the adlerNMax bound still holds.
func adler32Update(sum uint32, p []byte) uint32 {
	s1, s2 := sum&0xffff, sum>>16
	for len(p) >= adlerBlock {
		n := min(len(p), adlerChunk) &^ (adlerBlock - 1)
		for q := p[:n]; len(q) >= adlerBlock; q = q[adlerBlock:] {
			x0 := binary.LittleEndian.Uint64(q[0:])
			x1 := binary.LittleEndian.Uint64(q[8:])
			x2 := binary.LittleEndian.Uint64(q[16:])
			x3 := binary.LittleEndian.Uint64(q[24:])
			e0, o0 := x0&lanes, x0>>8&lanes
			e1, o1 := x1&lanes, x1>>8&lanes
			e2, o2 := x2&lanes, x2>>8&lanes
			e3, o3 := x3&lanes, x3>>8&lanes
			// Lanes: t_k ≤ 510; 3t0+2t1+t2 ≤ 3060; e, o ≤ 1020, times a
			// weight ≤ 8 and four lanes: ≤ 32640. No lane overflows.
			t0, t1, t2, t3 := e0+o0, e1+o1, e2+o2, e3+o3
			e, o := e0+e1+e2+e3, o0+o1+o2+o3
			s2 += 32*s1 +
				8*uint32((3*t0+2*t1+t2)*laneSum>>48) +
				uint32(e*weightsEven>>48) + uint32(o*weightsOdd>>48)
			s1 += uint32((t0 + t1 + t2 + t3) * laneSum >> 48)
		}
		p = p[n:]
		s1 %= adlerBase
		s2 %= adlerBase
	}
	// Fewer than adlerBlock bytes are left: well under adlerNMax.
	for _, b := range p {
		s1 += uint32(b)
		s2 += s1
	}
	return (s2%adlerBase)<<16 | s1%adlerBase
}
