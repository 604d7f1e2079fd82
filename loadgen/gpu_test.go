package loadgen

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol/columnar"
)

// TestSameRows: a partitioned batch read back from its payload matches
// the host partitioner's; moved partition bounds, a changed value, a null
// where there was a value and two rows swapped within a partition are each
// named.
func TestSameRows(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rows, cfg.Partitions = 3000, 16
	want, err := generate(&cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	size, layout := columnar.Layout(want)
	payload := make([]byte, size)
	columnar.Fill(payload, want, &layout)
	if err := sameRows(batchView(payload, &layout), want); err != nil {
		t.Fatalf("sameRows(the batch read back, the batch) = %v, want nil", err)
	}

	// Rows r0 and r0+1 lie in partition p0 with different part keys
	// (column 1, 8 bytes).
	const col, w = 1, 8
	p0, r0 := -1, -1
	for r := 0; r+1 < want.Rows && r0 < 0; r++ {
		for p0 = 0; int(want.PartitionOffsets[p0+1]) <= r; p0++ {
		}
		data := want.Columns[col].Data
		if r+1 < int(want.PartitionOffsets[p0+1]) && !bytes.Equal(data[r*w:(r+1)*w], data[(r+1)*w:(r+2)*w]) {
			r0 = r
		}
	}
	if r0 < 0 {
		t.Fatal("no two neighbouring rows of one partition with different part keys")
	}
	tests := []struct {
		name   string
		mutate func(b *partition.Batch)
		want   string
	}{
		{"bounds", func(b *partition.Batch) { b.PartitionOffsets[p0+1]-- }, fmt.Sprintf("partition %d holds rows", p0)},
		{"value", func(b *partition.Batch) {
			c := &b.Columns[col]
			c.Data[(want.Rows-1)*w]++
		}, fmt.Sprintf("row %d ", want.Rows-1)},
		{"null", func(b *partition.Batch) {
			c := &b.Columns[col]
			c.Validity = bytes.Repeat([]byte{0xff}, (b.Rows+7)/8)
			c.Validity[r0/8] &^= 1 << (r0 % 8)
		}, fmt.Sprintf("row %d (partition %d), column %d", r0, p0, col)},
		{"swap", func(b *partition.Batch) {
			d := b.Columns[col].Data
			tmp := append([]byte(nil), d[r0*w:(r0+1)*w]...)
			copy(d[r0*w:], d[(r0+1)*w:(r0+2)*w])
			copy(d[(r0+1)*w:], tmp)
		}, fmt.Sprintf("row %d (partition %d), column %d", r0, p0, col)},
	}
	for _, tt := range tests {
		p := bytes.Clone(payload)
		got := batchView(p, &layout)
		tt.mutate(got)
		if err := sameRows(got, want); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("sameRows with %s changed = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}
