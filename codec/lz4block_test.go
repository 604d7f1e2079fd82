package codec

import (
	"bytes"
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
// it with lz4.c), with room for the bound and with just too little room,
// and that a reused compressor writes what a fresh one does.
func TestLZ4BlockMatchesReference(t *testing.T) {
	var c lz4Compressor
	var ref lz4.CompressorCCompat
	for name, src := range blockInputs(t) {
		bound := lz4.CompressBlockBound(len(src))
		want := make([]byte, bound)
		wn, err := ref.CompressBlock(src, want)
		if err != nil || wn == 0 {
			t.Fatalf("%s: reference CompressBlock = %d, %v", name, wn, err)
		}
		want = want[:wn]
		for _, room := range []int{bound, wn, wn - 1} {
			dst := make([]byte, room)
			n := c.compress(dst, src)
			switch {
			case room < wn && n != 0:
				t.Errorf("%s: compress into %d bytes = %d, want 0 (the block is %d bytes)", name, room, n, wn)
			case room >= wn && !bytes.Equal(dst[:n], want):
				t.Errorf("%s: compress into %d bytes = %d bytes, differ from the reference's %d", name, room, n, wn)
			}
		}
		out := make([]byte, len(src))
		if k, err := lz4.UncompressBlock(want, out); err != nil || !bytes.Equal(out[:k], src) {
			t.Errorf("%s: block does not decode to its input (%d bytes, %v)", name, k, err)
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
		want := make([]byte, lz4.CompressBlockBound(len(src)))
		wn, _ := ref.CompressBlock(src, want)
		got := make([]byte, len(want))
		n := c.compress(got, src)
		if !bytes.Equal(got[:n], want[:wn]) {
			t.Fatalf("compress(%d bytes) = %d bytes, differ from the reference's %d", len(src), n, wn)
		}
		// Too little room: no block, never a write past dst.
		if wn > 1 {
			short := make([]byte, wn-1, wn+64)
			if n := c.compress(short, src); n != 0 {
				t.Fatalf("compress into %d bytes = %d, want 0", wn-1, n)
			}
			if tail := short[wn-1 : wn+64]; !bytes.Equal(tail, make([]byte, len(tail))) {
				t.Fatalf("compress into %d bytes wrote past it", wn-1)
			}
		}
	})
}
