package checksum

import "encoding/binary"

// Adler-32 (RFC 1950): s1 = 1 + the sum of the bytes, s2 = the sum of the
// successive values of s1, both modulo adlerBase; the checksum is s2<<16 | s1.
const (
	adlerBase = 65521
	// adlerNMax is the most bytes that 32-bit sums s1, s2 < adlerBase can
	// take before s2 may overflow: the largest n with
	// 255·n·(n+1)/2 + (n+1)·(adlerBase−1) < 2^32. It bounds hash/adler32's
	// chunks; the sums here are 64-bit (see adlerChunk).
	adlerNMax = 5552
	// adlerWords is the number of 8-byte words that one block sums in 16-bit
	// lanes before folding them into s1 and s2 (adlerBlocks gives the bounds).
	adlerWords = 16
	// adlerBlock is the number of bytes in a block.
	adlerBlock = 8 * adlerWords
	// adlerChunk is the number of bytes summed into 64-bit s1, s2 between
	// reductions modulo adlerBase: a whole number of blocks, far below the
	// largest n with 255·n·(n+1)/2 + (n+1)·0xffff < 2^64 (about 3.8·10^8;
	// 0xffff for input sums not reduced). TestAdlerBounds checks it. Two
	// reductions per MiB cost nothing measurable; a longer chunk only makes
	// the tests at its edges slower.
	adlerChunk = 1 << 20
)

// SWAR constants for eight bytes read as a little-endian uint64 x, with
// e = x & lanes holding bytes 0, 2, 4, 6 and o = x>>8 & lanes holding bytes
// 1, 3, 5, 7, each in a 16-bit lane (lane l from bit 16·l).
const (
	lanes = 0x00ff_00ff_00ff_00ff
	// (v * laneSum) >> 48 is the sum of v's four 16-bit lanes, as long as
	// that sum is below 2^16 (then no lane carries into the next).
	laneSum = 0x0001_0001_0001_0001
	// (v * laneIndex) >> 48 is Σ l·v_l: lane k of the product is
	// Σ_{l≤k} (3−k+l)·v_l, the top one (k = 3) the sum wanted. With every
	// v_l ≤ B each lane is at most 6·B, so for B < 2^16/6 none carries.
	laneIndex = 0<<48 | 1<<32 | 2<<16 | 3
	// mask32 selects lanes 0 and 2 (or, after >>16, lanes 1 and 3) into two
	// 32-bit lanes.
	mask32 = 0x0000_ffff_0000_ffff
)

// adlerLanes is lanes in a variable: passed down as an argument it stays in a
// register, where the compiler would rebuild the constant before every use.
var adlerLanes uint64 = lanes

// adler32Update returns the Adler-32 checksum of the bytes summed in sum
// followed by p; it equals what hash/adler32 computes.
//
// The sums are 64-bit and reduced modulo adlerBase once per adlerChunk
// bytes. Within a chunk the whole 32-byte blocks go through adlerVector's
// assembly loop where the build and the CPU have one; what it leaves goes
// in blocks of adlerWords little-endian words (adlerBlocks), then fewer
// words, then single bytes.
func adler32Update(sum uint32, p []byte) uint32 {
	s1, s2 := uint64(sum&0xffff), uint64(sum>>16)
	m := adlerLanes
	for {
		n := min(len(p), adlerChunk)
		q := p[:n]
		p = p[n:]
		s1, s2, q = adlerVector(s1, s2, q)
		s1, s2 = adlerBlocks(s1, s2, q, m)
		q = q[len(q)&^(adlerBlock-1):]
		if len(q) >= 8 {
			k := len(q) &^ 7
			s1, s2 = adlerWordSums(s1, s2, q[:k])
			q = q[k:]
		}
		for _, b := range q {
			s1 += uint64(b)
			s2 += s1
		}
		s1 %= adlerBase
		s2 %= adlerBase
		if len(p) == 0 {
			return uint32(s2)<<16 | uint32(s1)
		}
	}
}

// adlerBlocks returns s1, s2 after the whole blocks of q (len(q) rounded
// down to a multiple of adlerBlock bytes).
//
// In a block, word j (bytes 8j..8j+7) adds its byte sum S_j to s1, and its
// byte i has weight adlerBlock − 8j − i in s2, so
//
//	s2 += adlerBlock·s1 + 8·Σ_j (adlerWords−1−j)·S_j + Σ_j Σ_i (8−i)·b_{8j+i}.
//
// Lane-wise, with s_j = e_j + o_j: t = Σ_j s_j, o = Σ_j o_j, and
// u = Σ_j (t before word j) = Σ_j (adlerWords−1−j)·s_j. Byte 2l of a word
// sits in lane l of e with weight 8−2l, byte 2l+1 in lane l of o with weight
// 7−2l, so the last sum is Σ_l (8−2l)·t_l − o_l = 8·Σt − 2·Σ l·t_l − Σo.
//
// Lane bounds with adlerWords = 16 and bytes ≤ 255: s_j ≤ 510, t ≤ 8160,
// o ≤ 4080, u ≤ 510·(0+1+…+15) = 61200, all below 2^16. The horizontal sums:
// Σt ≤ 32640, Σo ≤ 16320 and Σ l·t_l ≤ 6·8160 = 48960 (as is every lower
// lane of that product), all below 2^16; u, whose lane sum may not be, is
// folded through 32-bit lanes. m is lanes (see adlerLanes).
func adlerBlocks(s1, s2 uint64, q []byte, m uint64) (uint64, uint64) {
	for ; len(q) >= adlerBlock; q = q[adlerBlock:] {
		b := (*[adlerBlock]byte)(q)
		var t, u, o uint64
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[0:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[8:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[16:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[24:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[32:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[40:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[48:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[56:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[64:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[72:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[80:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[88:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[96:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[104:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[112:]), m)
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(b[120:]), m)
		s1, s2 = adlerFold(s1, s2, adlerBlock, t, u, o)
	}
	return s1, s2
}

// adlerWord adds the word x to the lane sums t, u and o; m is lanes.
func adlerWord(t, u, o, x, m uint64) (uint64, uint64, uint64) {
	od := x >> 8 & m
	return t + x&m + od, u + t, o + od
}

// adlerWordSums is adlerBlocks' block for whole words, at most adlerWords of
// them: len(q) is a multiple of 8 and at most adlerBlock. The same bounds
// hold for fewer words.
func adlerWordSums(s1, s2 uint64, q []byte) (uint64, uint64) {
	n := uint64(len(q))
	var t, u, o uint64
	for len(q) >= 8 {
		t, u, o = adlerWord(t, u, o, binary.LittleEndian.Uint64(q), lanes)
		q = q[8:]
	}
	return adlerFold(s1, s2, n, t, u, o)
}

// adlerFold adds the lane sums t, u, o of n bytes (a whole number of words)
// to s1 and s2, as adlerBlocks describes.
func adlerFold(s1, s2, n, t, u, o uint64) (uint64, uint64) {
	st := t * laneSum >> 48
	lt := t * laneIndex >> 48
	so := o * laneSum >> 48
	u = u&mask32 + u>>16&mask32
	su := u&0xffff_ffff + u>>32
	// 8·st − 2·lt − so is a sum of weighted bytes, and s2's true value is
	// below 2^64 (adlerChunk), so the arithmetic modulo 2^64 is exact.
	s2 += n*s1 + 8*su + 8*st - 2*lt - so
	s1 += st
	return s1, s2
}
