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
	return l.walkRows(func(i, rows int) (int, error) {
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

// walkRows is walk calling fn with each column's rows: the layout's for a
// top-level column, for the children of a column what fn returned for it.
func (l *Layout) walkRows(fn func(i, rows int) (childRows int, err error)) error {
	childRows := make([]int, len(l.Columns))
	return l.walk(func(i, parent int) (err error) {
		rows := l.Rows
		if parent >= 0 {
			rows = childRows[parent]
		}
		childRows[i], err = fn(i, rows)
		return err
	})
}

// walk calls fn for each column in pre-order with the index of its parent
// (-1 for a top-level column). It returns an ErrInvalid error for columns
// that end inside a nested column's children or nest deeper than
// partition.MaxNestingDepth, and fn's first error.
func (l *Layout) walk(fn func(i, parent int) error) error {
	next := 0
	var visit func(parent, depth int) error
	visit = func(parent, depth int) error {
		i := next
		if i >= len(l.Columns) {
			return fmt.Errorf("%w: the columns end inside a nested column's children", ErrInvalid)
		}
		if depth > partition.MaxNestingDepth {
			return fmt.Errorf("%w: column %d: nested deeper than %d levels", ErrInvalid, i, partition.MaxNestingDepth)
		}
		next++
		if err := fn(i, parent); err != nil {
			return err
		}
		for range l.Columns[i].Children {
			if err := visit(i, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for next < len(l.Columns) {
		if err := visit(-1, 0); err != nil {
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
// returns the copies and the bytes read; a layout whose offsets do not
// check out is an ErrInvalid error, and read's errors are returned as they
// are. HostReader makes the same copies from device memory.
func (l *Layout) ReadHost(read func(dst []byte, off int64) error) (HostBuffers, int64, error) {
	return l.readHost(heapCopier(read))
}

// hostCopy is one copy readHost asks for: len(dst) bytes at offset off of
// the allocation into dst.
type hostCopy struct {
	dst []byte
	off int64
}

// hostCopier makes readHost's copies.
type hostCopier interface {
	// buf returns n bytes of host memory, aligned for int32s, that a copy
	// of this read lands in.
	buf(n int) ([]byte, error)
	// copy makes every copy of cs and returns once all have landed.
	copy(cs []hostCopy) error
}

// heapCopier copies into the Go heap, one read call a copy.
type heapCopier func(dst []byte, off int64) error

func (heapCopier) buf(n int) ([]byte, error) {
	o := make([]int32, (n+3)/4)
	return unsafe.Slice((*byte)(unsafe.Pointer(&o[0])), n), nil
}

func (read heapCopier) copy(cs []hostCopy) error {
	for _, c := range cs {
		if err := read(c.dst, c.off); err != nil {
			return err
		}
	}
	return nil
}

// readHost makes the host copies PlanColumnar needs of the batch l
// locates with c, a level of the column trees at a time: first every
// column whose rows the layout gives (the top-level columns and their
// struct fields), all copied at once, then the children of the lists and
// maps of that level, whose rows their parents' offsets give, and so on
// down. Each column's buffers are checked for its rows before they are
// read, and each list's offsets before its child is.
func (l *Layout) readHost(c hostCopier) (HostBuffers, int64, error) {
	n := len(l.Columns)
	// parent[i] is column i's parent (-1 at the top), level[i] the number
	// of its ancestors with offsets: the copies it waits for.
	parent, level := make([]int, n), make([]int, n)
	levels := 0
	err := l.walk(func(i, p int) error {
		parent[i] = p
		if p >= 0 {
			level[i] = level[p]
			if l.Columns[p].Type.HasOffsets() {
				level[i]++
			}
		}
		levels = max(levels, level[i]+1)
		return nil
	})
	if err != nil {
		return HostBuffers{}, 0, err
	}
	h := HostBuffers{Offsets: make([][]int32, n), Validity: make([][]byte, n)}
	// rows[i] is column i's rows, childRows[i] its children's.
	rows, childRows := make([]int, n), make([]int, n)
	var copied int64
	var cs []hostCopy
	for lv := range levels {
		cs = cs[:0]
		for i := range l.Columns {
			if level[i] != lv {
				continue
			}
			col := &l.Columns[i]
			r := l.Rows
			if p := parent[i]; p >= 0 {
				r = childRows[p]
			}
			rows[i], childRows[i] = r, r
			if err := l.checkRows(i, r); err != nil {
				return HostBuffers{}, 0, err
			}
			if col.Type == partition.Void && r > 0 {
				v, err := c.buf((r + 7) / 8)
				if err != nil {
					return HostBuffers{}, 0, err
				}
				cs = append(cs, hostCopy{dst: v, off: col.Validity.Offset})
				h.Validity[i] = v
				copied += int64(len(v))
			}
			if !col.Type.HasOffsets() {
				continue
			}
			childRows[i] = 0 // until the offsets are read
			if col.Offsets.Length < 4 {
				continue // r is 0 (checkRows)
			}
			k := min(col.Offsets.Length/4, int64(r)+1)
			b, err := c.buf(int(4 * k))
			if err != nil {
				return HostBuffers{}, 0, err
			}
			cs = append(cs, hostCopy{dst: b, off: col.Offsets.Offset})
			h.Offsets[i] = unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), k)
			copied += 4 * k
		}
		if len(cs) > 0 {
			if err := c.copy(cs); err != nil {
				return HostBuffers{}, 0, err
			}
		}
		for i := range l.Columns {
			o := h.Offsets[i]
			if level[i] != lv || o == nil {
				continue
			}
			if !partition.NativeLittleEndian() {
				b := unsafe.Slice((*byte)(unsafe.Pointer(&o[0])), 4*len(o))
				for r := range o {
					o[r] = int32(binary.LittleEndian.Uint32(b[4*r:]))
				}
			}
			r := rows[i]
			if r == 0 {
				continue
			}
			last := o[r]
			if last < 0 {
				return HostBuffers{}, 0, fmt.Errorf("%w: column %d: offsets[%d] = %d, negative", ErrInvalid, i, r, last)
			}
			if !l.Columns[i].Type.VarWidth() {
				childRows[i] = int(last)
			}
		}
	}
	return h, copied, nil
}
