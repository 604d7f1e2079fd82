package partition_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

// BenchmarkKudo measures kudo serialization of every partition of a
// partitioned lineitem batch against the block format and a plain copy:
// op=kudo (AppendKudo into a reused buffer), op=kudo-write (WriteKudo into
// a reused in-memory writer, as the daemon feeds its compressor) and
// op=copy (copy of the same kudo bytes, in the same chunks) share SetBytes
// (the kudo bytes), so their MB/s compare directly; op=shfc (AppendSlice)
// counts its own, larger, bytes. op=kudo-vs-copy alternates them within
// each iteration and reports the throughput ratios (goal: >= 0.9).
func BenchmarkKudo(b *testing.B) {
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
		kudoTotal, shfcTotal, largest := 0, 0, 0
		for p := range parts {
			start, end := in.PartitionRows(p)
			n := partition.KudoSize(in, start, end)
			kudoTotal += n
			shfcTotal += partition.SliceSize(in, p)
			largest = max(largest, n, partition.SliceSize(in, p))
		}
		flat := make([]byte, 0, kudoTotal)
		for p := range parts {
			start, end := in.PartitionRows(p)
			flat = partition.AppendKudo(flat, in, start, end)
		}
		name := fmt.Sprintf("schema=lineitem/nulls=%g/partitions=%d", nulls, parts)
		b.Run(name+"/op=kudo", func(b *testing.B) {
			dst := make([]byte, 0, largest)
			b.SetBytes(int64(kudoTotal))
			b.ReportAllocs()
			for b.Loop() {
				for p := range parts {
					start, end := in.PartitionRows(p)
					dst = partition.AppendKudo(dst[:0], in, start, end)
				}
			}
		})
		b.Run(name+"/op=kudo-write", func(b *testing.B) {
			w := &memWriter{buf: make([]byte, 0, largest)}
			b.SetBytes(int64(kudoTotal))
			b.ReportAllocs()
			for b.Loop() {
				for p := range parts {
					w.buf = w.buf[:0]
					start, end := in.PartitionRows(p)
					if _, err := partition.WriteKudo(w, in, start, end); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(name+"/op=copy", func(b *testing.B) {
			dst := make([]byte, largest)
			b.SetBytes(int64(kudoTotal))
			b.ReportAllocs()
			for b.Loop() {
				off := 0
				for p := range parts {
					start, end := in.PartitionRows(p)
					n := partition.KudoSize(in, start, end)
					copy(dst[:n], flat[off:off+n])
					off += n
				}
			}
		})
		// kudo (AppendKudo, then WriteKudo) and copy alternating, each
		// timed: the ratios of their throughputs, robust to the drift of
		// a shared machine.
		b.Run(name+"/op=kudo-vs-copy", func(b *testing.B) {
			dst := make([]byte, 0, largest)
			w := &memWriter{buf: make([]byte, 0, largest)}
			var appendTime, writeTime, copyTime time.Duration
			for b.Loop() {
				t0 := time.Now()
				for p := range parts {
					start, end := in.PartitionRows(p)
					dst = partition.AppendKudo(dst[:0], in, start, end)
				}
				t1 := time.Now()
				for p := range parts {
					w.buf = w.buf[:0]
					start, end := in.PartitionRows(p)
					if _, err := partition.WriteKudo(w, in, start, end); err != nil {
						b.Fatal(err)
					}
				}
				t2 := time.Now()
				off := 0
				for p := range parts {
					start, end := in.PartitionRows(p)
					n := partition.KudoSize(in, start, end)
					dst = append(dst[:0], flat[off:off+n]...)
					off += n
				}
				appendTime += t1.Sub(t0)
				writeTime += t2.Sub(t1)
				copyTime += time.Since(t2)
			}
			b.ReportMetric(copyTime.Seconds()/appendTime.Seconds(), "append/copy")
			b.ReportMetric(copyTime.Seconds()/writeTime.Seconds(), "write/copy")
		})
		b.Run(name+"/op=shfc", func(b *testing.B) {
			dst := make([]byte, 0, largest)
			b.SetBytes(int64(shfcTotal))
			b.ReportAllocs()
			for b.Loop() {
				for p := range parts {
					dst = partition.AppendSlice(dst[:0], in, p)
				}
			}
		})
	}
}
