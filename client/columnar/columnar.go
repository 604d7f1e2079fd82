// Package columnar lays a partition.Batch out as the payload and layout of
// a columnar Batch request (docs/protocol.md, "Columnar layout"), for Go
// executors and the load generator. Buffers are packed one after the other,
// each starting on a 64-byte boundary as Arrow recommends, so the daemon can
// read the int32 offsets in place.
package columnar

import (
	"encoding/binary"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
)

const align = 64

// Size returns the payload size Append produces for b.
func Size(b *partition.Batch) int {
	n := 0
	for i := range b.Columns {
		c := &b.Columns[i]
		for _, l := range []int{len(c.Validity), 4 * len(c.Offsets), len(c.Data)} {
			if l > 0 {
				n = pad(n) + l
			}
		}
	}
	return n
}

func pad(n int) int { return (n + align - 1) &^ (align - 1) }

// Append appends b's buffers to dst (which should start 64-byte aligned, as
// a fresh memfd mapping does) and returns the payload and its layout.
func Append(dst []byte, b *partition.Batch) ([]byte, protocol.ColumnarLayout) {
	base := len(dst)
	l := protocol.ColumnarLayout{
		Rows:          int64(b.Rows),
		Columns:       make([]protocol.Column, len(b.Columns)),
		PartitionRows: make([]int64, len(b.PartitionOffsets)),
	}
	for p, r := range b.PartitionOffsets {
		l.PartitionRows[p] = int64(r)
	}
	put := func(buf []byte) protocol.Buffer {
		if len(buf) == 0 {
			return protocol.Buffer{}
		}
		for (len(dst)-base)%align != 0 {
			dst = append(dst, 0)
		}
		off := len(dst) - base
		dst = append(dst, buf...)
		return protocol.Buffer{Offset: int64(off), Length: int64(len(buf))}
	}
	for i := range b.Columns {
		c := &b.Columns[i]
		wc := &l.Columns[i]
		wc.Type = protocol.ColumnType(c.Type)
		wc.Precision, wc.Scale = int32(c.Precision), int32(c.Scale)
		wc.Name = c.Name
		wc.Validity = put(c.Validity)
		if len(c.Offsets) > 0 {
			raw := make([]byte, 4*len(c.Offsets))
			for j, o := range c.Offsets {
				binary.LittleEndian.PutUint32(raw[4*j:], uint32(o))
			}
			wc.Offsets = put(raw)
		}
		wc.Data = put(c.Data)
	}
	return dst[base:], l
}
