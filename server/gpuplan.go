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
// type. Otherwise it returns why not, and the batch takes the CPU path
// (staged whole, serialized and compressed by the pool), which also
// reports what is wrong with a batch that is invalid.
//
// Nested columns (list, struct, map) take the CPU path: the plans cut
// every column at the partitions' row ranges, read on the host from the
// layout and the String and Binary offsets, but a list's child is cut at
// the rows its parent's offsets reach, so planning it would mean copying
// every list's offsets to the host and walking them, at every depth.
// Void takes the CPU path too: only the host, reading the bitmap, can
// check that every row is null.
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
		if c.Type.Nested() || c.Type == protocol.TypeVoid {
			return fmt.Errorf("%w: column %d type %v (nested and void columns take the CPU path)", gpu.ErrNotCovered, i, c.Type)
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

// skeletonOf returns a batch of cl's columns (names, types, precisions
// and scales) and rows, without buffers: what o.checkColumns compares
// with the columns declared at Open.
func skeletonOf(cl *protocol.ColumnarLayout) *partition.Batch {
	b := &partition.Batch{Rows: int(cl.Rows), Columns: make([]partition.Column, len(cl.Columns))}
	for i, c := range cl.Columns {
		b.Columns[i] = partition.Column{Name: c.Name, Type: partition.Type(c.Type), Precision: int8(c.Precision), Scale: int8(c.Scale)}
	}
	return b
}
