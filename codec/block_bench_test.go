package codec

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

// benchCorpus is what the block benchmarks compress: the load generator's
// default bytes (a lineitem batch of 100 000 rows hashed into 200
// partitions, each partition's slice serialized as the opaque payload
// carries it) and text lines; and, when CODEC_BENCH_FILE names a file (a
// batch-<j>.bin of shuffled-loadgen --dump-input, for the JVM's CodecBench
// on the same bytes), that file's bytes as "file".
var benchCorpus = sync.OnceValues(func() (map[string][]byte, error) {
	c, err := genCorpus()
	if err != nil {
		return nil, err
	}
	if name := os.Getenv("CODEC_BENCH_FILE"); name != "" {
		if c["file"], err = os.ReadFile(name); err != nil {
			return nil, fmt.Errorf("CODEC_BENCH_FILE: %w", err)
		}
	}
	return c, nil
})

func benchData() []string {
	if os.Getenv("CODEC_BENCH_FILE") != "" {
		return []string{"lineitem", "text", "file"}
	}
	return []string{"lineitem", "text"}
}

func genCorpus() (map[string][]byte, error) {
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
}

func corpus(tb testing.TB, name string) []byte {
	tb.Helper()
	c, err := benchCorpus()
	if err != nil {
		tb.Fatal(err)
	}
	return c[name]
}

// cpuMeter reports, besides the wall-clock figures, the input MB per
// second of the benchmark goroutine's own CPU time (cpu-MB/s): on a shared
// machine, time slices lost to other processes do not count.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
	ok    bool
}

func startCPU(b *testing.B) *cpuMeter {
	runtime.LockOSThread()
	m := &cpuMeter{b: b}
	m.start, m.ok = threadCPU()
	return m
}

func (m *cpuMeter) stop(bytesPerOp int) {
	end, ok := threadCPU()
	runtime.UnlockOSThread()
	if m.ok && ok && end > m.start {
		m.b.ReportMetric(float64(bytesPerOp)*float64(m.b.N)/1e6/(end-m.start).Seconds(), "cpu-MB/s")
	}
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
// pierrec's port of LZ4_compress_default (pierrec) and, in a clib build,
// liblz4's LZ4_compress_default itself (c). Compare with
// benchstat -col /impl.
func BenchmarkLZ4Block(b *testing.B) {
	for _, data := range benchData() {
		for _, impl := range lz4Impls {
			b.Run(fmt.Sprintf("data=%s/impl=%s", data, impl.name), func(b *testing.B) {
				src := corpus(b, data)
				compress := impl.new()
				dst := make([]byte, lz4.CompressBlockBound(DefaultBlockSize))
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				var out int
				m := startCPU(b)
				for b.Loop() {
					out = 0
					for q := src; len(q) > 0; q = q[min(len(q), DefaultBlockSize):] {
						out += compress(dst, q[:min(len(q), DefaultBlockSize)])
					}
				}
				m.stop(len(src))
				b.ReportMetric(float64(len(src))/float64(out), "ratio")
			})
		}
	}
}

// zstdImpl compresses one record into a zstd frame appended to dst.
type zstdImpl struct {
	name string
	new  func(tb testing.TB) func(dst, src []byte) []byte
}

var zstdImpls = []zstdImpl{
	{"go", func(tb testing.TB) func(dst, src []byte) []byte {
		enc, err := newGoZstd(DefaultLevel)
		if err != nil {
			tb.Fatal(err)
		}
		return func(dst, src []byte) []byte { return enc.EncodeAll(src, dst) }
	}},
}

// BenchmarkZstdRecord compresses the corpus in records of 64 KiB (about a
// partition's slice of a 100 000-row batch at 200 partitions), one frame
// each at level 1: klauspost/compress, the default build's encoder (go),
// and, in a clib build, libzstd's ZSTD_compress2 (c), the C that zstd-jni
// calls and the clib build's encoder.
func BenchmarkZstdRecord(b *testing.B) {
	const record = 64 << 10
	for _, data := range benchData() {
		for _, impl := range zstdImpls {
			b.Run(fmt.Sprintf("data=%s/impl=%s", data, impl.name), func(b *testing.B) {
				src := corpus(b, data)
				compress := impl.new(b)
				dst := make([]byte, 0, 2*record)
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				var out int
				m := startCPU(b)
				for b.Loop() {
					out = 0
					for q := src; len(q) > 0; q = q[min(len(q), record):] {
						dst = compress(dst[:0], q[:min(len(q), record)])
						out += len(dst)
					}
				}
				m.stop(len(src))
				b.ReportMetric(float64(len(src))/float64(out), "ratio")
			})
		}
	}
}
