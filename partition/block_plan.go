package partition

import "fmt"

// BlockSection names what a BlockPiece writes.
type BlockSection uint8

const (
	// BlockZeros is zero padding (and the one zero offset of an empty
	// slice): Len zero bytes.
	BlockZeros BlockSection = iota
	// BlockValidity is Len bits of a column's validity bitmap from bit
	// (row) Off, shifted to start at bit 0: ceil(Len/8) bytes.
	BlockValidity
	// BlockOffsets is Len int32 offsets of a column from index Off, less
	// Base, little-endian: 4×Len bytes.
	BlockOffsets
	// BlockData is Len bytes of a column's data from byte Off.
	BlockData
)

// BlockPiece is one piece of the sections of a block, after its header:
// what BlockSection says of column Column, which counts the batch's
// columns and their nested children in depth-first pre-order (a batch
// without nested columns: its column index); -1 for BlockZeros.
type BlockPiece struct {
	Section  BlockSection
	Column   int
	Off, Len int
	Base     int32
}

// AppendBlockPlan appends to head the header, column descriptors and
// names of the block of rows [rowStart, rowEnd) of b and to pieces the
// pieces of its sections, in order, and returns both and the block's size
// (BlockSize): the header followed by the pieces is exactly what
// AppendBlock writes, for a caller that gathers b's buffers elsewhere (a
// GPU gather). Like AppendKudoPlan it reads b's column types, names and
// offsets and whether each column has a validity bitmap, never the bytes
// of a bitmap or of the data. Pieces of 0 bytes are left out. The range
// must be within b; it panics if the block would exceed MaxBlockSize.
func AppendBlockPlan(head []byte, pieces []BlockPiece, b *Batch, rowStart, rowEnd int) ([]byte, []BlockPiece, int) {
	checkRange(b, rowStart, rowEnd)
	size := BlockSize(b, rowStart, rowEnd)
	if size > MaxBlockSize {
		panic(fmt.Sprintf("partition: block of rows [%d,%d) is %d bytes, more than MaxBlockSize", rowStart, rowEnd, size))
	}
	meta := headerSize + descriptorSize*flatCount(b.Columns) + b.namesSize()
	head, out := grow(head, meta)
	if n := putMeta(out, b, rowStart, rowEnd, size); n != meta {
		panic(fmt.Sprintf("partition: block header of %d bytes, want %d", n, meta))
	}
	pos := meta
	zeros := func(n int) {
		if n > 0 {
			pieces = append(pieces, BlockPiece{Section: BlockZeros, Column: -1, Len: n})
			pos += n
		}
	}
	add := func(p BlockPiece, n int) {
		pieces = append(pieces, p)
		pos += n
		zeros(pad8(pos) - pos)
	}
	col := -1
	walkRanges(b.Columns, rowStart, rowEnd, func(c *Column, start, end int) {
		col++
		n := end - start
		if c.Validity != nil && n > 0 {
			add(BlockPiece{Section: BlockValidity, Column: col, Off: start, Len: n}, (n+7)/8)
		}
		if c.Type.HasOffsets() {
			if n == 0 {
				zeros(8) // one zero offset, padded
			} else {
				add(BlockPiece{Section: BlockOffsets, Column: col, Off: start, Len: n + 1, Base: c.Offsets[start]}, 4*(n+1))
			}
		}
		if d := c.dataLen(start, end); d > 0 {
			off := start * c.Type.Width()
			if c.Type.VarWidth() {
				off = int(c.Offsets[start])
			}
			add(BlockPiece{Section: BlockData, Column: col, Off: off, Len: d}, d)
		}
	})
	if pos != size {
		panic(fmt.Sprintf("partition: block plan of rows [%d,%d) fills %d of %d bytes", rowStart, rowEnd, pos, size))
	}
	return head, pieces, size
}
