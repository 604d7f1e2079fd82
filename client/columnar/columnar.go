// Package columnar lays a partition.Batch out as the payload and layout of
// a columnar Batch request (docs/protocol.md, "Columnar layout"), for Go
// executors and the load generator. Buffers are packed one after the other,
// each starting on a 64-byte boundary as Arrow recommends, so the daemon can
// read the int32 offsets in place, and each holds exactly what the batch's
// rows need. SparkSchema gives the schema a kudo map output declares at
// Open.
package columnar

import (
	"encoding/binary"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
)

// Align is the alignment of every buffer within the payload.
const Align = 64

func alignUp(n int64) int64 { return (n + Align - 1) &^ (Align - 1) }

// Layout places b's buffers in one payload and returns the payload size
// and the wire layout; Fill then copies the buffers in. b must be valid.
func Layout(b *partition.Batch) (int, protocol.ColumnarLayout) {
	l := protocol.ColumnarLayout{
		Rows:          int64(b.Rows),
		Columns:       make([]protocol.Column, len(b.Columns)),
		PartitionRows: make([]int64, len(b.PartitionOffsets)),
	}
	for p, r := range b.PartitionOffsets {
		l.PartitionRows[p] = int64(r)
	}
	var pos int64
	place := func(n int64) protocol.Buffer {
		if n == 0 {
			return protocol.Buffer{}
		}
		buf := protocol.Buffer{Offset: pos, Length: n}
		pos = alignUp(pos + n)
		return buf
	}
	for i := range b.Columns {
		c := &b.Columns[i]
		wc := &l.Columns[i]
		wc.Type = protocol.ColumnType(c.Type) // the wire's type ids are partition's
		wc.Precision, wc.Scale = int32(c.Precision), int32(c.Scale)
		wc.Name = c.Name
		if c.Validity != nil {
			wc.Validity = place(int64(b.Rows+7) / 8)
		}
		switch {
		case !c.Type.VarWidth():
			wc.Data = place(int64(b.Rows * c.Type.Width()))
		case len(c.Offsets) > 0: // a 0-row column may have no offsets
			wc.Offsets = place(4 * int64(b.Rows+1))
			wc.Data = place(int64(c.Offsets[b.Rows]))
		}
	}
	return int(pos), l
}

// Fill copies b's buffers into dst where l (from Layout) places them.
// Padding between buffers is left as dst has it.
func Fill(dst []byte, b *partition.Batch, l *protocol.ColumnarLayout) {
	at := func(buf protocol.Buffer) []byte { return dst[buf.Offset : buf.Offset+buf.Length] }
	for i := range b.Columns {
		c := &b.Columns[i]
		wc := &l.Columns[i]
		copy(at(wc.Validity), c.Validity)
		if wc.Offsets.Length > 0 {
			out := at(wc.Offsets)
			for r, off := range c.Offsets[:b.Rows+1] {
				binary.LittleEndian.PutUint32(out[4*r:], uint32(off))
			}
		}
		copy(at(wc.Data), c.Data)
	}
}

// Size returns the payload size Append produces for b.
func Size(b *partition.Batch) int {
	n, _ := Layout(b)
	return n
}

// Append appends b's buffers to dst (which should start 64-byte aligned, as
// a fresh memfd mapping does) and returns the payload and its layout.
func Append(dst []byte, b *partition.Batch) ([]byte, protocol.ColumnarLayout) {
	n, l := Layout(b)
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	payload := dst[start:]
	Fill(payload, b, &l)
	return payload, l
}

// SparkSchema returns the schema of a kudo map output (OpenMapOutput.Schema)
// whose batches have b's columns: each column's name and the Spark SQL type
// it carries (partition.Field.SparkType).
func SparkSchema(b *partition.Batch) []protocol.SchemaField {
	out := make([]protocol.SchemaField, len(b.Columns))
	for i, f := range partition.SchemaOf(b) {
		out[i] = protocol.SchemaField{Name: f.Name, SparkType: f.SparkType()}
	}
	return out
}
