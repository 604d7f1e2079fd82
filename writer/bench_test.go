package writer

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/shufflefile"
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

// BenchmarkWrite writes one map task of runs batches per iteration, through
// the streaming writer, the legacy writer (a file per partition, then a
// sequential concatenation) and the compression ceiling (the same records
// encoded on the same pool into nowhere). Throughput is of the uncompressed
// serialized input.
func BenchmarkWrite(b *testing.B) {
	for _, mode := range []Mode{Stream, Legacy, Ceiling} {
		for _, k := range []codec.Kind{codec.LZ4, codec.Zstd} {
			for _, runs := range []int{1, 4} {
				for _, n := range []int{200, 2000} {
					name := fmt.Sprintf("mode=%v/codec=%v/runs=%d/partitions=%d", mode, k, runs, n)
					b.Run(name, func(b *testing.B) { benchWrite(b, mode, k, runs, n) })
				}
			}
		}
	}
}

func benchWrite(b *testing.B, mode Mode, k codec.Kind, runs, n int) {
	batch := lineitemBatch(b, n)
	e, err := New()
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	dir := b.TempDir()
	ctx := context.Background()
	b.SetBytes(int64(runs) * serializedSize(batch))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: int64(i)}, NumPartitions: n, Codec: k, Checksum: checksum.Adler32,
			Layout: shufflefile.Flat(dir), Mode: mode}
		w, err := e.Open(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		for range runs {
			if err := w.WriteBatch(ctx, batch, nil); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		if mode != Ceiling {
			b.StopTimer()
			for _, name := range []string{shufflefile.DataName(spec.ID), shufflefile.IndexName(spec.ID), shufflefile.ChecksumName(spec.ID, spec.Checksum)} {
				if err := os.Remove(shufflefile.Path(spec.Layout, name)); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	}
}
