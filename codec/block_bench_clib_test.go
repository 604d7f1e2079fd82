//go:build clib

package codec

import (
	"bytes"
	"testing"

	"github.com/pierrec/lz4/v4"
)

func init() {
	lz4Impls = append(lz4Impls, blockCompressor{"c", func() func(dst, src []byte) int {
		return func(dst, src []byte) int { return cLZ4Compress(src, dst) }
	}})
}

// TestLZ4BlockMatchesLibLZ4 checks the block compressor against liblz4's
// LZ4_compress_default itself.
func TestLZ4BlockMatchesLibLZ4(t *testing.T) {
	var c lz4Compressor
	for name, src := range blockInputs(t) {
		bound := lz4.CompressBlockBound(len(src))
		want := make([]byte, bound)
		wn := cLZ4Compress(src, want)
		got := make([]byte, bound)
		n := c.compress(got, src)
		if wn == 0 || !bytes.Equal(got[:n], want[:wn]) {
			t.Errorf("%s: compress = %d bytes, LZ4_compress_default = %d, bytes differ", name, n, wn)
		}
	}
}

func init() {
	zstdImpls = append(zstdImpls, zstdImpl{"c", func(tb testing.TB) func(dst, src []byte) []byte {
		z, err := newCZstd(DefaultLevel)
		if err != nil {
			tb.Fatal(err)
		}
		return func(dst, src []byte) []byte {
			out, err := z.compress(dst, src)
			if err != nil {
				tb.Fatal(err)
			}
			return out
		}
	}})
}

// TestZstdLibDecodes checks that our decoder reads libzstd's frames and
// libzstd's reference compressor runs at the level the benchmark uses.
func TestZstdLibDecodes(t *testing.T) {
	z, err := newCZstd(DefaultLevel)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range blockInputs(t) {
		frame, err := z.compress(nil, src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := Decode(Zstd, nil, frame)
		if err != nil || !bytes.Equal(got, src) {
			t.Errorf("%s: Decode(libzstd frame) = %d bytes, %v; want the %d input bytes", name, len(got), err, len(src))
		}
	}
}
