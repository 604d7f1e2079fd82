package server

import (
	"fmt"

	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
)

// gpuPlans returns nil if the GPU compression plans lay out device batch m
// of a map output of format f: an opaque batch always (its bytes are the
// client's), a columnar one when gpu.Covers its format and every column
// type, at every depth. Otherwise it returns why not, and the batch takes
// the CPU path (staged whole, serialized and compressed by the pool),
// which also reports what is wrong with a batch that is invalid.
func gpuPlans(f partition.Format, m *protocol.Batch) error {
	switch m.Kind {
	case protocol.KindOpaque:
		return nil
	case protocol.KindColumnar:
	default:
		return fmt.Errorf("%w: Batch.kind %v", gpu.ErrNotCovered, m.Kind)
	}
	types := make([]partition.Type, len(m.Columnar.Columns))
	for i, c := range m.Columnar.Columns {
		if c.Type == 0 || c.Type > maxColumnType {
			return fmt.Errorf("%w: column %d type %v", gpu.ErrNotCovered, i, c.Type)
		}
		types[i] = partition.Type(c.Type)
	}
	return gpu.Covers(f, types)
}

// checkDecimal checks precision and scale as partition.Batch.Validate
// does: in range for a decimal type, zero for every other type.
func checkDecimal(t partition.Type, precision, scale int32) error {
	if mp := t.MaxPrecision(); mp > 0 {
		if precision < 1 || precision > int32(mp) {
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

// skeletonOf returns a batch of cl's columns (names, types, precisions,
// scales and children, at every depth) and rows, without buffers: what
// o.checkColumns compares with the columns declared at Open. Columns that
// end inside a nested column's children are left out.
func skeletonOf(cl *protocol.ColumnarLayout) *partition.Batch {
	b := &partition.Batch{Rows: int(cl.Rows), Columns: []partition.Column{}}
	next := 0
	var column func(depth int) (partition.Column, bool)
	column = func(depth int) (partition.Column, bool) {
		if next >= len(cl.Columns) || depth > partition.MaxNestingDepth {
			return partition.Column{}, false
		}
		c := &cl.Columns[next]
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
	for next < len(cl.Columns) {
		c, ok := column(0)
		if !ok {
			break
		}
		b.Columns = append(b.Columns, c)
	}
	return b
}
