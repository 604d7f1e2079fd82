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
