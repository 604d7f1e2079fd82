//go:build cuda

package server

import (
	"path/filepath"
	"testing"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// TestCUDAIPCKudo: a GPU executor partitions a batch with a column of
// every type on the device and hands it over by CUDA IPC to a kudo map
// output; the daemon makes the kudo tables (on the GPU, as by default;
// TestCUDACompressFormats covers the CPU path too). Every partition decodes to the host partitioner's rows, in
// order, each table aligned as spark-rapids reads it.
func TestCUDAIPCKudo(t *testing.T) {
	openDevice(t)
	leakcheck.Check(t)
	d := startDaemon(t, func(c *Config) { c.LimitBytes = 64 << 20 })
	const rows, parts = 30_000, 16
	runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "columnar", Format: "kudo", Schema: "types", Seed: 5,
		Rows: rows, Partitions: parts, Outputs: 1, Shuffle: 3})
	raw, err := synth.Generate("types", 5, rows, synth.WithNulls(0.05))
	if err != nil {
		t.Fatal(err)
	}
	want, err := partition.Partition(raw, []int{0}, parts)
	if err != nil {
		t.Fatal(err)
	}
	got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "gpu", "1")), shufflefile.ID{Shuffle: 3, Map: 0}, codec.LZ4)
	checkKudoPartitions(t, got, want, parts)
}

// TestCUDAIPCKudoNested: a batch of nested and void columns, partitioned
// on the host and handed over by CUDA IPC to a kudo map output, compressed
// on the GPU: every partition decodes to the partitioned batch's rows,
// values and nulls at every level, each table aligned.
func TestCUDAIPCKudoNested(t *testing.T) {
	openDevice(t)
	leakcheck.Check(t)
	d := startDaemon(t, func(c *Config) { c.LimitBytes = 64 << 20 })
	const rows, parts = 30_000, 16
	raw0 := d.s.planes.Totals().CompressedRaw
	runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "columnar", Format: "kudo", Nested: nestedCUDASchema, Seed: 9,
		Rows: rows, Partitions: parts, Outputs: 1, Shuffle: 3})
	want, err := nestedJobBatch(nestedCUDASchema, 9, rows, parts)
	if err != nil {
		t.Fatal(err)
	}
	got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "gpu", "1")), shufflefile.ID{Shuffle: 3, Map: 0}, codec.LZ4)
	checkKudoPartitions(t, got, want, parts)
	var rawBytes int64
	for p := range parts {
		rawBytes += int64(len(got[p]))
	}
	if g := d.s.planes.Totals().CompressedRaw - raw0; g != rawBytes {
		t.Errorf("the GPU compressed %d raw bytes, want all %d (no fallback to the CPU)", g, rawBytes)
	}
}

// checkKudoPartitions asserts each of the parts partitions of got decodes
// to want's rows of that partition, in order, each table aligned and
// starting where the one before it ended.
func checkKudoPartitions(t *testing.T, got [][]byte, want *partition.Batch, parts int) {
	t.Helper()
	for p := range parts {
		tabs, err := partition.DecodeKudoTables(got[p], partition.SchemaOf(want))
		if err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
		checkTables(t, got[p], tabs)
		start, end := want.PartitionRows(p)
		r := start
		for _, tab := range tabs {
			if tab.RowOffset != r {
				t.Fatalf("partition %d: a table from row %d, want %d", p, tab.RowOffset, r)
			}
			sameRowsAs(t, tab.Batch, want, r)
			r += tab.Rows
		}
		if r != end {
			t.Fatalf("partition %d: rows up to %d, want %d", p, r, end)
		}
	}
}
