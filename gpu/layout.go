package gpu

import (
	"fmt"

	"github.com/shuffled/shuffled/partition"
)

// Range is a byte range of a device allocation.
type Range struct {
	Offset, Length int64
}

func (r Range) end() int64 { return r.Offset + r.Length }

// Column locates one column of a columnar batch in device memory, in the
// layout of package partition (Arrow/cuDF): an optional LSB-first validity
// bitmap, int32 offsets (rows+1) for String and Binary, and the data.
type Column struct {
	Type                    partition.Type
	Validity, Offsets, Data Range
}

// Layout locates a columnar batch of Rows rows in one device allocation.
type Layout struct {
	Rows    int
	Columns []Column
}

// Validate checks that every buffer lies inside an allocation of size
// bytes and is large enough for Rows rows of its column's type, and that
// offset and fixed-width buffers are aligned to their element size (the
// kernels read them as words).
func (l *Layout) Validate(size int64) error {
	if l.Rows < 0 || l.Rows > partition.MaxRows {
		return fmt.Errorf("%w: layout rows %d out of range [0,%d]", ErrInvalid, l.Rows, partition.MaxRows)
	}
	rows := int64(l.Rows)
	for i, c := range l.Columns {
		if !c.Type.Valid() {
			return fmt.Errorf("%w: column %d: type %v", ErrInvalid, i, c.Type)
		}
		for _, b := range []struct {
			name  string
			r     Range
			align int64
			need  int64
		}{
			{"validity", c.Validity, 1, 0},
			{"offsets", c.Offsets, 4, 0},
			{"data", c.Data, int64(max(c.Type.Width(), 1)), 0},
		} {
			if b.r.Offset < 0 || b.r.Length < 0 || b.r.Offset > size || b.r.Length > size-b.r.Offset {
				return fmt.Errorf("%w: column %d %s: [%d, +%d) outside the allocation of %d bytes", ErrInvalid, i, b.name, b.r.Offset, b.r.Length, size)
			}
			if b.r.Length > 0 && b.r.Offset%b.align != 0 {
				return fmt.Errorf("%w: column %d %s: offset %d is not a multiple of %d", ErrInvalid, i, b.name, b.r.Offset, b.align)
			}
		}
		if v := c.Validity.Length; v != 0 && v < (rows+7)/8 {
			return fmt.Errorf("%w: column %d validity: %d bytes for %d rows", ErrInvalid, i, v, rows)
		}
		if c.Type.VarWidth() {
			if rows > 0 && c.Offsets.Length < 4*(rows+1) {
				return fmt.Errorf("%w: column %d offsets: %d bytes for %d rows, want %d", ErrInvalid, i, c.Offsets.Length, rows, 4*(rows+1))
			}
			continue
		}
		if c.Offsets.Length != 0 {
			return fmt.Errorf("%w: column %d offsets: %d bytes for fixed-width %v", ErrInvalid, i, c.Offsets.Length, c.Type)
		}
		if w := int64(c.Type.Width()); c.Data.Length/w < rows {
			return fmt.Errorf("%w: column %d data: %d bytes for %d rows of %v", ErrInvalid, i, c.Data.Length, rows, c.Type)
		}
	}
	return nil
}
