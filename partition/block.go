package partition

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/shuffled/shuffled/errdefs"
)

// The block format carries one row range of a batch (a record: one
// partition's slice, or part of it) as a self-delimiting, self-describing
// byte string; docs/format.md draws it. In short, all little-endian, every
// section starting and ending on an 8-byte boundary:
//
//	header      16 bytes: magic "SHFC", version, flags, columns, rows, block length
//	columns     8 bytes each: type, flags, precision, scale, length (data
//	            length; a list's child rows; a struct's child count)
//	names       (flag) u16 length per column, the names, zero padding
//	per column  validity (flag) | offsets (String, Binary, List, Map) | data
//
// Columns are flattened depth first, a nested column before its children
// (walkRanges), each child with the rows of it the block's rows reach.
//
// Offsets are rebased to start at 0 and validity bitmaps shifted to start at
// bit 0, so a block decodes on its own, in place, without the batch it came
// from. Encoding is canonical: padding, reserved bits and the bits past the
// last row are zero, and the decoder rejects anything else, so a block that
// decodes re-encodes to the same bytes.

// BlockVersion is the version of the block format this package writes and
// reads.
const BlockVersion = 1

// MaxBlockSize is the largest block, in bytes: its length is a uint32 (and
// an int on 32-bit platforms). A longer row range is split with SplitRows.
const MaxBlockSize = min(math.MaxUint32, math.MaxInt) &^ 7

const (
	headerSize     = 16
	descriptorSize = 8

	blockFlagNames    = 1 << 0 // a names section follows the descriptors
	columnFlagNulls   = 1 << 0 // the column has a validity section
	blockFlagsKnown   = blockFlagNames
	columnFlagsKnown  = columnFlagNulls
	maxPad            = 7
	offsetsPerChunk   = 4096
	validityChunkSize = 4096
)

var blockMagic = [4]byte{'S', 'H', 'F', 'C'}

var (
	// ErrCorruptBlock is wrapped by every error DecodeBlock returns for
	// bytes that are not a well-formed block.
	ErrCorruptBlock = errdefs.New(errdefs.ErrDataLoss, "partition: corrupt block")
	// ErrBlockVersion is wrapped by the error for a block of a version
	// this package does not read.
	ErrBlockVersion = errdefs.New(errdefs.ErrUnsupported, "partition: unsupported block version")
	// ErrBlockTooLarge is returned for a row range whose block would
	// exceed MaxBlockSize, or a Decoder's limit.
	ErrBlockTooLarge = errdefs.New(errdefs.ErrInternal, "partition: block too large")
)

func pad8(n int) int { return (n + 7) &^ 7 }

// walkRanges calls fn for each column of cols and, after each nested
// column, its descendants (depth-first pre-order, the flattened columns),
// with the row range [start, end) of that column that rows [start, end)
// of cols reach: a struct's children share its range, a list's child
// gets the rows its offsets delimit.
func walkRanges(cols []Column, start, end int, fn func(c *Column, start, end int)) {
	for i := range cols {
		c := &cols[i]
		fn(c, start, end)
		switch c.Type {
		case List, Map:
			s, e := c.childRange(start, end)
			walkRanges(c.Children, s, e, fn)
		case Struct:
			walkRanges(c.Children, start, end, fn)
		}
	}
}

// hasNames reports whether the blocks of b carry a names section: when any
// column, at any depth, has a name.
func (b *Batch) hasNames() bool { return anyNamed(b.Columns) }

func anyNamed(cols []Column) bool {
	for i := range cols {
		if cols[i].Name != "" || anyNamed(cols[i].Children) {
			return true
		}
	}
	return false
}

func (b *Batch) namesSize() int {
	if !b.hasNames() {
		return 0
	}
	n := 0
	walkRanges(b.Columns, 0, 0, func(c *Column, _, _ int) { n += 2 + len(c.Name) })
	return pad8(n)
}

// descriptorLen returns the length field of c's descriptor for rows
// [start, end): its data length, the child's row count for List and Map,
// the number of children for Struct.
func (c *Column) descriptorLen(start, end int) int {
	switch c.Type {
	case List, Map:
		s, e := c.childRange(start, end)
		return e - s
	case Struct:
		return len(c.Children)
	}
	return c.dataLen(start, end)
}

// dataLen returns the length of the data section of rows [start, end) of c.
func (c *Column) dataLen(start, end int) int {
	if c.Type.VarWidth() {
		if end == start {
			return 0
		}
		return int(c.Offsets[end] - c.Offsets[start])
	}
	return (end - start) * c.Type.Width()
}

// sectionsSize returns the bytes of c's sections for n rows whose data
// section holds dataLen bytes.
func (c *Column) sectionsSize(n, dataLen int) int {
	size := pad8(dataLen)
	if c.Validity != nil {
		size += pad8((n + 7) / 8)
	}
	if c.Type.HasOffsets() {
		size += pad8(4 * (n + 1))
	}
	return size
}

// BlockSize returns the exact length of the block that AppendBlock and
// WriteSlice produce for rows [rowStart, rowEnd) of b, in time proportional
// to the number of columns. b must be valid and 0 <= rowStart <= rowEnd <=
// b.Rows; the result may exceed MaxBlockSize.
func BlockSize(b *Batch, rowStart, rowEnd int) int {
	if b.hasNested() {
		size := headerSize + descriptorSize*flatCount(b.Columns) + b.namesSize()
		walkRanges(b.Columns, rowStart, rowEnd, func(c *Column, start, end int) {
			size += c.sectionsSize(end-start, c.dataLen(start, end))
		})
		return size
	}
	n := rowEnd - rowStart
	size := headerSize + descriptorSize*len(b.Columns) + b.namesSize()
	for i := range b.Columns {
		c := &b.Columns[i]
		size += c.sectionsSize(n, c.dataLen(rowStart, rowEnd))
	}
	return size
}

// SliceSize returns the exact length of the block of partition p of b,
// for preallocation and limiter accounting. b must be valid and
// partitioned, and p in [0, b.NumPartitions()).
func SliceSize(b *Batch, p int) int {
	start, end := b.PartitionRows(p)
	return BlockSize(b, start, end)
}

// AppendSlice appends the block of partition p of b to dst and returns the
// extended slice. b must be valid and partitioned, and p in range; it
// panics if the block would exceed MaxBlockSize (SplitRows avoids that).
func AppendSlice(dst []byte, b *Batch, p int) []byte {
	start, end := b.PartitionRows(p)
	return AppendBlock(dst, b, start, end)
}

// AppendBlock appends the block of rows [rowStart, rowEnd) of b to dst and
// returns the extended slice. b must be valid and the range within it; it
// panics if the block would exceed MaxBlockSize (SplitRows avoids that).
func AppendBlock(dst []byte, b *Batch, rowStart, rowEnd int) []byte {
	checkRange(b, rowStart, rowEnd)
	size := BlockSize(b, rowStart, rowEnd)
	if size > MaxBlockSize {
		panic(fmt.Sprintf("partition: block of rows [%d,%d) is %d bytes, more than MaxBlockSize", rowStart, rowEnd, size))
	}
	dst, out := grow(dst, size)
	pos := putMeta(out, b, rowStart, rowEnd, size)
	walkRanges(b.Columns, rowStart, rowEnd, func(c *Column, start, end int) {
		n := end - start
		if c.Validity != nil {
			nb := (n + 7) / 8
			putBits(out[pos:], c.Validity, start, n)
			pos = zeroPad(out, pos+nb)
		}
		if c.Type.HasOffsets() {
			putOffsets(out[pos:], c.Offsets, start, end)
			pos = zeroPad(out, pos+4*(n+1))
		}
		d := c.dataLen(start, end)
		pos += copy(out[pos:pos+d], c.dataBytes(start, end))
		pos = zeroPad(out, pos)
	})
	if pos != size {
		panic(fmt.Sprintf("partition: block of rows [%d,%d) filled %d of %d bytes", rowStart, rowEnd, pos, size))
	}
	return dst
}

func checkRange(b *Batch, rowStart, rowEnd int) {
	if rowStart < 0 || rowStart > rowEnd || rowEnd > b.Rows {
		panic(fmt.Sprintf("partition: row range [%d,%d) outside [0,%d)", rowStart, rowEnd, b.Rows))
	}
}

// dataBytes returns the data of rows [start, end) of c (nil for nested
// types).
func (c *Column) dataBytes(start, end int) []byte {
	if c.Type.Nested() {
		return nil
	}
	if c.Type.VarWidth() {
		if start == end {
			return nil
		}
		return c.Data[c.Offsets[start]:c.Offsets[end]]
	}
	w := c.Type.Width()
	return c.Data[start*w : end*w]
}

// zeroPad zeroes out[pos:pad8(pos)] and returns pad8(pos).
func zeroPad(out []byte, pos int) int {
	end := pad8(pos)
	clear(out[pos:end])
	return end
}

// putMeta writes the header, column descriptors and names of the block of
// rows [start, end) of b into out and returns their length.
func putMeta(out []byte, b *Batch, start, end, size int) int {
	n := end - start
	copy(out, blockMagic[:])
	out[4] = BlockVersion
	var flags byte
	if b.hasNames() {
		flags |= blockFlagNames
	}
	out[5] = flags
	binary.LittleEndian.PutUint16(out[6:], uint16(flatCount(b.Columns)))
	binary.LittleEndian.PutUint32(out[8:], uint32(n))
	binary.LittleEndian.PutUint32(out[12:], uint32(size))
	pos := headerSize
	walkRanges(b.Columns, start, end, func(c *Column, start, end int) {
		d := out[pos : pos+descriptorSize]
		d[0] = byte(c.Type)
		d[1] = 0
		if c.Validity != nil {
			d[1] = columnFlagNulls
		}
		d[2] = byte(c.Precision)
		d[3] = byte(c.Scale)
		binary.LittleEndian.PutUint32(d[4:], uint32(c.descriptorLen(start, end)))
		pos += descriptorSize
	})
	if flags&blockFlagNames != 0 {
		walkRanges(b.Columns, 0, 0, func(c *Column, _, _ int) {
			binary.LittleEndian.PutUint16(out[pos:], uint16(len(c.Name)))
			pos += 2
		})
		walkRanges(b.Columns, 0, 0, func(c *Column, _, _ int) {
			pos += copy(out[pos:], c.Name)
		})
		pos = zeroPad(out, pos)
	}
	return pos
}

// putOffsets writes offsets[start:end+1] rebased to start at 0 into out as
// little-endian uint32s.
func putOffsets(out []byte, offsets []int32, start, end int) {
	if end == start {
		binary.LittleEndian.PutUint32(out, 0)
		return
	}
	rebase(out, offsets[start:end+1], offsets[start])
}

// rebase writes src[i]-base as little-endian uint32s into out[4*i:]. Four
// values a round, in two 8-byte stores, with the bounds checked once a
// round: this loop is the one pass serialization adds to plain copies.
func rebase(out []byte, src []int32, base int32) {
	out = out[:4*len(src)]
	i := 0
	for ; i+4 <= len(src); i += 4 {
		s := src[i : i+4 : i+4]
		o := out[4*i : 4*i+16 : 4*i+16]
		binary.LittleEndian.PutUint64(o[0:8], uint64(uint32(s[0]-base))|uint64(uint32(s[1]-base))<<32)
		binary.LittleEndian.PutUint64(o[8:16], uint64(uint32(s[2]-base))|uint64(uint32(s[3]-base))<<32)
	}
	for ; i < len(src); i++ {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(src[i]-base))
	}
}

// zeroPadding is the source of padding bytes for writers (which must not
// modify what they are given).
var zeroPadding [maxPad + 1]byte

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// WriteSlice writes the block of rows [rowStart, rowEnd) of b to w, the
// same bytes AppendBlock produces, without building the block in memory:
// data sections go to w straight from b's buffers, and only the header,
// shifted validity and rebased offsets pass through a small pooled
// buffer. It returns the bytes written; after a write error w may hold
// part of the block. b must be valid; a row range outside b or a block
// larger than MaxBlockSize is an ErrInvalidArgument or ErrBlockTooLarge
// error, and nothing is written.
func WriteSlice(w io.Writer, b *Batch, rowStart, rowEnd int) (int64, error) {
	if rowStart < 0 || rowStart > rowEnd || rowEnd > b.Rows {
		return 0, fmt.Errorf("%w: row range [%d,%d) outside [0,%d)", ErrInvalidArgument, rowStart, rowEnd, b.Rows)
	}
	size := BlockSize(b, rowStart, rowEnd)
	if size > MaxBlockSize {
		return 0, fmt.Errorf("%w: rows [%d,%d) make a %d-byte block, more than %d", ErrBlockTooLarge, rowStart, rowEnd, size, MaxBlockSize)
	}
	if b.hasNested() {
		// Nested columns' children take row ranges of their own: the
		// block is built in memory and written at once.
		n, err := w.Write(AppendBlock(nil, b, rowStart, rowEnd))
		return int64(n), err
	}
	bufp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(bufp)
	sw := &sliceWriter{w: w, buf: (*bufp)[:0]}
	meta := headerSize + descriptorSize*len(b.Columns) + b.namesSize()
	out := sw.scratch(meta)
	putMeta(out, b, rowStart, rowEnd, size)
	sw.write(out)
	n := rowEnd - rowStart
	for i := range b.Columns {
		c := &b.Columns[i]
		if c.Validity != nil {
			nb := (n + 7) / 8
			if rowStart&7 == 0 && n&7 == 0 {
				sw.write(c.Validity[rowStart>>3 : rowStart>>3+nb])
			} else {
				for k := 0; k < nb; k += validityChunkSize {
					bits := min(8*validityChunkSize, n-8*k)
					chunk := sw.scratch((bits + 7) / 8)
					putBits(chunk, c.Validity, rowStart+8*k, bits)
					sw.write(chunk)
				}
			}
			sw.write(zeroPadding[:pad8(nb)-nb])
		}
		if c.Type.VarWidth() {
			if n == 0 {
				sw.write(zeroPadding[:4])
			} else {
				base := c.Offsets[rowStart]
				for k := rowStart; k <= rowEnd; k += offsetsPerChunk {
					m := min(offsetsPerChunk, rowEnd+1-k)
					chunk := sw.scratch(4 * m)
					rebase(chunk, c.Offsets[k:k+m], base)
					sw.write(chunk)
				}
			}
			ob := 4 * (n + 1)
			sw.write(zeroPadding[:pad8(ob)-ob])
		}
		d := c.dataBytes(rowStart, rowEnd)
		sw.write(d)
		sw.write(zeroPadding[:pad8(len(d))-len(d)])
	}
	*bufp = sw.buf[:0]
	if sw.err == nil && sw.n != int64(size) {
		panic(fmt.Sprintf("partition: WriteSlice of rows [%d,%d) wrote %d of %d bytes", rowStart, rowEnd, sw.n, size))
	}
	return sw.n, sw.err
}

// sliceWriter writes to w until the first error, counting bytes.
type sliceWriter struct {
	w   io.Writer
	buf []byte
	n   int64
	err error
}

func (s *sliceWriter) write(p []byte) {
	if s.err != nil || len(p) == 0 {
		return
	}
	n, err := s.w.Write(p)
	s.n += int64(n)
	s.err = err
}

// scratch returns n bytes of the scratch buffer, which the next call may
// reuse.
func (s *sliceWriter) scratch(n int) []byte {
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	return s.buf[:n]
}

// SplitRows splits rows [rowStart, rowEnd) of b into consecutive ranges
// whose blocks are at most maxBlockSize bytes each and returns their
// boundaries: rowStart, then the end of each range, the last rowEnd. Each
// range takes as many rows as fit; a single row whose block alone exceeds
// maxBlockSize gets a range of its own. An empty range gives [rowStart,
// rowEnd]. b must be valid and the range within it.
func SplitRows(b *Batch, rowStart, rowEnd, maxBlockSize int) []int {
	return splitRows(b, rowStart, rowEnd, maxBlockSize, BlockSize)
}

// splitRows is SplitRows for any size function that does not decrease as
// a range's end grows.
func splitRows(b *Batch, rowStart, rowEnd, maxSize int, size func(*Batch, int, int) int) []int {
	checkRange(b, rowStart, rowEnd)
	bounds := []int{rowStart}
	if rowStart == rowEnd {
		return append(bounds, rowEnd)
	}
	for start := rowStart; start < rowEnd; {
		// The largest end with size(start, end) <= maxSize, at least
		// start+1: the size grows with end.
		lo, hi := start+1, rowEnd
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if size(b, start, mid) <= maxSize {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		bounds = append(bounds, lo)
		start = lo
	}
	return bounds
}
