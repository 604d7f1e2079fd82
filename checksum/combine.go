package checksum

import (
	"fmt"
	"hash/crc32"
	"math/bits"
)

// Combine returns the checksum of A||B given sumA = checksum(A),
// sumB = checksum(B) and lenB = len(B), without the bytes. It costs
// O(log lenB) for the CRCs and O(1) for Adler32. It returns 0 for None and
// panics if lenB is negative.
func (a Algorithm) Combine(sumA, sumB uint32, lenB int64) uint32 {
	if lenB < 0 {
		panic(fmt.Sprintf("checksum: %v.Combine: lenB = %d, want >= 0", a, lenB))
	}
	switch a {
	case Adler32:
		return adler32Combine(sumA, sumB, lenB)
	case CRC32:
		return ieeeGF.combine(sumA, sumB, lenB)
	case CRC32C:
		return castagnoliGF.combine(sumA, sumB, lenB)
	}
	return 0
}

// adler32Combine: with A's sums (a1, a2) and B's (b1, b2), each s1 starting
// at 1, the running s1 over B's bytes in A||B is A's final s1 plus B's own
// running s1 minus the 1 it starts from. So
//
//	s1 = a1 + b1 − 1
//	s2 = a2 + b2 + lenB·(a1 − 1)     (all mod adlerBase)
func adler32Combine(sumA, sumB uint32, lenB int64) uint32 {
	const m = adlerBase
	a1, a2 := uint64(sumA&0xffff)%m, uint64(sumA>>16)%m
	b1, b2 := uint64(sumB&0xffff)%m, uint64(sumB>>16)%m
	am1 := (a1 + m - 1) % m // a1 − 1, kept non-negative
	s1 := (a1 + b1 + m - 1) % m
	s2 := (a2 + b2 + uint64(lenB)%m*am1) % m
	return uint32(s2<<16 | s1)
}

// gf32 is arithmetic in GF(2)[x] modulo a CRC-32 polynomial P, in the
// reflected bit order the CRCs use: bit 31 of a uint32 is the coefficient of
// x^0 and bit 0 that of x^31.
//
// A CRC register r after message M satisfies r = (M·x^32 + pre/post terms)
// mod P, where the terms from the all-ones initial and final values cancel
// when two CRCs are added. Appending lenB bytes multiplies the first
// message's part by x^(8·lenB), so
//
//	crc(A||B) = crc(A)·x^(8·lenB) mod P  ⊕  crc(B).
//
// x^(8·lenB) is the product of x^(2^(k+3)) over the set bits k of lenB; those
// powers are precomputed, so a combine is at most 64 multiplications and
// usually a few.
type gf32 struct {
	// shift8 multiplies by x^8: r·x^8 = shift8[r&0xff] ⊕ r>>8 (the CRC
	// byte table with a zero data byte).
	shift8 *crc32.Table
	// x2n[k] = x^(2^k) mod P.
	x2n [3 + 63]uint32
}

var (
	ieeeGF       = newGF32(crc32.IEEE)
	castagnoliGF = newGF32(crc32.Castagnoli)
)

// xPow0 is the polynomial 1 (x^0) in reflected order.
const xPow0 = 1 << 31

func newGF32(poly uint32) *gf32 {
	g := &gf32{shift8: crc32.MakeTable(poly)}
	g.x2n[0] = xPow0 >> 1 // x^1
	for k := 1; k < len(g.x2n); k++ {
		g.x2n[k] = g.mul(g.x2n[k-1], g.x2n[k-1])
	}
	return g
}

// mul returns a·b mod P.
//
// The carry-less product of two reflected 32-bit values is a 63-bit integer
// whose bit 62−d holds the coefficient of x^d; shifted left once, its high 32
// bits hold x^0..x^31 and its low 32 bits x^32..x^63 (both reflected). The
// high half is already reduced; the low half, read as a reflected value L,
// stands for L·x^32, which four byte steps of the CRC table reduce.
//
// The product is formed four bits of a at a time from the 16 multiples of b.
func (g *gf32) mul(a, b uint32) uint32 {
	var m [16]uint64
	bb := uint64(b)
	m[1] = bb
	for i := 2; i < 16; i += 2 {
		m[i] = m[i/2] << 1
		m[i+1] = m[i] ^ bb
	}
	var prod uint64
	for shift := 0; shift < 32; shift += 4 {
		prod ^= m[a>>shift&15] << shift
	}
	prod <<= 1
	hi, lo := uint32(prod>>32), uint32(prod)
	t := g.shift8
	lo = t[lo&0xff] ^ lo>>8
	lo = t[lo&0xff] ^ lo>>8
	lo = t[lo&0xff] ^ lo>>8
	lo = t[lo&0xff] ^ lo>>8
	return hi ^ lo
}

// xPow8n returns x^(8·n) mod P.
func (g *gf32) xPow8n(n uint64) uint32 {
	if n == 0 {
		return xPow0
	}
	k := 3 + bits.TrailingZeros64(n)
	p := g.x2n[k]
	for n >>= k - 2; n != 0; n >>= 1 {
		k++
		if n&1 != 0 {
			p = g.mul(p, g.x2n[k])
		}
	}
	return p
}

func (g *gf32) combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB == 0 {
		return crcA ^ crcB // crcB is the CRC of nothing: 0
	}
	return g.mul(g.xPow8n(uint64(lenB)), crcA) ^ crcB
}
