package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// blockInputs are inputs for the block compressor: the benchmark corpora
// cut at sizes around its limits, runs, and incompressible bytes.
func blockInputs(t testing.TB) map[string][]byte {
	in := map[string][]byte{
		"one":      {'x'},
		"short":    []byte("hello world"),
		"min-1":    bytes.Repeat([]byte{'a'}, lz4MinLength-1),
		"min":      bytes.Repeat([]byte{'a'}, lz4MinLength),
		"zeros":    make([]byte, DefaultBlockSize),
		"random":   randomData(DefaultBlockSize, 3),
		"period-3": bytes.Repeat([]byte("abc"), 20000),
		"u16-1":    textData(lz4U16Limit-1, 4),
		"u16":      textData(lz4U16Limit, 5),
		"large":    textData(1<<20, 6),
	}
	for i, b := range blockShapes() {
		in[fmt.Sprintf("shape-%d", i)] = b
	}
	for _, name := range []string{"lineitem", "text"} {
		c := corpus(t, name)
		for _, n := range []int{100, 4096, DefaultBlockSize - 1, DefaultBlockSize, 64 << 10} {
			in[fmt.Sprintf("%s-%d", name, n)] = c[len(c)/3 : len(c)/3+n]
		}
	}
	return in
}

// TestLZ4BlockMatchesReference checks that the block compressor writes the
// bytes of pierrec's port of LZ4_compress_default (whose own tests compare
// it with lz4.c), that it refuses a destination shorter than the bound, and
// that a reused compressor writes what a fresh one does.
func TestLZ4BlockMatchesReference(t *testing.T) {
	var c lz4Compressor
	var ref lz4.CompressorCCompat
	for name, src := range blockInputs(t) {
		bound := lz4Bound(len(src))
		if bound != lz4.CompressBlockBound(len(src)) {
			t.Fatalf("%s: lz4Bound(%d) = %d, want %d", name, len(src), bound, lz4.CompressBlockBound(len(src)))
		}
		want := make([]byte, bound)
		wn, err := ref.CompressBlock(src, want)
		if err != nil || wn == 0 {
			t.Fatalf("%s: reference CompressBlock = %d, %v", name, wn, err)
		}
		want = want[:wn]
		dst := make([]byte, bound)
		if n := c.compress(dst, src); !bytes.Equal(dst[:n], want) {
			t.Errorf("%s: compress = %d bytes, differ from the reference's %d", name, n, wn)
		}
		if n := c.compress(dst[:bound-1], src); n != 0 {
			t.Errorf("%s: compress into %d bytes (bound %d) = %d, want 0", name, bound-1, bound, n)
		}
		out := make([]byte, len(src))
		if k, err := lz4.UncompressBlock(want, out); err != nil || !bytes.Equal(out[:k], src) {
			t.Errorf("%s: block does not decode to its input (%d bytes, %v)", name, k, err)
		}
	}
}

// refLZ4Stream is an lz4 stream as LZ4BlockOutputStream writes it, built
// from the reference compressor: each block compressed with room for the
// bound, stored raw unless the result is smaller than the block.
func refLZ4Stream(src []byte, blockSize int) []byte {
	var ref lz4.CompressorCCompat
	var out []byte
	for len(src) > 0 {
		blk := src[:min(len(src), blockSize)]
		src = src[len(blk):]
		comp := make([]byte, lz4.CompressBlockBound(len(blk)))
		n, _ := ref.CompressBlock(blk, comp)
		method, payload := byte(lz4MethodLZ4), comp[:n]
		if n == 0 || n >= len(blk) {
			method, payload = lz4MethodRaw, blk
		}
		var h [lz4HeaderLen]byte
		copy(h[:], lz4Magic)
		h[8] = method | lz4Level(blockSize)
		binary.LittleEndian.PutUint32(h[9:], uint32(len(payload)))
		binary.LittleEndian.PutUint32(h[13:], uint32(len(blk)))
		binary.LittleEndian.PutUint32(h[17:], LZ4Checksum(blk))
		out = append(append(out, h[:]...), payload...)
	}
	var end [lz4HeaderLen]byte
	copy(end[:], lz4Magic)
	end[8] = lz4MethodRaw | lz4Level(blockSize)
	return append(out, end[:]...)
}

// TestLZ4EncoderRawDecision checks the encoder against LZ4BlockOutputStream's
// rule on inputs around the point where blocks stop shrinking (random bytes
// with growing runs), with an output buffer that has room for the
// compressor's bound and one that has not (the scratch path).
func TestLZ4EncoderRawDecision(t *testing.T) {
	for _, bs := range []int{64, 1024, DefaultBlockSize} {
		enc := mustEncoder(t, LZ4, WithBlockSize(bs))
		for run := 0; run <= 16; run += 2 {
			src := randomData(4*bs+7, uint64(run))
			for i := 0; i+run < len(src); i += 2 * max(run, 1) {
				for j := 1; j < run; j++ {
					src[i+j] = src[i]
				}
			}
			want := refLZ4Stream(src, bs)
			for _, dst := range [][]byte{nil, make([]byte, 0, 2*len(want)+8*lz4Bound(bs))} {
				if got := enc.Encode(dst, src); !bytes.Equal(got, want) {
					t.Errorf("block size %d, runs %d, dst cap %d: stream of %d bytes differs from LZ4BlockOutputStream's %d", bs, run, cap(dst), len(got), len(want))
				}
			}
		}
	}
}

func FuzzLZ4Block(f *testing.F) {
	f.Add([]byte("hello hello hello hello world"))
	f.Add(textData(3000, 1))
	f.Add(bytes.Repeat([]byte{0, 1}, 100))
	var c lz4Compressor
	var ref lz4.CompressorCCompat
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) == 0 {
			return
		}
		bound := lz4Bound(len(src))
		want := make([]byte, bound)
		wn, _ := ref.CompressBlock(src, want)
		// The compressor writes nothing past the bound.
		got := make([]byte, bound, bound+64)
		n := c.compress(got, src)
		if !bytes.Equal(got[:n], want[:wn]) {
			t.Fatalf("compress(%d bytes) = %d bytes, differ from the reference's %d", len(src), n, wn)
		}
		if tail := got[bound : bound+64]; !bytes.Equal(tail, make([]byte, len(tail))) {
			t.Fatalf("compress of %d bytes wrote past its bound %d", len(src), bound)
		}
	})
}

// blockShapes are inputs at the block format's thresholds: literal runs
// and matches of lengths around where the token's nibble and each length
// byte run out (15, 15 + 255, 15 + 4*255), matches at the largest offset a
// block allows, and every input length from 1 to 300.
func blockShapes() [][]byte {
	var in [][]byte
	for n := 1; n <= 300; n++ {
		in = append(in, textData(n, uint64(n)))
	}
	rng := uint64(7)
	next := func(k int) int {
		rng = rng*6364136223846793005 + 1442695040888963407
		return int(rng>>33) % k
	}
	for _, lit := range []int{0, 1, 14, 15, 16, 269, 270, 271, 600} {
		for _, m := range []int{4, 18, 19, 20, 273, 274, 1038, 1039, 1040, 3000} {
			b := randomData(16, uint64(lit))
			for len(b) < DefaultBlockSize {
				fresh := randomData(lit, uint64(len(b)))
				b = append(b, fresh...)
				from := max(0, len(b)-next(4096)-m)
				for i := 0; i < m && len(b) < DefaultBlockSize; i++ {
					b = append(b, b[from+i])
				}
			}
			in = append(in, b)
		}
	}
	// Matches 65 535 bytes back, the offset's limit, in a block just under
	// the byU16 table's limit.
	far := randomData(lz4U16Limit-1, 11)
	copy(far[65535:], far[:lz4U16Limit-1-65535])
	return append(in, far, randomData(lz4U16Limit-1, 12), make([]byte, lz4U16Limit-1))
}
