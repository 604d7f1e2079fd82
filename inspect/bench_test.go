package inspect

import (
	"context"
	"io"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
)

// BenchmarkInspect reads a lineitem map output (lz4, ADLER32, 16
// partitions, 50k rows) and reports throughput in decompressed bytes,
// without rows and printing every row.
func BenchmarkInspect(b *testing.B) {
	const n = 16
	o := writeBatches(b, shufflefile.Flat(b.TempDir()), codec.LZ4, checksum.Adler32, n, lineitem(b, 1, 50000, n))
	s, err := Inspect(context.Background(), o.src)
	if err != nil || s.Err() != nil {
		b.Fatal(err, s.Err())
	}
	for _, f := range []RowFormat{NoRows, CSV, JSON} {
		b.Run("rows="+f.String(), func(b *testing.B) {
			var opts []Option
			if f != NoRows {
				opts = append(opts, WithRows(f, io.Discard))
			}
			b.SetBytes(s.RawBytes)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Inspect(context.Background(), o.src, opts...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(s.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
