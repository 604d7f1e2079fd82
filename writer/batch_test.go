package writer

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// TestWriteBatch writes columnar batches (two runs; small records so big
// partitions split) and checks that every partition decodes to the blocks
// of its rows, batch after batch, and that onDone runs once per batch.
func TestWriteBatch(t *testing.T) {
	const n = 37
	var batches []*partition.Batch
	for seed := range int64(2) {
		raw, err := synth.Generate("lineitem", seed, 3000, synth.WithNulls(0.1))
		if err != nil {
			t.Fatal(err)
		}
		b, err := partition.Partition(raw, []int{0}, n)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	for _, k := range allCodecs {
		t.Run(k.String(), func(t *testing.T) {
			e := newEngine(t, WithRecordSize(4<<10), WithLimit(64<<10))
			dir := t.TempDir()
			ctx := context.Background()
			spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 2}, NumPartitions: n, Codec: k, Checksum: checksum.CRC32, Layout: shufflefile.Flat(dir)}
			w, err := e.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			var done atomic.Int32
			for _, b := range batches {
				if err := w.WriteBatch(ctx, b, func() { done.Add(1) }); err != nil {
					t.Fatal(err)
				}
			}
			res, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := done.Load(); got != int32(len(batches)) {
				t.Errorf("onDone ran %d times, want %d", got, len(batches))
			}
			if res.Runs != len(batches) {
				t.Errorf("Runs = %d, want %d", res.Runs, len(batches))
			}
			got := readBack(t, vfs.Default, spec)
			for p := range n {
				var rows int
				var want []byte
				for _, b := range batches {
					start, end := b.PartitionRows(p)
					rows += end - start
					if start == end {
						continue
					}
					bounds := partition.SplitRows(b, start, end, 4<<10)
					for i := 1; i < len(bounds); i++ {
						want = partition.AppendBlock(want, b, bounds[i-1], bounds[i])
					}
				}
				if !bytes.Equal(got[p], want) {
					t.Fatalf("partition %d: %d bytes decoded, want %d", p, len(got[p]), len(want))
				}
				blocks, err := partition.DecodeBlocks(got[p])
				if err != nil {
					t.Fatalf("partition %d: DecodeBlocks: %v", p, err)
				}
				var decoded int
				for _, blk := range blocks {
					decoded += blk.Rows
				}
				if decoded != rows {
					t.Errorf("partition %d: %d rows decoded, want %d", p, decoded, rows)
				}
			}
			noTemps(t, dir)
			checkQuiet(t, e)
		})
	}
}

func TestWriteBatchInvalid(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 3}, NumPartitions: 4, Codec: codec.LZ4, Layout: shufflefile.Flat(t.TempDir())}
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	raw, err := synth.Generate("ints", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	b, err := partition.Partition(raw, []int{0}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int32
	if err := w.WriteBatch(ctx, b, func() { done.Add(1) }); !errors.Is(err, ErrInvalid) {
		t.Errorf("WriteBatch of a 3-partition batch into 4 partitions = %v, want ErrInvalid", err)
	}
	b.PartitionOffsets[1] = b.PartitionOffsets[2] + 1 // not monotone
	if err := w.WriteBatch(ctx, b, func() { done.Add(1) }); !errors.Is(err, ErrInvalid) {
		t.Errorf("WriteBatch of an invalid batch = %v, want ErrInvalid", err)
	}
	if got := done.Load(); got != 2 {
		t.Errorf("onDone ran %d times for two refused batches, want 2", got)
	}
}

func TestWriteOpaque(t *testing.T) {
	e := newEngine(t, WithRecordSize(1<<10))
	dir := t.TempDir()
	ctx := context.Background()
	spec := Spec{ID: shufflefile.ID{Shuffle: 2, Map: 1}, NumPartitions: 3, Codec: codec.Snappy, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789"), 500)
	var done atomic.Int32
	for _, bad := range [][]int64{{0, 10}, {1, 2, 3, len64(data)}, {0, 20, 10, len64(data)}, {0, 1, 2, 3}} {
		if err := w.WriteOpaque(ctx, data, bad, func() { done.Add(1) }); !errors.Is(err, ErrInvalid) {
			t.Errorf("WriteOpaque(offsets %v) = %v, want ErrInvalid", bad, err)
		}
	}
	offsets := []int64{0, 3000, 3000, len64(data)}
	if err := w.WriteOpaque(ctx, data, offsets, func() { done.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := done.Load(); got != 5 {
		t.Errorf("onDone ran %d times, want 5", got)
	}
	checkPartitions(t, readBack(t, vfs.Default, spec), [][]byte{data[:3000], nil, data[3000:]})
}

func len64(b []byte) int64 { return int64(len(b)) }
