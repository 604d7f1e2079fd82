package partition

import (
	"errors"
	"fmt"
)

// ErrInvalidBatch is wrapped by every error Validate returns.
var ErrInvalidBatch = errors.New("partition: invalid batch")

// Validate checks everything a client can get wrong in b: the row count,
// partition offsets, and for each column its type, decimal precision and
// scale, name length, and the lengths of its validity bitmap, offsets and
// data. String and Binary offsets are checked one by one, so Validate costs
// a pass over them. The error wraps ErrInvalidBatch and names the column
// (index and name), the field and the offending value.
func (b *Batch) Validate() error {
	if b.Rows < 0 || b.Rows > MaxRows {
		return fmt.Errorf("%w: rows = %d, want 0 to %d", ErrInvalidBatch, b.Rows, MaxRows)
	}
	if len(b.Columns) > MaxColumns {
		return fmt.Errorf("%w: %d columns, want at most %d", ErrInvalidBatch, len(b.Columns), MaxColumns)
	}
	if err := b.validatePartitionOffsets(); err != nil {
		return err
	}
	for i := range b.Columns {
		if err := b.Columns[i].validate(b.Rows); err != nil {
			return fmt.Errorf("%w: column %d %q: %w", ErrInvalidBatch, i, b.Columns[i].Name, err)
		}
	}
	return nil
}

func (b *Batch) validatePartitionOffsets() error {
	po := b.PartitionOffsets
	if po == nil {
		return nil
	}
	if len(po) < 2 {
		return fmt.Errorf("%w: partition offsets: length %d, want numPartitions+1 >= 2", ErrInvalidBatch, len(po))
	}
	if po[0] != 0 {
		return fmt.Errorf("%w: partition offsets[0] = %d, want 0", ErrInvalidBatch, po[0])
	}
	for p := 1; p < len(po); p++ {
		if po[p] < po[p-1] {
			return fmt.Errorf("%w: partition offsets[%d] = %d, less than offsets[%d] = %d",
				ErrInvalidBatch, p, po[p], p-1, po[p-1])
		}
	}
	if last := po[len(po)-1]; int(last) != b.Rows {
		return fmt.Errorf("%w: partition offsets[%d] = %d, want rows = %d",
			ErrInvalidBatch, len(po)-1, last, b.Rows)
	}
	return nil
}

// validate checks c as a column of rows rows; the error names the field and
// value but not the column, which the caller adds.
func (c *Column) validate(rows int) error {
	if !c.Type.Valid() {
		return fmt.Errorf("type = %d, not a known type", uint8(c.Type))
	}
	if len(c.Name) > MaxNameLen {
		return fmt.Errorf("name length = %d, want at most %d", len(c.Name), MaxNameLen)
	}
	if mp := c.Type.MaxPrecision(); mp > 0 {
		if c.Precision < 1 || int(c.Precision) > mp {
			return fmt.Errorf("decimal precision = %d, want 1 to %d for %v", c.Precision, mp, c.Type)
		}
		if c.Scale < 0 || c.Scale > c.Precision {
			return fmt.Errorf("decimal scale = %d, want 0 to precision %d", c.Scale, c.Precision)
		}
	} else if c.Precision != 0 || c.Scale != 0 {
		return fmt.Errorf("precision, scale = %d, %d on a %v column, want 0, 0", c.Precision, c.Scale, c.Type)
	}
	if c.Validity != nil {
		if want := (rows + 7) / 8; len(c.Validity) < want {
			return fmt.Errorf("validity length = %d bytes, want at least %d for %d rows", len(c.Validity), want, rows)
		}
	}
	if !c.Type.VarWidth() {
		if c.Offsets != nil {
			return fmt.Errorf("offsets length = %d on a fixed-width %v column, want nil", len(c.Offsets), c.Type)
		}
		if want := rows * c.Type.Width(); len(c.Data) < want {
			return fmt.Errorf("data length = %d bytes, want at least %d (%d rows × %d)", len(c.Data), want, rows, c.Type.Width())
		}
		return nil
	}
	return validateOffsets(c.Offsets, rows, len(c.Data))
}

// validateOffsets checks that off holds rows+1 non-decreasing offsets from
// 0 to at most dataLen (or none at all when rows is 0).
func validateOffsets(off []int32, rows, dataLen int) error {
	if rows == 0 && len(off) == 0 {
		return nil
	}
	if len(off) < rows+1 {
		return fmt.Errorf("offsets length = %d, want at least rows+1 = %d", len(off), rows+1)
	}
	off = off[:rows+1]
	if off[0] != 0 {
		return fmt.Errorf("offsets[0] = %d, want 0", off[0])
	}
	// One pass without branches on the common path: a decrease makes the
	// difference or the value negative (the difference of two non-negative
	// int32s cannot overflow), which sets the sign bit of the accumulator.
	var bad int32
	for i := 1; i < len(off); i++ {
		bad |= off[i] | (off[i] - off[i-1])
	}
	if bad < 0 {
		for i := 1; i < len(off); i++ {
			if off[i] < off[i-1] {
				return fmt.Errorf("offsets[%d] = %d, less than offsets[%d] = %d", i, off[i], i-1, off[i-1])
			}
		}
	}
	if last := off[rows]; int(last) > dataLen {
		return fmt.Errorf("offsets[%d] = %d, past the end of data (length %d)", rows, last, dataLen)
	}
	return nil
}
