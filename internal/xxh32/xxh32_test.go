package xxh32

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// lz4Seed is the seed of the checksums of Spark's lz4 block streams.
const lz4Seed = 0x9747b28c

// textData returns n deterministic bytes of text-like records.
func textData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	words := []string{"furiously", "carefully", "quickly", "final", "pending", "express", "regular", "ironic", "deposits", "requests", "accounts", "packages"}
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "%d|%d|%.2f|%s|%s %s|\n", r.IntN(6000000), r.IntN(7)+1, r.Float64()*100000,
			words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

func TestXXH32(t *testing.T) {
	fox := bytes.Repeat([]byte("The quick brown fox jumps over the lazy dog. "), 100)
	tests := []struct {
		in   []byte
		seed uint32
		want uint32
	}{
		{nil, 0, 0x02CC5D05},
		{[]byte("a"), 0, 0x550D7456},
		{[]byte("abc"), 0, 0x32D153FF},
		{[]byte("Nobody inspects the spammish repetition"), 0, 0xE2293B2F},
		// Content checksums of lz4 frames of these bytes, each length
		// crossing a lane or stripe boundary.
		{fox[:4], 0, 0x04be4380},
		{fox[:15], 0, 0x6d1332f9},
		{fox[:16], 0, 0xd4faafb1},
		{fox[:17], 0, 0xf5e047e8},
		{fox[:31], 0, 0xbabf72e1},
		{fox[:32], 0, 0x88c3b301},
		{fox[:100], 0, 0x9047f933},
		{fox[:1000], 0, 0x834a4a28},
		// lz4-java's checksum of "hello world", before its 28-bit mask.
		{[]byte("hello world"), lz4Seed, 0x02920395},
	}
	for _, tt := range tests {
		if got := Sum(tt.in, tt.seed); got&0x0FFFFFFF != tt.want&0x0FFFFFFF || (tt.seed == 0 && got != tt.want) {
			t.Errorf("Sum(%q, %#x) = %#08x, want %#08x", tt.in, tt.seed, got, tt.want)
		}
	}
}

func BenchmarkXXH32(b *testing.B) {
	data := textData(64<<10, 1)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		Sum(data, lz4Seed)
	}
}

// xxAsm, where the build has an assembly stripe loop and the CPU runs it,
// switches Sum to it (true) or to xxStripesGeneric (false).
var xxAsm func(on bool)

// xxPaths runs f with each of Sum's stripe loops in turn.
func xxPaths(t testing.TB, f func(path string)) {
	if xxAsm == nil {
		f("generic")
		return
	}
	defer xxAsm(true)
	for _, on := range []bool{false, true} {
		xxAsm(on)
		f(map[bool]string{false: "generic", true: "asm"}[on])
	}
}

// xxLengths are lengths around Sum's edges: every one up to 300 (lanes,
// stripes, the 4-byte and 1-byte tails) and both sides of larger multiples
// of the 16-byte stripe.
func xxLengths() []int {
	var ns []int
	for n := range 301 {
		ns = append(ns, n)
	}
	for _, base := range []int{1 << 10, 2560, 4 << 10, 32 << 10, 64 << 10} {
		for d := -17; d <= 17; d++ {
			ns = append(ns, base+d)
		}
	}
	return ns
}

func TestXXH32MatchesOld(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	lengths := xxLengths()
	maxLen := slices.Max(lengths)
	// Misaligned starts: inputs begin 0..15 bytes into their buffers.
	const skew = 16
	random := make([]byte, maxLen+skew)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	ones := bytes.Repeat([]byte{0xff}, maxLen+skew)
	text := textData(maxLen+skew, 3)
	seeds := []uint32{0, lz4Seed, 0xffffffff, rng.Uint32()}
	xxPaths(t, func(path string) {
		for _, n := range lengths {
			for _, in := range []struct {
				name string
				buf  []byte
			}{{"random", random}, {"0xff", ones}, {"text", text}} {
				off := n % skew
				p := in.buf[off : off+n]
				seed := seeds[n%len(seeds)]
				if got, want := Sum(p, seed), xxh32Old(p, seed); got != want {
					t.Fatalf("%s: Sum(%d %s bytes at offset %d, %#x) = %#08x, want %#08x", path, n, in.name, off, seed, got, want)
				}
			}
		}
	})
}

// TestXXH32Vectors checks both stripe loops against TestXXH32's vectors.
func TestXXH32Vectors(t *testing.T) {
	xxPaths(t, func(path string) {
		if !t.Run(path, TestXXH32) {
			t.Fatalf("%s: TestXXH32 failed", path)
		}
	})
}

func FuzzXXH32(f *testing.F) {
	f.Add([]byte(nil), uint32(0))
	f.Add([]byte("Nobody inspects the spammish repetition"), uint32(lz4Seed))
	f.Add(bytes.Repeat([]byte{0xff}, 67), uint32(0xffffffff))
	f.Fuzz(func(t *testing.T, p []byte, seed uint32) {
		want := xxh32Old(p, seed)
		xxPaths(t, func(path string) {
			if got := Sum(p, seed); got != want {
				t.Fatalf("%s: Sum(%d bytes, %#x) = %#08x, want %#08x", path, len(p), seed, got, want)
			}
		})
	})
}

// BenchmarkXXH32Impl compares Sum (impl=new, and impl=generic: its pure-Go
// stripe loop) with the previous one (impl=old) in one run.
func BenchmarkXXH32Impl(b *testing.B) {
	for _, sz := range []struct {
		name string
		n    int
	}{{"2.5KiB", 2560}, {"32KiB", 32 << 10}, {"1MiB", 1 << 20}} {
		data := textData(sz.n, 1)
		run := func(name string, f func([]byte, uint32) uint32) {
			b.Run(fmt.Sprintf("size=%s/impl=%s", sz.name, name), func(b *testing.B) {
				b.SetBytes(int64(sz.n))
				for b.Loop() {
					f(data, lz4Seed)
				}
			})
		}
		run("old", xxh32Old)
		if xxAsm != nil {
			xxAsm(false)
			run("generic", Sum)
			xxAsm(true)
		}
		run("new", Sum)
	}
}
