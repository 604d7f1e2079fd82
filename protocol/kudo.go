package protocol

import "fmt"

// PayloadFormat says how the daemon serializes the records of a columnar
// map output (OpenMapOutput.Format).
type PayloadFormat uint8

const (
	// FormatSHFC: the daemon's own self-describing blocks
	// (docs/format.md section 2). The zero value.
	FormatSHFC PayloadFormat = 0
	// FormatKudo: spark-rapids' kudo tables (docs/format.md section 7),
	// which a spark-rapids reducer reads. OpenMapOutput then carries the
	// schema.
	FormatKudo PayloadFormat = 1
)

func (f PayloadFormat) String() string {
	switch f {
	case FormatSHFC:
		return "shfc"
	case FormatKudo:
		return "kudo"
	}
	return fmt.Sprintf("PayloadFormat(%d)", uint8(f))
}

// FeatureKudo: OpenMapOutput may use FormatKudo.
const FeatureKudo Features = 1 << 4

// SchemaField declares one column of a kudo map output: its name and its
// Spark SQL type as DataType.simpleString spells it ("int",
// "decimal(38,10)", "binary", "array<int>" ...). Which types a server
// takes is its business; one it cannot write is Unsupported, naming the
// column.
type SchemaField struct {
	Name      string
	SparkType string
}

// MaxSparkTypeLen bounds SchemaField.SparkType in bytes: the most a
// string of the wire holds, room for the simpleString of wide nested types.
const MaxSparkTypeLen = 65535

func (m *OpenMapOutput) validateFormat() error {
	switch m.Format {
	case FormatSHFC:
		if len(m.Schema) > 0 {
			return invalid("OpenMapOutput", "Schema", "%d fields with format shfc, want none", len(m.Schema))
		}
		return nil
	case FormatKudo:
	default:
		return fmt.Errorf("%w: OpenMapOutput.Format: %d, want %d (shfc) or %d (kudo)", ErrUnsupported, m.Format, FormatSHFC, FormatKudo)
	}
	if m.Kind != KindColumnar {
		return invalid("OpenMapOutput", "Format", "kudo with kind %v, want columnar", m.Kind)
	}
	if len(m.Schema) > MaxColumns {
		return invalid("OpenMapOutput", "Schema", "%d fields exceed %d", len(m.Schema), MaxColumns)
	}
	for i, f := range m.Schema {
		if err := checkText("OpenMapOutput", fmt.Sprintf("Schema[%d].Name", i), f.Name, MaxColumnNameLen); err != nil {
			return err
		}
		if f.SparkType == "" {
			return invalid("OpenMapOutput", fmt.Sprintf("Schema[%d].SparkType", i), "empty")
		}
		if err := checkText("OpenMapOutput", fmt.Sprintf("Schema[%d].SparkType", i), f.SparkType, MaxSparkTypeLen); err != nil {
			return err
		}
	}
	return nil
}

// appendSchema appends the schema of a kudo map output (nothing for shfc).
func (m *OpenMapOutput) appendSchema(dst []byte) []byte {
	if m.Format != FormatKudo {
		return dst
	}
	dst = appendU32(dst, uint32(len(m.Schema)))
	for _, f := range m.Schema {
		dst = appendString(dst, f.Name)
		dst = appendString(dst, f.SparkType)
	}
	return dst
}

// schema reads the schema that follows a kudo OpenMapOutput.
func (d *decoder) schema(format PayloadFormat) []SchemaField {
	if format != FormatKudo {
		return nil
	}
	n := d.count("Schema", MaxColumns, 4)
	if d.err != nil {
		return nil
	}
	out := make([]SchemaField, n)
	for i := range out {
		out[i].Name = d.str("Schema.Name", MaxColumnNameLen)
		out[i].SparkType = d.str("Schema.SparkType", MaxSparkTypeLen)
	}
	return out
}
