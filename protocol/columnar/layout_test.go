package columnar

import (
	"testing"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
)

// TestSparkSchema: each column's Spark type, decimals by precision, and
// the schema parses back to the same batch types.
func TestSparkSchema(t *testing.T) {
	b := &partition.Batch{Columns: []partition.Column{
		{Name: "a", Type: partition.Int32},
		{Name: "d", Type: partition.Decimal32, Precision: 9, Scale: 2},
		{Name: "e", Type: partition.Decimal128, Precision: 38, Scale: 10},
		{Name: "b", Type: partition.Binary},
		{Name: "t", Type: partition.TimestampMicros},
	}}
	got := SparkSchema(b)
	want := []protocol.SchemaField{{Name: "a", SparkType: "int"}, {Name: "d", SparkType: "decimal(9,2)"}, {Name: "e", SparkType: "decimal(38,10)"}, {Name: "b", SparkType: "binary"}, {Name: "t", SparkType: "timestamp"}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("field %d = %+v, want %+v", i, got[i], want[i])
		}
		f, err := partition.ParseSparkType(got[i].SparkType)
		if err != nil || f.Type != b.Columns[i].Type || f.Precision != b.Columns[i].Precision || f.Scale != b.Columns[i].Scale {
			t.Fatalf("ParseSparkType(%q) = %+v, %v", got[i].SparkType, f, err)
		}
	}
}
