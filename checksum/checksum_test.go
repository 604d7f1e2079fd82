package checksum

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"
)

var algorithms = []Algorithm{Adler32, CRC32, CRC32C}

// stdlib returns the standard library's checksum of p for a.
func stdlib(a Algorithm, p []byte) uint32 {
	switch a {
	case Adler32:
		return adler32.Checksum(p)
	case CRC32:
		return crc32.ChecksumIEEE(p)
	case CRC32C:
		return crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli))
	}
	panic(fmt.Sprintf("stdlib(%v)", a))
}

func randomBytes(rng *rand.Rand, n int) []byte {
	p := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(p[i:], rng.Uint64())
	}
	return p[:n]
}

func TestParseString(t *testing.T) {
	tests := []struct {
		in   string
		want Algorithm
	}{
		{"", None},
		{"none", None},
		{"NONE", None},
		{"ADLER32", Adler32},
		{"adler32", Adler32},
		{"CRC32", CRC32},
		{"crc32c", CRC32C},
		{"CRC32C", CRC32C},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if got != tt.want || err != nil {
			t.Errorf("Parse(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
	}
	for _, a := range algorithms {
		if got, err := Parse(a.String()); got != a || err != nil {
			t.Errorf("Parse(%q) = %v, %v; want %v, nil", a.String(), got, err, a)
		}
	}
	for _, in := range []string{"md5", "crc", "crc32cc", " ADLER32"} {
		if got, err := Parse(in); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("Parse(%q) = %v, %v; want an error naming %q", in, got, err, in)
		}
	}
	if got, want := Algorithm(9).String(), "Algorithm(9)"; got != want {
		t.Errorf("Algorithm(9).String() = %q, want %q", got, want)
	}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		a    Algorithm
		in   string
		want uint32
	}{
		{Adler32, "", 1},
		{CRC32, "", 0},
		{CRC32C, "", 0},
		{Adler32, "hello world", 0x1a0b045d},
		{CRC32, "hello world", 0x0d4a1185},
		{CRC32C, "hello world", 0xc99465aa},
	}
	for _, tt := range tests {
		if got := stdlib(tt.a, []byte(tt.in)); got != tt.want {
			t.Errorf("standard library %v(%q) = %#08x, want %#08x", tt.a, tt.in, got, tt.want)
		}
		if got := tt.a.Update(tt.a.Empty(), []byte(tt.in)); got != tt.want {
			t.Errorf("%v.Update(Empty, %q) = %#08x, want %#08x", tt.a, tt.in, got, tt.want)
		}
		h := tt.a.New()
		h.Write([]byte(tt.in))
		if got := h.Sum32(); got != tt.want {
			t.Errorf("%v.New() after %q: Sum32() = %#08x, want %#08x", tt.a, tt.in, got, tt.want)
		}
	}
	for _, a := range algorithms {
		if got, want := a.Empty(), stdlib(a, nil); got != want {
			t.Errorf("%v.Empty() = %#08x, want %#08x", a, got, want)
		}
	}
	if got := None.Update(None.Empty(), []byte("hello world")); got != 0 {
		t.Errorf("None.Update = %#08x, want 0", got)
	}
}

func TestUpdateMatchesStdlibInPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := randomBytes(rng, 100_000)
	for _, a := range algorithms {
		want := stdlib(a, p)
		sum := a.Empty()
		h := a.New()
		for q := p; len(q) > 0; {
			n := min(len(q), rng.IntN(9000))
			sum = a.Update(sum, q[:n])
			h.Write(q[:n])
			q = q[n:]
		}
		if sum != want {
			t.Errorf("%v.Update in pieces = %#08x, want %#08x", a, sum, want)
		}
		if got := h.Sum32(); got != want {
			t.Errorf("%v.New() written in pieces: Sum32() = %#08x, want %#08x", a, got, want)
		}
		wantSum := []byte{0xaa, byte(want >> 24), byte(want >> 16), byte(want >> 8), byte(want)}
		if got := h.Sum([]byte{0xaa}); !bytes.Equal(got, wantSum) {
			t.Errorf("%v.New().Sum(aa) = %x, want %x", a, got, wantSum)
		}
		h.Reset()
		if got := h.Sum32(); got != a.Empty() {
			t.Errorf("%v.New() after Reset: Sum32() = %#08x, want %#08x", a, got, a.Empty())
		}
		if h.Size() != 4 {
			t.Errorf("%v.New().Size() = %d, want 4", a, h.Size())
		}
	}
}

func TestNewPanicsOnNone(t *testing.T) {
	for _, a := range []Algorithm{None, Algorithm(7)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%v.New() did not panic", a)
				}
			}()
			a.New()
		}()
	}
}

func TestCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	lengths := []int{0, 1, 3, 4, 31, 32, 100, 4096, 5552, 65520, 65521, 65522, 1 << 20, 3<<20 + 7}
	const maxLen = 3<<20 + 7
	data := randomBytes(rng, 2*maxLen)
	for _, a := range algorithms {
		for _, lenA := range lengths {
			for _, lenB := range lengths {
				if lenA+lenB > 2<<20 && rng.IntN(4) != 0 {
					continue // a sample of the big pairs keeps -race fast
				}
				off := rng.IntN(maxLen - lenA + 1)
				A, B := data[off:off+lenA], data[off+lenA:off+lenA+lenB]
				sumA, sumB := a.Update(a.Empty(), A), a.Update(a.Empty(), B)
				want := stdlib(a, data[off:off+lenA+lenB])
				if got := a.Combine(sumA, sumB, int64(lenB)); got != want {
					t.Errorf("%v.Combine(sum of %d bytes, sum of %d bytes, %d) = %#08x, want %#08x", a, lenA, lenB, lenB, got, want)
				}
			}
		}
	}
}

func TestCombineRandomLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	data := randomBytes(rng, 1<<16)
	for _, a := range algorithms {
		for range 200 {
			lenA, lenB := rng.IntN(len(data)/2), rng.IntN(len(data)/2)
			A, B := data[:lenA], data[lenA:lenA+lenB]
			want := stdlib(a, data[:lenA+lenB])
			if got := a.Combine(stdlib(a, A), stdlib(a, B), int64(lenB)); got != want {
				t.Errorf("%v.Combine(sum of %d bytes, sum of %d bytes, %d) = %#08x, want %#08x", a, lenA, lenB, lenB, got, want)
			}
		}
	}
}

// TestCombineAssociative checks lengths far beyond what a test can hash:
// combining A, B, C as (A||B)||C or A||(B||C) must agree.
func TestCombineAssociative(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, a := range algorithms {
		for range 500 {
			var s [3]uint32
			for i := range s {
				s[i] = a.Update(a.Empty(), randomBytes(rng, 1+rng.IntN(16)))
			}
			lenB := rng.Int64N(1 << 61)
			lenC := rng.Int64N(1 << 61)
			left := a.Combine(a.Combine(s[0], s[1], lenB), s[2], lenC)
			right := a.Combine(s[0], a.Combine(s[1], s[2], lenC), lenB+lenC)
			if left != right {
				t.Fatalf("%v: (A||B)||C = %#08x, A||(B||C) = %#08x with lenB %d, lenC %d", a, left, right, lenB, lenC)
			}
		}
	}
}

func TestCombineEdges(t *testing.T) {
	if got := None.Combine(1, 2, 3); got != 0 {
		t.Errorf("None.Combine = %#08x, want 0", got)
	}
	for _, a := range algorithms {
		sumA := a.Update(a.Empty(), []byte("hello"))
		if got := a.Combine(sumA, a.Empty(), 0); got != sumA {
			t.Errorf("%v.Combine(sumA, Empty, 0) = %#08x, want %#08x", a, got, sumA)
		}
		if got := a.Combine(a.Empty(), sumA, 5); got != sumA {
			t.Errorf("%v.Combine(Empty, sumB, 5) = %#08x, want %#08x", a, got, sumA)
		}
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "-1") {
					t.Errorf("%v.Combine(lenB -1) panic = %v, want one naming -1", a, r)
				}
			}()
			a.Combine(0, 0, -1)
		}()
	}
}

// mulBitwise is a·b mod P one bit at a time, the definition mul must match.
func mulBitwise(a, b, poly uint32) uint32 {
	var p uint32
	for m := uint32(xPow0); m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		// b·x: shift towards higher degree, reduce the x^32 term.
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

func TestGFMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tt := range []struct {
		g    *gf32
		poly uint32
	}{{ieeeGF, crc32.IEEE}, {castagnoliGF, crc32.Castagnoli}} {
		for range 2000 {
			a, b := rng.Uint32(), rng.Uint32()
			if got, want := tt.g.mul(a, b), mulBitwise(a, b, tt.poly); got != want {
				t.Fatalf("poly %#08x: mul(%#08x, %#08x) = %#08x, want %#08x", tt.poly, a, b, got, want)
			}
		}
		// x^(8n) by repeated multiplication by x^8 through the byte table.
		p := uint32(xPow0)
		for n := range uint64(600) {
			if got := tt.g.xPow8n(n); got != p {
				t.Fatalf("poly %#08x: xPow8n(%d) = %#08x, want %#08x", tt.poly, n, got, p)
			}
			p = tt.g.shift8[p&0xff] ^ p>>8
		}
	}
}

var sizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}}

func BenchmarkUpdate(b *testing.B) {
	for _, a := range algorithms {
		for _, sz := range sizes {
			p := randomBytes(rand.New(rand.NewPCG(1, 1)), sz.n)
			b.Run(fmt.Sprintf("alg=%v/size=%s", a, sz.name), func(b *testing.B) {
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				sum := a.Empty()
				for b.Loop() {
					sum = a.Update(sum, p)
				}
			})
		}
	}
	// The standard library's Adler-32, for comparison.
	for _, sz := range sizes {
		p := randomBytes(rand.New(rand.NewPCG(1, 1)), sz.n)
		b.Run(fmt.Sprintf("alg=stdlib-ADLER32/size=%s", sz.name), func(b *testing.B) {
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for b.Loop() {
				adler32.Checksum(p)
			}
		})
	}
}

func BenchmarkCombine(b *testing.B) {
	for _, a := range algorithms {
		for _, lenB := range []struct {
			name string
			n    int64
		}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"1000003", 1000003}, {"1TiB-1", 1<<40 - 1}} {
			b.Run(fmt.Sprintf("alg=%v/lenB=%s", a, lenB.name), func(b *testing.B) {
				b.ReportAllocs()
				sum := a.Empty()
				for b.Loop() {
					sum = a.Combine(sum, 0x12345678, lenB.n)
				}
			})
		}
	}
}
