package ingest

import (
	"fmt"

	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
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
		if !columnar.Supported(c.Type) {
			return fmt.Errorf("%w: column %d type %v", gpu.ErrNotCovered, i, c.Type)
		}
		types[i] = partition.Type(c.Type)
	}
	return gpu.Covers(f, types)
}
