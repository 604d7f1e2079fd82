// Package columnar is the one mapping between a columnar Batch request's
// layout (docs/protocol.md, "Columnar layout") and partition.Batch, both
// ways: Layout and Fill lay a batch out as a payload, for Go executors and
// the load generator; View reads a payload back as a batch over its bytes,
// for the daemon; Skeleton gives the columns a layout declares, for the
// GPU plans, which read no payload on the host.
//
// Buffers are packed one after the other,
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
// and the wire layout; Fill then copies the buffers in. Nested columns are
// followed by their children, depth-first (docs/protocol.md), each child
// holding the rows its parent reaches. b must be valid.
func Layout(b *partition.Batch) (int, protocol.ColumnarLayout) {
	l := protocol.ColumnarLayout{
		Rows:          int64(b.Rows),
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
	var add func(cols []partition.Column, rows int)
	add = func(cols []partition.Column, rows int) {
		for i := range cols {
			c := &cols[i]
			wc := protocol.Column{
				Type:      protocol.ColumnType(c.Type), // the wire's type ids are partition's
				Precision: int32(c.Precision), Scale: int32(c.Scale),
				Name:     c.Name,
				Children: uint16(len(c.Children)),
			}
			if c.Validity != nil {
				wc.Validity = place(int64(rows+7) / 8)
			}
			childRows := rows
			switch {
			case c.Type.FixedWidth():
				wc.Data = place(int64(rows * c.Type.Width()))
			case c.Type == partition.Struct:
			case len(c.Offsets) == 0: // a 0-row column may have no offsets
				childRows = 0
			default:
				wc.Offsets = place(4 * int64(rows+1))
				childRows = int(c.Offsets[rows])
				if c.Type.VarWidth() {
					wc.Data = place(int64(childRows))
				}
			}
			l.Columns = append(l.Columns, wc)
			add(c.Children, childRows)
		}
	}
	add(b.Columns, b.Rows)
	if l.Columns == nil {
		l.Columns = []protocol.Column{}
	}
	return int(pos), l
}

// Fill copies b's buffers into dst where l (from Layout) places them.
// Padding between buffers is left as dst has it.
func Fill(dst []byte, b *partition.Batch, l *protocol.ColumnarLayout) {
	at := func(buf protocol.Buffer) []byte { return dst[buf.Offset : buf.Offset+buf.Length] }
	next := 0
	var fill func(cols []partition.Column)
	fill = func(cols []partition.Column) {
		for i := range cols {
			c := &cols[i]
			wc := &l.Columns[next]
			next++
			copy(at(wc.Validity), c.Validity)
			if wc.Offsets.Length > 0 {
				out := at(wc.Offsets)
				for r := range out[:len(out)/4] {
					binary.LittleEndian.PutUint32(out[4*r:], uint32(c.Offsets[r]))
				}
			}
			copy(at(wc.Data), c.Data)
			fill(c.Children)
		}
	}
	fill(b.Columns)
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
