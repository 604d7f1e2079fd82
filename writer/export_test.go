package writer

import (
	"sync"
	"testing"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

// For the benchmarks of package writer_test.
var (
	LineitemBatch  = lineitemBatch
	SerializedSize = serializedSize
)

// benchRows is the rows of the lineitem-like batch a benchmark map task
// writes per run: about 8 MiB serialized.
const benchRows = 64 << 10

var benchBatches sync.Map // partitions → *partition.Batch

// lineitemBatch returns the deterministic lineitem-like batch, hash
// partitioned on l_orderkey into n partitions.
func lineitemBatch(tb testing.TB, n int) *partition.Batch {
	if b, ok := benchBatches.Load(n); ok {
		return b.(*partition.Batch)
	}
	raw, err := synth.Generate("lineitem", 42, benchRows)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := partition.Partition(raw, []int{0}, n)
	if err != nil {
		tb.Fatal(err)
	}
	benchBatches.Store(n, b)
	return b
}

func serializedSize(b *partition.Batch) int64 {
	var n int64
	for p := range b.NumPartitions() {
		n += int64(partition.SliceSize(b, p))
	}
	return n
}
