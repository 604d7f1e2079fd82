package server

import (
	"errors"
	"fmt"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
)

// openFormat returns the serializer and the declared columns of a map
// output that m opens: the block format and no schema, or kudo and the
// batch types of m's Spark types. A Spark type this build cannot write is
// Unsupported, anything else wrong InvalidArgument; both name the column.
func openFormat(m *protocol.OpenMapOutput) (partition.Format, []partition.Field, error) {
	switch m.Format {
	case protocol.FormatSHFC:
		return partition.SHFC, nil, nil
	case protocol.FormatKudo:
	default:
		return 0, nil, fmt.Errorf("%w: OpenMapOutput.format %v", errdefs.ErrUnsupported, m.Format)
	}
	schema := make([]partition.Field, len(m.Schema))
	for i, f := range m.Schema {
		pf, err := partition.ParseSparkType(f.SparkType)
		if err != nil {
			kind := errdefs.ErrInvalidArgument
			if errors.Is(err, partition.ErrUnsupportedType) {
				kind = errdefs.ErrUnsupported
			}
			return 0, nil, fmt.Errorf("%w: OpenMapOutput.schema column %d %q: %v", kind, i, f.Name, err)
		}
		pf.Name = f.Name
		schema[i] = pf
	}
	return partition.Kudo, schema, nil
}
