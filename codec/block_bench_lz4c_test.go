//go:build lz4c

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
