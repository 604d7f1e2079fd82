package codec

import (
	"fmt"
	"sync"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

// benchCorpus is what the block benchmarks compress: the load generator's
// default bytes (a lineitem batch of 100 000 rows hashed into 200
// partitions, each partition's slice serialized as the opaque payload
// carries it) and text lines.
var benchCorpus = sync.OnceValues(func() (map[string][]byte, error) {
	b, err := synth.Generate("lineitem", 1, 100_000)
	if err != nil {
		return nil, err
	}
	pb, err := partition.Partition(b, []int{0}, 200)
	if err != nil {
		return nil, err
	}
	var opaque []byte
	for p := range 200 {
		opaque = partition.AppendSlice(opaque, pb, p)
	}
	return map[string][]byte{"lineitem": opaque, "text": textData(len(opaque), 7)}, nil
})

func corpus(tb testing.TB, name string) []byte {
	tb.Helper()
	c, err := benchCorpus()
	if err != nil {
		tb.Fatal(err)
	}
	return c[name]
}

// blockCompressor compresses one LZ4 block of src into dst, which has room
// for lz4.CompressBlockBound(len(src)), and returns its length.
type blockCompressor struct {
	name string
	new  func() func(dst, src []byte) int
}

var lz4Impls = []blockCompressor{
	{"go", func() func(dst, src []byte) int {
		var c lz4Compressor
		return c.compress
	}},
	{"pierrec", func() func(dst, src []byte) int {
		var c lz4.CompressorCCompat
		return func(dst, src []byte) int {
			n, _ := c.CompressBlock(src, dst)
			return n
		}
	}},
}

// BenchmarkLZ4Block compresses the corpus in 32 KiB blocks, as the lz4
// encoder cuts them, with each block compressor: the pure-Go one (go),
// pierrec's port of LZ4_compress_default (pierrec) and, in an lz4c build,
// liblz4's LZ4_compress_default itself (c). Compare with
// benchstat -col /impl.
func BenchmarkLZ4Block(b *testing.B) {
	for _, data := range []string{"lineitem", "text"} {
		for _, impl := range lz4Impls {
			b.Run(fmt.Sprintf("data=%s/impl=%s", data, impl.name), func(b *testing.B) {
				src := corpus(b, data)
				compress := impl.new()
				dst := make([]byte, lz4.CompressBlockBound(DefaultBlockSize))
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				var out int
				for b.Loop() {
					out = 0
					for q := src; len(q) > 0; q = q[min(len(q), DefaultBlockSize):] {
						out += compress(dst, q[:min(len(q), DefaultBlockSize)])
					}
				}
				b.ReportMetric(float64(len(src))/float64(out), "ratio")
			})
		}
	}
}
