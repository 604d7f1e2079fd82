package partition

import (
	"fmt"

	"github.com/shuffled/shuffled/errdefs"
)

// ErrInvalidBatch is wrapped by every error Validate returns.
var ErrInvalidBatch = errdefs.New(errdefs.ErrInvalidArgument, "partition: invalid batch")

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
	if n := flatCount(b.Columns); n > MaxColumns {
		return fmt.Errorf("%w: %d columns with their nested children, want at most %d", ErrInvalidBatch, n, MaxColumns)
	}
	if err := b.validatePartitionOffsets(); err != nil {
		return err
	}
	for i := range b.Columns {
		if err := b.Columns[i].validate(b.Rows, 0); err != nil {
			return fmt.Errorf("%w: column %d %q%w", ErrInvalidBatch, i, b.Columns[i].Name, err)
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

// pathError is an error inside a column: the path from the top-level
// column to the one at fault (".name" or "[child i]" per level), then the
// field and value. Its text starts with the path or ": ".
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// inChild prefixes err, from child i of a column, with the child's name.
func inChild(err error, i int, name string) error {
	step := fmt.Sprintf(".[%d]", i)
	if name != "" {
		step = fmt.Sprintf(".%s", name)
	}
	if pe, ok := err.(*pathError); ok {
		return &pathError{path: step + pe.path, err: pe.err}
	}
	return &pathError{path: step, err: err}
}

// validate checks c as a column of rows rows, and its children; the error
// names the path below c, the field and the value, but not c, which the
// caller adds.
func (c *Column) validate(rows, depth int) error {
	if depth > MaxNestingDepth {
		return &pathError{err: fmt.Errorf("nested deeper than %d levels", MaxNestingDepth)}
	}
	if err := c.validateSelf(rows); err != nil {
		return &pathError{err: err}
	}
	switch c.Type {
	case List, Map:
		_, childRows := c.childRange(0, rows)
		if rows == 0 {
			childRows = 0
		}
		if err := c.Children[0].validate(childRows, depth+1); err != nil {
			return inChild(err, 0, c.Children[0].Name)
		}
	case Struct:
		for i := range c.Children {
			if err := c.Children[i].validate(rows, depth+1); err != nil {
				return inChild(err, i, c.Children[i].Name)
			}
		}
	}
	return nil
}

// validateSelf checks c's own fields as a column of rows rows.
func (c *Column) validateSelf(rows int) error {
	if !c.Type.Valid() {
		return fmt.Errorf("type = %d, not a known type", uint8(c.Type))
	}
	if len(c.Name) > MaxNameLen {
		return fmt.Errorf("name length = %d, want at most %d", len(c.Name), MaxNameLen)
	}
	if err := CheckDecimal(c.Type, int(c.Precision), int(c.Scale)); err != nil {
		return err
	}
	if c.Validity != nil {
		if want := (rows + 7) / 8; len(c.Validity) < want {
			return fmt.Errorf("validity length = %d bytes, want at least %d for %d rows", len(c.Validity), want, rows)
		}
	}
	if err := c.checkChildren(); err != nil {
		return err
	}
	switch {
	case c.Type.FixedWidth():
		if c.Offsets != nil {
			return fmt.Errorf("offsets length = %d on a fixed-width %v column, want nil", len(c.Offsets), c.Type)
		}
		if want := rows * c.Type.Width(); len(c.Data) < want {
			return fmt.Errorf("data length = %d bytes, want at least %d (%d rows × %d)", len(c.Data), want, rows, c.Type.Width())
		}
		if c.Type == Void && rows > 0 {
			if c.Validity == nil {
				return fmt.Errorf("void column of %d rows without a validity bitmap, want every row null", rows)
			}
			if n := countOnes(c.Validity, 0, rows); n != 0 {
				return fmt.Errorf("void column: %d of %d rows valid in the validity bitmap, want every row null", n, rows)
			}
		}
		return nil
	case c.Type.VarWidth():
		return ValidateOffsets(c.Offsets, rows, len(c.Data))
	case c.Type == Struct:
		if c.Offsets != nil || c.Data != nil {
			return fmt.Errorf("offsets, data lengths = %d, %d on a struct column, want nil", len(c.Offsets), len(c.Data))
		}
		return nil
	}
	// List and Map: the offsets index the child's rows, which the child
	// checks against its own buffers.
	if c.Data != nil {
		return fmt.Errorf("data length = %d on a %v column, want nil", len(c.Data), c.Type)
	}
	return ValidateOffsets(c.Offsets, rows, MaxRows)
}

// checkChildren checks the number and types of c's children.
func (c *Column) checkChildren() error {
	switch c.Type {
	case List:
		if len(c.Children) != 1 {
			return fmt.Errorf("%d children on a list column, want 1 (the elements)", len(c.Children))
		}
	case Map:
		if len(c.Children) != 1 || c.Children[0].Type != Struct || len(c.Children[0].Children) != 2 {
			return fmt.Errorf("children of a map column: want one struct of two children (keys, values)")
		}
	case Struct:
	default:
		if c.Children != nil {
			return fmt.Errorf("%d children on a %v column, want none", len(c.Children), c.Type)
		}
	}
	return nil
}

// ValidateOffsets checks that off holds rows+1 non-decreasing offsets from
// 0 to at most dataLen (or none at all when rows is 0), as Validate checks
// a column's offsets: dataLen is the data's length for String and Binary,
// MaxRows for List and Map (the child's rows, which the child's own
// checks bound).
func ValidateOffsets(off []int32, rows, dataLen int) error {
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
	// Eight offsets a step, each loaded once, in two accumulators.
	var bad, bad2 int32
	prev, i := off[0], 1
	for ; i+8 <= len(off); i += 8 {
		s := off[i : i+8 : i+8]
		bad |= s[0] | s[1] | s[2] | s[3] | (s[0] - prev) | (s[1] - s[0]) | (s[2] - s[1]) | (s[3] - s[2])
		bad2 |= s[4] | s[5] | s[6] | s[7] | (s[4] - s[3]) | (s[5] - s[4]) | (s[6] - s[5]) | (s[7] - s[6])
		prev = s[7]
	}
	for ; i < len(off); i++ {
		bad |= off[i] | (off[i] - prev)
		prev = off[i]
	}
	bad |= bad2
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

// CheckDecimal checks a column's precision and scale as Validate does: in
// range for a decimal type (1 to t.MaxPrecision, and 0 to precision), zero
// for every other type. It takes them wider than Column holds them, so a
// layout's values are checked before they are narrowed.
func CheckDecimal(t Type, precision, scale int) error {
	if mp := t.MaxPrecision(); mp > 0 {
		if precision < 1 || precision > mp {
			return fmt.Errorf("decimal precision = %d, want 1 to %d for %v", precision, mp, t)
		}
		if scale < 0 || scale > precision {
			return fmt.Errorf("decimal scale = %d, want 0 to precision %d", scale, precision)
		}
		return nil
	}
	if precision != 0 || scale != 0 {
		return fmt.Errorf("precision, scale = %d, %d on a %v column, want 0, 0", precision, scale, t)
	}
	return nil
}
