package columnar

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
)

// MaxType is the last wire column type this build serializes; the wire
// ids of types 1..MaxType equal partition's.
const MaxType = protocol.TypeVoid

// Supported reports whether this build serializes wire column type t.
func Supported(t protocol.ColumnType) bool { return t != 0 && t <= MaxType }

// View builds a partition.Batch over payload as the layout describes it.
// Buffers alias payload; only unaligned int32 offsets are copied. The
// result still goes through partition.Batch.Validate. A layout that does
// not fit the payload is an errdefs.ErrInvalidArgument error, a column type this
// build does not serialize errdefs.ErrUnsupported; both name the column.
func View(l *protocol.ColumnarLayout, payload []byte) (*partition.Batch, error) {
	if l.Rows < 0 || l.Rows > partition.MaxRows {
		return nil, fmt.Errorf("%w: columnar layout: rows %d out of range [0,%d]", errdefs.ErrInvalidArgument, l.Rows, partition.MaxRows)
	}
	b := &partition.Batch{Rows: int(l.Rows)}
	next := 0
	for next < len(l.Columns) {
		c, err := column(l.Columns, &next, payload, 0)
		if err != nil {
			return nil, err
		}
		b.Columns = append(b.Columns, c)
	}
	if b.Columns == nil {
		b.Columns = []partition.Column{}
	}
	b.PartitionOffsets = make([]int32, len(l.PartitionRows))
	for p, r := range l.PartitionRows {
		if r < 0 || r > l.Rows {
			return nil, fmt.Errorf("%w: columnar layout: partition_rows[%d] = %d out of range [0,%d]", errdefs.ErrInvalidArgument, p, r, l.Rows)
		}
		b.PartitionOffsets[p] = int32(r)
	}
	return b, nil
}

// column builds the column of wire column *next and its children, which
// follow it (depth-first pre-order), advancing *next past them.
func column(cols []protocol.Column, next *int, payload []byte, depth int) (partition.Column, error) {
	i := *next
	if i >= len(cols) {
		return partition.Column{}, fmt.Errorf("%w: columnar layout: the columns end inside a nested column's children", errdefs.ErrInvalidArgument)
	}
	if depth > partition.MaxNestingDepth {
		return partition.Column{}, fmt.Errorf("%w: column %d: nested deeper than %d levels", errdefs.ErrInvalidArgument, i, partition.MaxNestingDepth)
	}
	*next++
	c := &cols[i]
	if !Supported(c.Type) {
		return partition.Column{}, fmt.Errorf("%w: column %d %q: type %v is not supported by this build", errdefs.ErrUnsupported, i, c.Name, c.Type)
	}
	pc := partition.Column{Name: c.Name, Type: partition.Type(c.Type), Precision: int8(c.Precision), Scale: int8(c.Scale)}
	var err error
	if pc.Validity, err = slice(payload, c.Validity, i, "validity"); err != nil {
		return pc, err
	}
	if pc.Data, err = slice(payload, c.Data, i, "data"); err != nil {
		return pc, err
	}
	raw, err := slice(payload, c.Offsets, i, "offsets")
	if err != nil {
		return pc, err
	}
	if pc.Offsets, err = int32s(raw, i); err != nil {
		return pc, err
	}
	if c.Children > 0 {
		pc.Children = make([]partition.Column, c.Children)
		for k := range pc.Children {
			if pc.Children[k], err = column(cols, next, payload, depth+1); err != nil {
				return pc, err
			}
		}
	} else if c.Type == protocol.TypeStruct {
		pc.Children = []partition.Column{}
	}
	return pc, nil
}

// slice returns the bytes of buf inside payload, nil for an empty buffer.
func slice(payload []byte, buf protocol.Buffer, col int, field string) ([]byte, error) {
	if buf.Length == 0 {
		return nil, nil
	}
	if buf.Offset < 0 || buf.Length < 0 || buf.Offset > int64(len(payload)) || buf.Length > int64(len(payload))-buf.Offset {
		return nil, fmt.Errorf("%w: column %d %s: (offset %d, length %d) outside the payload of %d bytes", errdefs.ErrInvalidArgument, col, field, buf.Offset, buf.Length, len(payload))
	}
	return payload[buf.Offset : buf.Offset+buf.Length : buf.Offset+buf.Length], nil
}

// int32s views little-endian int32 offsets without a copy when they are
// aligned and the machine is little-endian, and copies them otherwise.
func int32s(raw []byte, col int) ([]int32, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if len(raw)%4 != 0 {
		return nil, fmt.Errorf("%w: column %d offsets: length %d is not a multiple of 4", errdefs.ErrInvalidArgument, col, len(raw))
	}
	n := len(raw) / 4
	if partition.NativeLittleEndian() && uintptr(unsafe.Pointer(&raw[0]))%4 == 0 {
		return unsafe.Slice((*int32)(unsafe.Pointer(&raw[0])), n), nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}

// Skeleton returns a batch of l's columns (names, types, precisions,
// scales and children, at every depth) and rows, without buffers: what a
// map output's declared columns are compared with (partition.CheckSchema)
// before a batch's buffers are read. Columns that end inside a nested
// column's children are left out.
func Skeleton(l *protocol.ColumnarLayout) *partition.Batch {
	b := &partition.Batch{Rows: int(l.Rows), Columns: []partition.Column{}}
	next := 0
	var column func(depth int) (partition.Column, bool)
	column = func(depth int) (partition.Column, bool) {
		if next >= len(l.Columns) || depth > partition.MaxNestingDepth {
			return partition.Column{}, false
		}
		c := &l.Columns[next]
		next++
		pc := partition.Column{Name: c.Name, Type: partition.Type(c.Type), Precision: int8(c.Precision), Scale: int8(c.Scale)}
		if c.Children > 0 || c.Type == protocol.TypeStruct {
			pc.Children = make([]partition.Column, 0, c.Children)
		}
		for range c.Children {
			child, ok := column(depth + 1)
			if !ok {
				return pc, false
			}
			pc.Children = append(pc.Children, child)
		}
		return pc, true
	}
	for next < len(l.Columns) {
		c, ok := column(0)
		if !ok {
			break
		}
		b.Columns = append(b.Columns, c)
	}
	return b
}
