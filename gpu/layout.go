package gpu

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/shuffled/shuffled/partition"
)

// Range is a byte range of a device allocation.
type Range struct {
	Offset, Length int64
}

func (r Range) end() int64 { return r.Offset + r.Length }

// Column locates one column of a columnar batch in device memory, in the
// layout of package partition (Arrow/cuDF): an optional LSB-first validity
// bitmap, int32 offsets (rows+1) for String, Binary, List and Map, and the
// data (none for the nested types).
type Column struct {
	Type                    partition.Type
	Validity, Offsets, Data Range
	// Children is the number of child columns of a nested type (List and
	// Map: 1, Struct: its fields), 0 for every other type. The children
	// follow their parent in Layout.Columns, each with its own children
	// after it (depth-first pre-order), as on the wire.
	Children int
}

// Layout locates a columnar batch of Rows rows in one device allocation.
type Layout struct {
	Rows    int
	Columns []Column
}

// Validate checks that every buffer lies inside an allocation of size
// bytes and that offset and fixed-width buffers are aligned to their
// element size (the kernels read them as words); that the columns form
// whole trees (a List one child, a Map one Struct of two, no children
// below other types, at most partition.MaxNestingDepth levels); and that
// the buffers of each column whose row count the layout gives (the
// top-level columns and their struct fields: a list's child has the rows
// its parent's offsets reach, which the host does not have yet) are large
// enough for those rows.
func (l *Layout) Validate(size int64) error {
	if l.Rows < 0 || l.Rows > partition.MaxRows {
		return fmt.Errorf("%w: layout rows %d out of range [0,%d]", ErrInvalid, l.Rows, partition.MaxRows)
	}
	for i, c := range l.Columns {
		if !c.Type.Valid() {
			return fmt.Errorf("%w: column %d: type %v", ErrInvalid, i, c.Type)
		}
		for _, b := range []struct {
			name  string
			r     Range
			align int64
		}{
			{"validity", c.Validity, 1},
			{"offsets", c.Offsets, 4},
			{"data", c.Data, int64(max(c.Type.Width(), 1))},
		} {
			if b.r.Offset < 0 || b.r.Length < 0 || b.r.Offset > size || b.r.Length > size-b.r.Offset {
				return fmt.Errorf("%w: column %d %s: [%d, +%d) outside the allocation of %d bytes", ErrInvalid, i, b.name, b.r.Offset, b.r.Length, size)
			}
			if b.r.Length > 0 && b.r.Offset%b.align != 0 {
				return fmt.Errorf("%w: column %d %s: offset %d is not a multiple of %d", ErrInvalid, i, b.name, b.r.Offset, b.align)
			}
		}
		if !c.Type.HasOffsets() && c.Offsets.Length != 0 {
			return fmt.Errorf("%w: column %d offsets: %d bytes for a %v column", ErrInvalid, i, c.Offsets.Length, c.Type)
		}
		if c.Type.Nested() && c.Data.Length != 0 {
			return fmt.Errorf("%w: column %d data: %d bytes for a %v column", ErrInvalid, i, c.Data.Length, c.Type)
		}
		if c.Children < 0 || c.Children > len(l.Columns) {
			return fmt.Errorf("%w: column %d: %d children", ErrInvalid, i, c.Children)
		}
		switch c.Type {
		case partition.List:
			if c.Children != 1 {
				return fmt.Errorf("%w: column %d: %d children on a list column, want 1 (the elements)", ErrInvalid, i, c.Children)
			}
		case partition.Map:
			if c.Children != 1 || i+1 >= len(l.Columns) || l.Columns[i+1].Type != partition.Struct || l.Columns[i+1].Children != 2 {
				return fmt.Errorf("%w: column %d: the children of a map column, want one struct of two children (keys, values)", ErrInvalid, i)
			}
		case partition.Struct:
		default:
			if c.Children != 0 {
				return fmt.Errorf("%w: column %d: %d children on a %v column, want none", ErrInvalid, i, c.Children, c.Type)
			}
		}
	}
	// The trees, with the rows the layout gives (-1 below a list).
	return l.walk(func(i, rows int) (int, error) {
		if rows >= 0 {
			if err := l.checkRows(i, rows); err != nil {
				return 0, err
			}
		}
		if l.Columns[i].Type.HasOffsets() {
			return -1, nil
		}
		return rows, nil
	})
}

// walk calls fn for each column in pre-order with its rows: the layout's
// for a top-level column, for the children of a column what fn returned
// for it. It returns an ErrInvalid error for columns that end inside a
// nested column's children or nest deeper than partition.MaxNestingDepth,
// and fn's first error.
func (l *Layout) walk(fn func(i, rows int) (childRows int, err error)) error {
	next := 0
	var visit func(rows, depth int) error
	visit = func(rows, depth int) error {
		i := next
		if i >= len(l.Columns) {
			return fmt.Errorf("%w: the columns end inside a nested column's children", ErrInvalid)
		}
		if depth > partition.MaxNestingDepth {
			return fmt.Errorf("%w: column %d: nested deeper than %d levels", ErrInvalid, i, partition.MaxNestingDepth)
		}
		next++
		childRows, err := fn(i, rows)
		if err != nil {
			return err
		}
		for range l.Columns[i].Children {
			if err := visit(childRows, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for next < len(l.Columns) {
		if err := visit(l.Rows, 0); err != nil {
			return err
		}
	}
	return nil
}

// checkRows checks that column i's buffers are large enough for rows
// rows.
func (l *Layout) checkRows(i, rows int) error {
	c := &l.Columns[i]
	r := int64(rows)
	if v := c.Validity.Length; v != 0 && v < (r+7)/8 {
		return fmt.Errorf("%w: column %d validity: %d bytes for %d rows", ErrInvalid, i, v, r)
	}
	if c.Type.HasOffsets() {
		if r > 0 && c.Offsets.Length < 4*(r+1) {
			return fmt.Errorf("%w: column %d offsets: %d bytes for %d rows, want %d", ErrInvalid, i, c.Offsets.Length, r, 4*(r+1))
		}
		return nil
	}
	if w := int64(c.Type.Width()); w > 0 && c.Data.Length/w < r {
		return fmt.Errorf("%w: column %d data: %d bytes for %d rows of %v", ErrInvalid, i, c.Data.Length, r, c.Type)
	}
	if c.Type == partition.Void && r > 0 && c.Validity.Length == 0 {
		return fmt.Errorf("%w: column %d: void column of %d rows without a validity bitmap, want every row null", ErrInvalid, i, r)
	}
	return nil
}

// HostBuffers are host copies of the buffers of a device batch that
// PlanColumnar reads, by column (nil where it reads none): the rows+1
// offsets of each String, Binary, List and Map column (String and Binary
// offsets give each slice's data bytes, List and Map offsets each child's
// rows), and the validity bitmap of each Void column (checked to be all
// null).
type HostBuffers struct {
	Offsets  [][]int32
	Validity [][]byte
}

// ReadHost makes the host copies PlanColumnar needs of the batch l
// locates in an allocation that l.Validate has passed, calling read to
// copy len(dst) bytes from offset off of the allocation into dst. It
// reads the columns in pre-order, so that each list's child is read for
// the rows its parent's offsets reach. It returns the copies and the
// bytes read; a layout whose offsets do not check out is an ErrInvalid
// error, and read's errors are returned as they are.
func (l *Layout) ReadHost(read func(dst []byte, off int64) error) (HostBuffers, int64, error) {
	h := HostBuffers{Offsets: make([][]int32, len(l.Columns)), Validity: make([][]byte, len(l.Columns))}
	var copied int64
	err := l.walk(func(i, rows int) (int, error) {
		c := &l.Columns[i]
		if err := l.checkRows(i, rows); err != nil {
			return 0, err
		}
		if c.Type == partition.Void && rows > 0 {
			v := make([]byte, (rows+7)/8)
			if err := read(v, c.Validity.Offset); err != nil {
				return 0, err
			}
			h.Validity[i] = v
			copied += int64(len(v))
		}
		if !c.Type.HasOffsets() {
			return rows, nil
		}
		if c.Offsets.Length < 4 {
			return 0, nil // rows is 0 (checkRows)
		}
		n := min(c.Offsets.Length/4, int64(rows)+1)
		o := make([]int32, n)
		b := unsafe.Slice((*byte)(unsafe.Pointer(&o[0])), 4*n)
		if err := read(b, c.Offsets.Offset); err != nil {
			return 0, err
		}
		if !partition.NativeLittleEndian() {
			for r := range o {
				o[r] = int32(binary.LittleEndian.Uint32(b[4*r:]))
			}
		}
		h.Offsets[i] = o
		copied += 4 * n
		if rows == 0 {
			return 0, nil
		}
		last := o[rows]
		if last < 0 {
			return 0, fmt.Errorf("%w: column %d: offsets[%d] = %d, negative", ErrInvalid, i, rows, last)
		}
		if c.Type.VarWidth() {
			return rows, nil
		}
		return int(last), nil
	})
	if err != nil {
		return HostBuffers{}, 0, err
	}
	return h, copied, nil
}
