package writer

import (
	"bytes"
	"context"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// TestWriteBatchKudo writes columnar batches of a map output opened with
// the kudo format (two runs, small records) and checks that every
// partition decodes to the kudo tables of its rows, in order, each of them
// 4-byte aligned, and that they read back as the rows that were sent.
func TestWriteBatchKudo(t *testing.T) {
	const n = 23
	var batches []*partition.Batch
	for seed := range int64(2) {
		raw, err := synth.Generate("lineitem", seed, 2000, synth.WithNulls(0.1))
		if err != nil {
			t.Fatal(err)
		}
		b, err := partition.Partition(raw, []int{0}, n)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	schema := partition.SchemaOf(batches[0])
	for _, k := range allCodecs {
		t.Run(k.String(), func(t *testing.T) {
			e := newEngine(t, WithRecordSize(4<<10), WithLimit(64<<10))
			ctx := context.Background()
			spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 3}, NumPartitions: n, Codec: k, Checksum: checksum.Adler32,
				Layout: shufflefile.Flat(t.TempDir()), Format: partition.Kudo}
			w, err := e.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range batches {
				if err := w.WriteBatch(ctx, b, nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			got := readBack(t, vfs.Default, spec)
			for p := range n {
				var want []byte
				var rows int
				for _, b := range batches {
					start, end := b.PartitionRows(p)
					rows += end - start
					bounds := partition.Kudo.Split(b, start, end, 4<<10)
					for i := 1; i < len(bounds); i++ {
						want = partition.AppendKudo(want, b, bounds[i-1], bounds[i])
					}
				}
				if !bytes.Equal(got[p], want) {
					t.Fatalf("partition %d: %d bytes decoded, want %d", p, len(got[p]), len(want))
				}
				tabs, err := partition.DecodeKudoTables(got[p], schema)
				if err != nil {
					t.Fatalf("partition %d: %v", p, err)
				}
				decoded := 0
				for _, tab := range tabs {
					if tab.Size%4 != 0 {
						t.Fatalf("partition %d: a %d-byte table", p, tab.Size)
					}
					decoded += tab.Rows
				}
				if decoded != rows {
					t.Fatalf("partition %d: %d rows decoded, want %d", p, decoded, rows)
				}
			}
			checkQuiet(t, e)
		})
	}
}
