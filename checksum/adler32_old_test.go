package checksum

import (
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"math/rand/v2"
	"testing"
)

// The previous Adler-32 (32 bytes per step, four multiplications per step,
// 32-bit sums reduced every adlerNMax bytes), kept as a second reference and
// as the baseline of BenchmarkAdler32.

const (
	oldAdlerBlock = 32
	oldAdlerChunk = adlerNMax / oldAdlerBlock * oldAdlerBlock
)

// SWAR constants for eight bytes read as a little-endian uint64 x, with
// e = x & oldLanes holding bytes 0, 2, 4, 6 and o = x>>8 & oldLanes holding bytes
// 1, 3, 5, 7, each in a 16-bit lane (lane 0 lowest).
const (
	oldLanes = 0x00ff_00ff_00ff_00ff
	// (v * oldLaneSum) >> 48 is the sum of v's four 16-bit lanes, as long as
	// that sum is below 2^16 (then no lane carries into the next).
	oldLaneSum = 0x0001_0001_0001_0001
	// (e * oldWeightsEven) >> 48 = 8·b0 + 6·b2 + 4·b4 + 2·b6 and
	// (o * oldWeightsOdd) >> 48 = 7·b1 + 5·b3 + 3·b5 + 1·b7: the top lane of
	// the product collects lane i times lane 3−i of the constant. Summed
	// they give Σ (8−i)·b_i, the part of s2 that eight bytes add beyond 8·s1.
	oldWeightsEven = 8<<48 | 6<<32 | 4<<16 | 2
	oldWeightsOdd  = 7<<48 | 5<<32 | 3<<16 | 1
)

// adler32UpdateOld returns the Adler-32 checksum of the bytes summed in sum
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
func adler32UpdateOld(sum uint32, p []byte) uint32 {
	s1, s2 := sum&0xffff, sum>>16
	for len(p) >= oldAdlerBlock {
		n := min(len(p), oldAdlerChunk) &^ (oldAdlerBlock - 1)
		for q := p[:n]; len(q) >= oldAdlerBlock; q = q[oldAdlerBlock:] {
			x0 := binary.LittleEndian.Uint64(q[0:])
			x1 := binary.LittleEndian.Uint64(q[8:])
			x2 := binary.LittleEndian.Uint64(q[16:])
			x3 := binary.LittleEndian.Uint64(q[24:])
			e0, o0 := x0&oldLanes, x0>>8&oldLanes
			e1, o1 := x1&oldLanes, x1>>8&oldLanes
			e2, o2 := x2&oldLanes, x2>>8&oldLanes
			e3, o3 := x3&oldLanes, x3>>8&oldLanes
			// Lanes: t_k ≤ 510; 3t0+2t1+t2 ≤ 3060; e, o ≤ 1020, times a
			// weight ≤ 8 and four lanes: ≤ 32640. No lane overflows.
			t0, t1, t2, t3 := e0+o0, e1+o1, e2+o2, e3+o3
			e, o := e0+e1+e2+e3, o0+o1+o2+o3
			s2 += 32*s1 +
				8*uint32((3*t0+2*t1+t2)*oldLaneSum>>48) +
				uint32(e*oldWeightsEven>>48) + uint32(o*oldWeightsOdd>>48)
			s1 += uint32((t0 + t1 + t2 + t3) * oldLaneSum >> 48)
		}
		p = p[n:]
		s1 %= adlerBase
		s2 %= adlerBase
	}
	// Fewer than oldAdlerBlock bytes are left: well under adlerNMax.
	for _, b := range p {
		s1 += uint32(b)
		s2 += s1
	}
	return (s2%adlerBase)<<16 | s1%adlerBase
}

// checksumSizes are the benchmarks' input sizes: a partition's bytes of a
// map output at 2000 and 200 partitions (2.5 KiB, 32 KiB) and a large one.
var checksumSizes = []struct {
	name string
	n    int
}{{"2.5KiB", 2560}, {"32KiB", 32 << 10}, {"1MiB", 1 << 20}}

// BenchmarkAdler32 compares this package's Adler-32 (impl=new, and
// impl=go: its pure-Go loop where the build has an assembly one) with the
// previous one (impl=old) and hash/adler32 (impl=stdlib) in one run.
func BenchmarkAdler32(b *testing.B) {
	for _, sz := range checksumSizes {
		p := randomBytes(rand.New(rand.NewPCG(1, 1)), sz.n)
		run := func(name string, f func(uint32, []byte) uint32) {
			b.Run(fmt.Sprintf("size=%s/impl=%s", sz.name, name), func(b *testing.B) {
				b.SetBytes(int64(sz.n))
				sum := uint32(1)
				for b.Loop() {
					sum = f(sum, p)
				}
			})
		}
		run("old", adler32UpdateOld)
		if adlerAsm != nil {
			adlerAsm(false)
			run("go", adler32Update)
			adlerAsm(true)
		}
		run("new", adler32Update)
		run("stdlib", func(_ uint32, p []byte) uint32 { return adler32.Checksum(p) })
	}
}
