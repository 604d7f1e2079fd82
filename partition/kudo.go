package partition

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unsafe"
)

// Kudo is spark-rapids' shuffle serialization (spark-rapids-jni
// KudoSerializer, the layout of spark-rapids 25.06 and later), which an
// unmodified spark-rapids reducer reads. docs/format.md section 7 draws it;
// in short, for rows [R, R+N) of a batch with C flattened columns:
//
//	header  big-endian int32s: magic "KUD0", R, N, V', O', T, C; then a
//	        has-validity bitset of ceil(C/8) bytes (LSB first)
//	body    T bytes, little-endian, three sections in column order:
//	        validity  the source bytes R/8 .. (R+N-1)/8 of each nullable
//	                  column, padded so that header + V' ≡ 0 (mod 4)
//	        offsets   the N+1 source int32 offsets R .. R+N of each string
//	                  and binary column, verbatim
//	        data      N × width bytes of each fixed-width column, the chars
//	                  o[R] .. o[R+N] of each string and binary column,
//	                  padded to a multiple of 4
//
// Unlike the block format, nothing is shifted or rebased: a table is a
// header and plain copies of the batch's buffers. Binary is kudo's
// LIST<UINT8>: two flattened columns (the list, then its byte child) whose
// buffers are a string's. Nested columns are flattened depth first, a
// parent before its children (walkKudo): a struct's children take its row
// slice, a list's child the rows its offsets reach, and a column whose
// slice has no rows contributes nothing (no validity bit, no bytes). The
// tables carry no types: the reader brings the schema.

// MaxKudoTableSize is the largest kudo table, in bytes: its lengths are
// int32s. A longer row range is split (Kudo.Split).
const MaxKudoTableSize = math.MaxInt32 &^ 3

const (
	kudoFixedHeader = 28
	kudoBinaryFlat  = 2 // flattened columns of a Binary (LIST<UINT8>) column
)

var kudoMagic = [4]byte{'K', 'U', 'D', '0'}

var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// NativeLittleEndian reports whether this machine stores integers little
// endian, as the payloads do: their int32 offsets can then be read in
// place.
func NativeLittleEndian() bool { return nativeLittleEndian }

func pad4(n int) int { return (n + 3) &^ 3 }

// kudoFlatColumns returns the number of flattened columns of a table of
// cols: one per column at every depth, and one more per Binary column (its
// byte child).
func kudoFlatColumns(cols []Column) int {
	n := len(cols)
	for i := range cols {
		if cols[i].Type == Binary {
			n += kudoBinaryFlat - 1
		}
		if cols[i].Children != nil {
			n += kudoFlatColumns(cols[i].Children)
		}
	}
	return n
}

// validitySpan returns the first byte and the number of bytes of a
// validity bitmap that rows [start, start+n) touch (n > 0).
func validitySpan(start, n int) (first, nb int) {
	first = start >> 3
	return first, (start+n-1)>>3 - first + 1
}

// walkKudo calls fn for each flattened column of a kudo table of rows
// [off, off+rows) of cols, in KudoSerializer's order (depth-first
// pre-order), with the slice of that column the table holds: a struct's
// children share its slice; a list's child (and a Binary column's byte
// child, byteChild true) gets rows [o[off], o[off+rows]) of it.
func walkKudo(cols []Column, off, rows int, fn func(c *Column, byteChild bool, off, rows int)) {
	for i := range cols {
		c := &cols[i]
		fn(c, false, off, rows)
		switch c.Type {
		case Binary:
			s, e := c.childRange(off, off+rows)
			fn(c, true, s, e-s)
		case List, Map:
			s, e := c.childRange(off, off+rows)
			walkKudo(c.Children, s, e-s, fn)
		case Struct:
			walkKudo(c.Children, off, rows, fn)
		}
	}
}

// kudoValidity reports whether the slice (off, rows) of c carries
// validity bytes in a kudo table: c has a bitmap and the slice has rows.
func kudoValidity(c *Column, byteChild bool, rows int) bool {
	return !byteChild && c.Validity != nil && rows > 0
}

// kudoOffsets returns the offsets a kudo table copies for the slice (off,
// rows) of c: the rows+1 source offsets from off, for a column with
// offsets and a slice with rows; nil otherwise.
func kudoOffsets(c *Column, byteChild bool, off, rows int) []int32 {
	if byteChild || !c.Type.HasOffsets() || rows == 0 {
		return nil
	}
	return c.Offsets[off : off+rows+1]
}

// kudoData returns the data bytes a kudo table copies for the slice (off,
// rows) of c: values, the chars of a string, the bytes of a Binary
// column's byte child; nil for lists, structs and Binary's list level.
func kudoData(c *Column, byteChild bool, off, rows int) []byte {
	switch {
	case byteChild:
		return c.Data[off : off+rows]
	case c.Type == Binary || c.Type.Nested() || rows == 0:
		return nil
	}
	return c.dataBytes(off, off+rows)
}

// kudoLayout holds the section lengths of the kudo table of one row range.
type kudoLayout struct {
	header   int // 28 + ceil(C/8)
	validity int // V': validity bytes plus the padding after them
	offsets  int // O'
	data     int // data bytes, without padding
}

func (l *kudoLayout) body() int  { return l.validity + l.offsets + pad4(l.data) }
func (l *kudoLayout) total() int { return l.header + l.body() }

func kudoLayoutOf(b *Batch, start, end int) kudoLayout {
	if len(b.Columns) == 0 {
		return kudoLayout{header: kudoFixedHeader}
	}
	l := kudoLayout{header: kudoFixedHeader + (kudoFlatColumns(b.Columns)+7)/8}
	v := 0
	if !b.hasNested() {
		// Every column at the table's slice: no walk (and no closure)
		// on the path of flat batches.
		n := end - start
		for i := range b.Columns {
			c := &b.Columns[i]
			if c.Validity != nil {
				_, nb := validitySpan(start, n)
				v += nb
			}
			if c.Type.VarWidth() {
				l.offsets += 4 * (n + 1)
			}
			l.data += c.dataLen(start, end)
		}
		l.validity = pad4(l.header+v) - l.header
		return l
	}
	walkKudo(b.Columns, start, end-start, func(c *Column, byteChild bool, off, rows int) {
		if kudoValidity(c, byteChild, rows) {
			_, nb := validitySpan(off, rows)
			v += nb
		}
		if byteChild || rows == 0 {
			if byteChild {
				l.data += rows
			}
			return
		}
		if c.Type.HasOffsets() {
			l.offsets += 4 * (rows + 1)
		}
		if c.Type != Binary && !c.Type.Nested() {
			l.data += c.dataLen(off, off+rows)
		}
	})
	l.validity = pad4(l.header+v) - l.header
	return l
}

// KudoSize returns the length of the kudo table of rows [rowStart, rowEnd)
// of b, in time proportional to the number of columns: 0 for an empty
// range, which has no table. b must be valid and the range within it; the
// result may exceed MaxKudoTableSize.
func KudoSize(b *Batch, rowStart, rowEnd int) int {
	if rowStart == rowEnd {
		return 0
	}
	l := kudoLayoutOf(b, rowStart, rowEnd)
	return l.total()
}

// putKudoHeader writes the header of the table of rows [start, end) of b
// into out, which has l.header bytes.
func putKudoHeader(out []byte, b *Batch, start, end int, l *kudoLayout) {
	n := end - start
	copy(out, kudoMagic[:])
	be := binary.BigEndian
	if len(b.Columns) == 0 {
		// KudoSerializer.writeRowCountToStream: row offset 0, no body.
		be.PutUint32(out[4:], 0)
		be.PutUint32(out[8:], uint32(n))
		clear(out[12:kudoFixedHeader])
		return
	}
	be.PutUint32(out[4:], uint32(start))
	be.PutUint32(out[8:], uint32(n))
	be.PutUint32(out[12:], uint32(l.validity))
	be.PutUint32(out[16:], uint32(l.offsets))
	be.PutUint32(out[20:], uint32(l.body()))
	be.PutUint32(out[24:], uint32(kudoFlatColumns(b.Columns)))
	bits := out[kudoFixedHeader:l.header]
	clear(bits)
	flat := 0
	if !b.hasNested() {
		for i := range b.Columns {
			if b.Columns[i].Validity != nil {
				bits[flat>>3] |= 1 << (flat & 7)
			}
			flat++
			if b.Columns[i].Type == Binary {
				flat++ // the byte child has no validity
			}
		}
		return
	}
	walkKudo(b.Columns, start, n, func(c *Column, byteChild bool, _, rows int) {
		if kudoValidity(c, byteChild, rows) {
			bits[flat>>3] |= 1 << (flat & 7)
		}
		flat++
	})
}

// kudoSections calls emit with the body's pieces in order: source bytes of
// b, or nil with a count for zero padding. AppendKudo walks it; WriteKudo
// makes the same walk inline for batches without nested columns.
func kudoSections(b *Batch, start, end int, l *kudoLayout, emit func(p []byte, zeros int)) {
	n := end - start
	v := 0
	if !b.hasNested() {
		for i := range b.Columns {
			if c := &b.Columns[i]; c.Validity != nil {
				first, nb := validitySpan(start, n)
				emit(c.Validity[first:first+nb], 0)
				v += nb
			}
		}
		emit(nil, l.validity-v)
		for i := range b.Columns {
			if c := &b.Columns[i]; c.Type.VarWidth() {
				emit(int32Bytes(c.Offsets[start:end+1]), 0)
			}
		}
		for i := range b.Columns {
			if d := b.Columns[i].dataBytes(start, end); len(d) > 0 {
				emit(d, 0)
			}
		}
		emit(nil, pad4(l.data)-l.data)
		return
	}
	walkKudo(b.Columns, start, n, func(c *Column, byteChild bool, off, rows int) {
		if kudoValidity(c, byteChild, rows) {
			first, nb := validitySpan(off, rows)
			emit(c.Validity[first:first+nb], 0)
			v += nb
		}
	})
	emit(nil, l.validity-v)
	walkKudo(b.Columns, start, n, func(c *Column, byteChild bool, off, rows int) {
		if o := kudoOffsets(c, byteChild, off, rows); o != nil {
			emit(int32Bytes(o), 0)
		}
	})
	walkKudo(b.Columns, start, n, func(c *Column, byteChild bool, off, rows int) {
		if d := kudoData(c, byteChild, off, rows); len(d) > 0 {
			emit(d, 0)
		}
	})
	emit(nil, pad4(l.data)-l.data)
}

// int32Bytes returns the little-endian bytes of v: v's own memory on a
// little-endian machine, a copy elsewhere.
func int32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	if nativeLittleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
	}
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(x))
	}
	return out
}

// AppendKudo appends the kudo table of rows [rowStart, rowEnd) of b to dst
// and returns the extended slice: the bytes spark-rapids-jni's
// KudoSerializer writes for that slice of the same buffers
// (writeRowCountToStream for a batch without columns). An empty range
// appends nothing, as KudoSerializer writes no table of 0 rows. b must be
// valid and the range within it; it panics if the table would exceed
// MaxKudoTableSize (Kudo.Split avoids that).
func AppendKudo(dst []byte, b *Batch, rowStart, rowEnd int) []byte {
	checkRange(b, rowStart, rowEnd)
	if rowStart == rowEnd {
		return dst
	}
	l := kudoLayoutOf(b, rowStart, rowEnd)
	size := l.total()
	if size > MaxKudoTableSize {
		panic(fmt.Sprintf("partition: kudo table of rows [%d,%d) is %d bytes, more than MaxKudoTableSize", rowStart, rowEnd, size))
	}
	dst, out := grow(dst, size)
	putKudoHeader(out, b, rowStart, rowEnd, &l)
	pos := l.header
	if len(b.Columns) > 0 {
		kudoSections(b, rowStart, rowEnd, &l, func(p []byte, zeros int) {
			pos += copy(out[pos:], p)
			clear(out[pos : pos+zeros])
			pos += zeros
		})
	}
	if pos != size {
		panic(fmt.Sprintf("partition: kudo table of rows [%d,%d) filled %d of %d bytes", rowStart, rowEnd, pos, size))
	}
	return dst
}

// WriteKudo writes the kudo table of rows [rowStart, rowEnd) of b to w, the
// bytes AppendKudo produces, without building it in memory: only the
// header passes through a small buffer; every buffer of b goes to w as it
// is (one Write per column and section). It returns the bytes written;
// after a write error w may hold part of the table. An empty range writes
// nothing. A row range outside b or a table larger than MaxKudoTableSize is
// an ErrInvalidArgument or ErrBlockTooLarge error, and nothing is written.
func WriteKudo(w io.Writer, b *Batch, rowStart, rowEnd int) (int64, error) {
	if rowStart < 0 || rowStart > rowEnd || rowEnd > b.Rows {
		return 0, fmt.Errorf("%w: row range [%d,%d) outside [0,%d)", ErrInvalidArgument, rowStart, rowEnd, b.Rows)
	}
	if rowStart == rowEnd {
		return 0, nil
	}
	l := kudoLayoutOf(b, rowStart, rowEnd)
	size := l.total()
	if size > MaxKudoTableSize {
		return 0, fmt.Errorf("%w: rows [%d,%d) make a %d-byte kudo table, more than %d", ErrBlockTooLarge, rowStart, rowEnd, size, MaxKudoTableSize)
	}
	if b.hasNested() {
		// Children take slices of their own: the walk goes through
		// AppendKudo, and the table is written at once.
		n, err := w.Write(AppendKudo(nil, b, rowStart, rowEnd))
		return int64(n), err
	}
	// The header goes through a pooled buffer: one on the stack would
	// escape to the heap through w.Write.
	bufp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(bufp)
	if cap(*bufp) < l.header {
		*bufp = make([]byte, 0, l.header)
	}
	head := (*bufp)[:l.header]
	putKudoHeader(head, b, rowStart, rowEnd, &l)
	sw := sliceWriter{w: w}
	sw.write(head)
	if len(b.Columns) > 0 {
		// kudoSections' walk, without a closure (which would allocate).
		n := rowEnd - rowStart
		v := 0
		for i := range b.Columns {
			if c := &b.Columns[i]; c.Validity != nil {
				first, nb := validitySpan(rowStart, n)
				sw.write(c.Validity[first : first+nb])
				v += nb
			}
		}
		sw.write(zeroPadding[:l.validity-v])
		for i := range b.Columns {
			if c := &b.Columns[i]; c.Type.VarWidth() {
				sw.write(int32Bytes(c.Offsets[rowStart : rowEnd+1]))
			}
		}
		for i := range b.Columns {
			sw.write(b.Columns[i].dataBytes(rowStart, rowEnd))
		}
		sw.write(zeroPadding[:pad4(l.data)-l.data])
	}
	if sw.err == nil && sw.n != int64(size) {
		panic(fmt.Sprintf("partition: WriteKudo of rows [%d,%d) wrote %d of %d bytes", rowStart, rowEnd, sw.n, size))
	}
	return sw.n, sw.err
}
