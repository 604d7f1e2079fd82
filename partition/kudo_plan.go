package partition

import "fmt"

// KudoBuffer names what a KudoPiece copies.
type KudoBuffer uint8

const (
	// KudoZeros is zero padding: Len zero bytes.
	KudoZeros KudoBuffer = iota
	// KudoValidity is bytes of a column's validity bitmap.
	KudoValidity
	// KudoOffsets is bytes of a column's int32 offsets, little-endian.
	KudoOffsets
	// KudoData is bytes of a column's data (values or chars).
	KudoData
)

// KudoPiece is one piece of the body of a kudo table: Len bytes from byte
// Off of column Column's Buffer, or Len zero bytes (KudoZeros). Column
// counts the batch's columns and their nested children in depth-first
// pre-order (a batch without nested columns: its column index); the bytes
// of a Binary column's byte child are that Binary column's KudoData.
type KudoPiece struct {
	Buffer   KudoBuffer
	Column   int
	Off, Len int
}

// AppendKudoPlan appends to head the header of the kudo table of rows
// [rowStart, rowEnd) of b and to pieces the pieces of its body, in order,
// and returns both and the table's size (KudoSize): the header followed by
// the pieces is exactly what AppendKudo writes, for a caller that copies
// b's buffers elsewhere (a GPU gather). It reads b's column types and
// offsets and whether each column has a validity bitmap, never the bytes
// of a bitmap or of the data, so those may be placeholders (a non-nil
// empty Validity, a nil Data). Pieces of 0 bytes are left out; an empty
// range appends nothing. The range must be within b; it panics if the
// table would exceed MaxKudoTableSize.
func AppendKudoPlan(head []byte, pieces []KudoPiece, b *Batch, rowStart, rowEnd int) ([]byte, []KudoPiece, int) {
	if rowStart < 0 || rowStart > rowEnd || rowEnd > b.Rows {
		panic(fmt.Sprintf("partition: row range [%d,%d) outside [0,%d)", rowStart, rowEnd, b.Rows))
	}
	if rowStart == rowEnd {
		return head, pieces, 0
	}
	l := kudoLayoutOf(b, rowStart, rowEnd)
	size := l.total()
	if size > MaxKudoTableSize {
		panic(fmt.Sprintf("partition: kudo table of rows [%d,%d) is %d bytes, more than MaxKudoTableSize", rowStart, rowEnd, size))
	}
	head, out := grow(head, l.header)
	putKudoHeader(out, b, rowStart, rowEnd, &l)
	if len(b.Columns) == 0 {
		return head, pieces, size
	}
	add := func(p KudoPiece) {
		if p.Len > 0 {
			pieces = append(pieces, p)
		}
	}
	n := rowEnd - rowStart
	v := 0
	col := -1
	walkKudo(b.Columns, rowStart, n, func(c *Column, byteChild bool, off, rows int) {
		if !byteChild {
			col++
		}
		if kudoValidity(c, byteChild, rows) {
			first, nb := validitySpan(off, rows)
			add(KudoPiece{Buffer: KudoValidity, Column: col, Off: first, Len: nb})
			v += nb
		}
	})
	add(KudoPiece{Buffer: KudoZeros, Column: -1, Len: l.validity - v})
	col = -1
	walkKudo(b.Columns, rowStart, n, func(c *Column, byteChild bool, off, rows int) {
		if !byteChild {
			col++
		}
		if !byteChild && c.Type.HasOffsets() && rows > 0 {
			add(KudoPiece{Buffer: KudoOffsets, Column: col, Off: 4 * off, Len: 4 * (rows + 1)})
		}
	})
	col = -1
	walkKudo(b.Columns, rowStart, n, func(c *Column, byteChild bool, off, rows int) {
		if !byteChild {
			col++
		}
		switch {
		case byteChild:
			add(KudoPiece{Buffer: KudoData, Column: col, Off: off, Len: rows})
		case c.Type == Binary || c.Type.Nested() || rows == 0:
		case c.Type.VarWidth():
			add(KudoPiece{Buffer: KudoData, Column: col, Off: int(c.Offsets[off]), Len: c.dataLen(off, off+rows)})
		default:
			add(KudoPiece{Buffer: KudoData, Column: col, Off: off * c.Type.Width(), Len: rows * c.Type.Width()})
		}
	})
	add(KudoPiece{Buffer: KudoZeros, Column: -1, Len: pad4(l.data) - l.data})
	return head, pieces, size
}
