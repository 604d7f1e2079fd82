package checksum

import (
	"bytes"
	"encoding/binary"
	"hash/adler32"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// stdlibAdler32 is hash/adler32's checksum of p after the bytes summed in
// sum (s1, s2 < adlerBase), started through its marshalled state.
func stdlibAdler32(t testing.TB, sum uint32, p []byte) uint32 {
	h := adler32.New()
	state := binary.BigEndian.AppendUint32([]byte("adl\x01"), sum)
	if err := h.(interface{ UnmarshalBinary([]byte) error }).UnmarshalBinary(state); err != nil {
		t.Fatalf("hash/adler32 UnmarshalBinary(%x): %v", state, err)
	}
	h.Write(p)
	return h.Sum32()
}

// adlerAsm, where the build has an assembly loop and the CPU runs it,
// switches adler32Update to it (true) or to the pure-Go one (false).
var adlerAsm func(on bool)

// adlerPaths runs f with each of adler32Update's loops in turn.
func adlerPaths(f func(path string)) {
	if adlerAsm == nil {
		f("go")
		return
	}
	defer adlerAsm(true)
	adlerAsm(false)
	f("go")
	adlerAsm(true)
	f("asm")
}

// adlerLengths are lengths around the edges of adler32Update: every length
// up to three blocks, both sides of block multiples, of hash/adler32's and
// the old implementation's chunk (adlerNMax) and its multiples, of the
// modulus and of adlerChunk.
func adlerLengths() []int {
	var ns []int
	for n := range 3*adlerBlock + 2 {
		ns = append(ns, n)
	}
	for _, base := range []int{
		7 * adlerBlock, 40 * adlerBlock, 20 * 128, // 2.5 KiB
		adlerNMax, 2 * adlerNMax, 3 * adlerNMax, 4 * adlerNMax, oldAdlerChunk,
		adlerBase, 1 << 15,
	} {
		for d := -9; d <= 9; d++ {
			ns = append(ns, base+d)
		}
	}
	for _, base := range []int{adlerChunk, 2 * adlerChunk} {
		ns = append(ns, base-1, base, base+1)
	}
	ns = append(ns, adlerChunk+adlerBlock+9)
	slices.Sort(ns)
	return slices.Compact(ns)
}

// adlerStarts are the sums the tests resume from: the empty one, zero, the
// largest valid one (s1 = s2 = adlerBase−1, the overflow bound's worst
// case) and random ones.
func adlerStarts(rng *rand.Rand) []uint32 {
	starts := []uint32{1, 0, (adlerBase-1)<<16 | (adlerBase - 1)}
	for range 3 {
		starts = append(starts, rng.Uint32N(adlerBase)<<16|rng.Uint32N(adlerBase))
	}
	return starts
}

func TestAdler32MatchesStdlib(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := adlerLengths()
	for range 20 {
		lengths = append(lengths, rng.IntN(100_000))
	}
	maxLen := slices.Max(lengths)
	// Misaligned starts: the inputs begin 0..31 bytes into their buffers.
	const skew = 32
	random := randomBytes(rng, maxLen+skew)
	// All 0xff bytes give the largest sums and lane sums: the bounds' worst
	// case.
	ones := bytes.Repeat([]byte{0xff}, maxLen+skew)
	zeros := make([]byte, maxLen+skew)
	starts := adlerStarts(rng)
	adlerPaths(func(path string) {
		for _, n := range lengths {
			inputs := []struct {
				name string
				buf  []byte
			}{{"0xff", ones}, {"random", random}, {"0x00", zeros}}
			if n > adlerChunk {
				// Only the worst case for the longest, to keep -race fast.
				inputs = inputs[:1]
			}
			for _, in := range inputs {
				off := n % skew
				p := in.buf[off : off+n]
				want := adler32.Checksum(p)
				if got := adler32Update(1, p); got != want {
					t.Fatalf("%s: adler32Update(1, %d %s bytes at offset %d) = %#08x, want %#08x", path, n, in.name, off, got, want)
				}
				if got := adler32UpdateOld(1, p); got != want {
					t.Fatalf("adler32UpdateOld(1, %d %s bytes) = %#08x, want %#08x", n, in.name, got, want)
				}
				// Resuming from other sums, and in two parts.
				start := starts[rng.IntN(len(starts))]
				want = stdlibAdler32(t, start, p)
				if got := adler32Update(start, p); got != want {
					t.Fatalf("%s: adler32Update(%#08x, %d %s bytes) = %#08x, want %#08x", path, start, n, in.name, got, want)
				}
				i := rng.IntN(n + 1)
				if got := adler32Update(adler32Update(start, p[:i]), p[i:]); got != want {
					t.Fatalf("%s: adler32Update(%#08x, %d %s bytes) in parts %d+%d = %#08x, want %#08x", path, start, n, in.name, i, n-i, got, want)
				}
			}
		}
	})
}

// TestAdler32AllStarts resumes every length up to a few blocks from every
// start sum, over the all-0xff bytes.
func TestAdler32AllStarts(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	ones := bytes.Repeat([]byte{0xff}, 4*adlerBlock)
	adlerPaths(func(path string) {
		for _, start := range adlerStarts(rng) {
			for n := range len(ones) + 1 {
				want := stdlibAdler32(t, start, ones[:n])
				if got := adler32Update(start, ones[:n]); got != want {
					t.Fatalf("%s: adler32Update(%#08x, %d bytes of 0xff) = %#08x, want %#08x", path, start, n, got, want)
				}
			}
		}
	})
}

// TestAdlerBounds checks the constants' arithmetic: adlerNMax is the largest
// length whose sums fit 32 bits, adlerChunk is whole blocks and its sums fit
// 64 bits from any 16-bit start, with room for the fold's intermediate terms.
func TestAdlerBounds(t *testing.T) {
	// maxS2 is s2's largest value after n bytes of 0xff from s1, s2 = start.
	maxS2 := func(n, start int64) *big.Int {
		v := big.NewInt(255)
		v.Mul(v, big.NewInt(n*(n+1)/2))
		w := big.NewInt(n + 1)
		w.Mul(w, big.NewInt(start))
		return v.Add(v, w)
	}
	lim32 := new(big.Int).Lsh(big.NewInt(1), 32)
	if maxS2(adlerNMax, adlerBase-1).Cmp(lim32) >= 0 || maxS2(adlerNMax+1, adlerBase-1).Cmp(lim32) < 0 {
		t.Errorf("adlerNMax = %d is not the largest n with 32-bit sums", adlerNMax)
	}
	if adlerChunk%adlerBlock != 0 || adlerBlock != 8*adlerWords {
		t.Errorf("adlerChunk = %d, adlerBlock = %d, adlerWords = %d: want a chunk of whole blocks of 8-byte words", adlerChunk, adlerBlock, adlerWords)
	}
	// The input sum's halves may be any 16-bit values; the fold adds at
	// most 2·48960 + 16320 before subtracting it.
	v := maxS2(adlerChunk, 0xffff)
	v.Add(v, big.NewInt(2*48960+16320))
	if lim64 := new(big.Int).Lsh(big.NewInt(1), 64); v.Cmp(lim64) >= 0 {
		t.Errorf("adlerChunk = %d: s2 may reach %v, not below 2^64", adlerChunk, v)
	}
	// adlerSumsAVX2's weighted 32-bit lanes over a chunk of 0xff bytes.
	if w := int64(adlerChunk/32) * 255 * (32 + 31 + 30 + 29); w >= 1<<32 {
		t.Errorf("adlerChunk = %d: a weighted 32-bit lane of the AVX2 loop reaches %d", adlerChunk, w)
	}
	// The lane bounds of adlerBlocks, for adlerWords words of 0xff bytes.
	const s = 2 * 255
	if u := s * adlerWords * (adlerWords - 1) / 2; u >= 1<<16 {
		t.Errorf("adlerWords = %d: lane u reaches %d", adlerWords, u)
	}
	if tl := s * adlerWords; 4*tl >= 1<<16 || 6*tl >= 1<<16 {
		t.Errorf("adlerWords = %d: lane t reaches %d, its sums %d and %d", adlerWords, tl, 4*tl, 6*tl)
	}
}

// TestAdler32UnreducedStart: a sum whose halves are not reduced (not one
// Update returns) still gives the checksum of the reduced one.
func TestAdler32UnreducedStart(t *testing.T) {
	p := bytes.Repeat([]byte{0xff}, 3*adlerBlock+5)
	adlerPaths(func(path string) {
		for _, hi := range []uint32{adlerBase, 0xffff} {
			for _, lo := range []uint32{adlerBase, 0xffff} {
				got := adler32Update(hi<<16|lo, p)
				want := stdlibAdler32(t, (hi-adlerBase)<<16|(lo-adlerBase), p)
				if got != want {
					t.Errorf("%s: adler32Update(%#08x, %d bytes) = %#08x, want %#08x", path, hi<<16|lo, len(p), got, want)
				}
			}
		}
	})
}

func FuzzAdler32(f *testing.F) {
	f.Add([]byte(nil), uint32(1), uint16(0))
	f.Add([]byte("hello world"), uint32(0x1a0b045d), uint16(3))
	f.Add(bytes.Repeat([]byte{0xff}, 3*adlerBlock+7), uint32((adlerBase-1)<<16|(adlerBase-1)), uint16(129))
	f.Fuzz(func(t *testing.T, p []byte, start uint32, cut uint16) {
		// A valid start: both halves reduced.
		start = (start>>16%adlerBase)<<16 | start&0xffff%adlerBase
		want := stdlibAdler32(t, start, p)
		i := int(cut) % (len(p) + 1)
		adlerPaths(func(path string) {
			if got := adler32Update(start, p); got != want {
				t.Fatalf("%s: adler32Update(%#08x, %d bytes) = %#08x, want %#08x", path, start, len(p), got, want)
			}
			if got := adler32Update(adler32Update(start, p[:i]), p[i:]); got != want {
				t.Fatalf("%s: adler32Update(%#08x, %d bytes) in parts %d+%d = %#08x, want %#08x", path, start, len(p), i, len(p)-i, got, want)
			}
		})
	})
}
