package writer_test

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

var (
	ceilingBytes = flag.Int64("ceiling.bytes", 14_500_000, "BenchmarkPageCacheCeiling: a map output's data file, in bytes (the default: the GPU workload's compressed output a task)")
	ceilingDir   = flag.String("ceiling.dir", "", "BenchmarkPageCacheCeiling: the directory it writes under (empty: the test's temporary one)")
)

// BenchmarkPageCacheCeiling is the node's write ceiling that the daemon's
// end-to-end speed is measured against (docs/benchmarks.md, "against the
// goals"): how fast the bytes of finished map outputs reach the page cache
// from -test.cpu writers at once, with no codec, no checksum and no GPU.
// Each iteration is one map output as a commit leaves it: a temporary data
// file of -ceiling.bytes written in chunks of the given size (the bytes
// are already random: nothing is computed), a temporary index file of 201
// offsets, both renamed to their final names. The files stay until the
// benchmark ends, as a run's map outputs do. Throughput (MB/s) is of the
// data bytes; the CPU seconds per GB written are reported beside it.
//
//	go test -run '^$' -bench PageCacheCeiling -cpu 16 -benchtime 2000x ./writer/
func BenchmarkPageCacheCeiling(b *testing.B) {
	size := *ceilingBytes
	if size < 1 {
		b.Fatalf("-ceiling.bytes must be >= 1, got %d", size)
	}
	for _, chunk := range []int{256 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			dir := *ceilingDir
			if dir == "" {
				dir = b.TempDir()
			} else {
				d, err := os.MkdirTemp(dir, "ceiling-")
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { os.RemoveAll(d) })
				dir = d
			}
			buf := make([]byte, chunk)
			if _, err := rand.Read(buf); err != nil {
				b.Fatal(err)
			}
			index := make([]byte, 8*201)
			for p := range 201 {
				binary.BigEndian.PutUint64(index[8*p:], uint64(int64(p)*size/200))
			}
			var seq atomic.Int64
			cpu0 := cpuTime()
			b.SetBytes(size)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := writeMapOutput(dir, seq.Add(1), buf, size, index); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			gb := float64(size) * float64(b.N) / 1e9
			b.ReportMetric((cpuTime()-cpu0).Seconds()/gb, "cpu-s/GB")
		})
	}
}

// writeMapOutput writes map output n under dir as a commit leaves one:
// data and index files written under temporary names, then renamed.
func writeMapOutput(dir string, n int64, chunk []byte, size int64, index []byte) error {
	data := filepath.Join(dir, fmt.Sprintf("shuffle_0_%d_0.data", n))
	idx := filepath.Join(dir, fmt.Sprintf("shuffle_0_%d_0.index", n))
	f, err := os.OpenFile(data+".tmp", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	for left := size; left > 0; {
		c := chunk[:min(int64(len(chunk)), left)]
		if _, err := f.Write(c); err != nil {
			f.Close()
			return err
		}
		left -= int64(len(c))
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(idx+".tmp", index, 0o644); err != nil {
		return err
	}
	if err := os.Rename(idx+".tmp", idx); err != nil {
		return err
	}
	return os.Rename(data+".tmp", data)
}
