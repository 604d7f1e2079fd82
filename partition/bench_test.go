package partition_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

const benchRows = 1 << 20

var lineitem = sync.OnceValue(func() *partition.Batch {
	b, err := synth.Generate("lineitem", 1, benchRows)
	if err != nil {
		panic(err)
	}
	return b
})

// BenchmarkPartition measures the CPU partitioner on the lineitem batch,
// keyed by l_orderkey, in rows per second.
func BenchmarkPartition(b *testing.B) {
	in := lineitem()
	for _, parts := range []int{16, 200, 2000} {
		b.Run(fmt.Sprintf("schema=lineitem/partitions=%d", parts), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := partition.Partition(in, []int{0}, parts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(in.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkHashRows measures Spark hashing alone, in rows per second.
func BenchmarkHashRows(b *testing.B) {
	in := lineitem()
	hashes := make([]int32, in.Rows)
	for _, key := range []string{"l_orderkey", "l_comment"} {
		col := 0
		for i, c := range in.Columns {
			if c.Name == key {
				col = i
			}
		}
		b.Run("key="+key, func(b *testing.B) {
			for b.Loop() {
				partition.HashRows(in, []int{col}, hashes)
			}
			b.ReportMetric(float64(in.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkSerialize measures block serialization of every partition of a
// partitioned lineitem batch against a plain copy of the same bytes in the
// same chunks: op=serialize (AppendSlice into a reused buffer), op=write
// (WriteSlice into a reused in-memory writer) and op=copy share SetBytes,
// so their MB/s compare directly.
func BenchmarkSerialize(b *testing.B) {
	for _, nulls := range []float64{0, 0.05} {
		src, err := synth.Generate("lineitem", 1, benchRows, synth.WithNulls(nulls))
		if err != nil {
			b.Fatal(err)
		}
		const parts = 200
		in, err := partition.Partition(src, []int{0}, parts)
		if err != nil {
			b.Fatal(err)
		}
		total, largest := 0, 0
		for p := range parts {
			n := partition.SliceSize(in, p)
			total += n
			largest = max(largest, n)
		}
		flat := make([]byte, 0, total)
		for p := range parts {
			flat = partition.AppendSlice(flat, in, p)
		}
		name := fmt.Sprintf("schema=lineitem/nulls=%g/partitions=%d", nulls, parts)
		b.Run(name+"/op=serialize", func(b *testing.B) {
			dst := make([]byte, 0, largest)
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				for p := range parts {
					dst = partition.AppendSlice(dst[:0], in, p)
				}
			}
		})
		b.Run(name+"/op=write", func(b *testing.B) {
			w := &memWriter{buf: make([]byte, 0, largest)}
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				for p := range parts {
					w.buf = w.buf[:0]
					start, end := in.PartitionRows(p)
					if _, err := partition.WriteSlice(w, in, start, end); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(name+"/op=copy", func(b *testing.B) {
			dst := make([]byte, largest)
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				off := 0
				for p := range parts {
					n := partition.SliceSize(in, p)
					copy(dst[:n], flat[off:off+n])
					off += n
				}
			}
		})
	}
}

// memWriter appends to a buffer, as a compressor's input stage would.
type memWriter struct{ buf []byte }

func (w *memWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// BenchmarkValidate measures Batch.Validate, which every columnar batch
// passes before it is written, on a lineitem batch of the load
// generator's default size (100,000 rows) partitioned 200 ways; MB/s are
// of the batch's buffers.
func BenchmarkValidate(b *testing.B) {
	src, err := synth.Generate("lineitem", 1, 100_000)
	if err != nil {
		b.Fatal(err)
	}
	pb, err := partition.Partition(src, []int{0}, 200)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, c := range pb.Columns {
		n += int64(len(c.Data) + 4*len(c.Offsets) + len(c.Validity))
	}
	b.SetBytes(n)
	for b.Loop() {
		if err := pb.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
