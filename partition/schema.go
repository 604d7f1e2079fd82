package partition

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnsupportedType is wrapped by the error for a Spark type that this
// package cannot carry (nested and interval types, among others).
var ErrUnsupportedType = errors.New("partition: unsupported Spark type")

// Field is one column of a schema: what a kudo reader must know of a
// column, since kudo tables carry no types.
type Field struct {
	Name      string
	Type      Type
	Precision int8 // decimals only
	Scale     int8 // decimals only
}

// SchemaOf returns the fields of b's columns.
func SchemaOf(b *Batch) []Field {
	out := make([]Field, len(b.Columns))
	for i := range b.Columns {
		c := &b.Columns[i]
		out[i] = Field{Name: c.Name, Type: c.Type, Precision: c.Precision, Scale: c.Scale}
	}
	return out
}

// SparkType returns the Spark SQL type name of f (DataType.simpleString):
// boolean, tinyint, smallint, int, bigint, float, double, date, timestamp,
// decimal(p,s), string, binary.
func (f Field) SparkType() string {
	switch f.Type {
	case Bool:
		return "boolean"
	case Int8:
		return "tinyint"
	case Int16:
		return "smallint"
	case Int32:
		return "int"
	case Int64:
		return "bigint"
	case Float32:
		return "float"
	case Float64:
		return "double"
	case Date32:
		return "date"
	case TimestampMicros:
		return "timestamp"
	case Decimal32, Decimal64, Decimal128:
		return fmt.Sprintf("decimal(%d,%d)", f.Precision, f.Scale)
	case String:
		return "string"
	case Binary:
		return "binary"
	}
	return f.Type.String()
}

// sparkTypes maps Spark's type names (simpleString and the DDL aliases) to
// the batch types that carry them as spark-rapids does.
var sparkTypes = map[string]Type{
	"boolean": Bool, "tinyint": Int8, "byte": Int8, "smallint": Int16, "short": Int16,
	"int": Int32, "integer": Int32, "bigint": Int64, "long": Int64,
	"float": Float32, "real": Float32, "double": Float64,
	"date": Date32, "timestamp": TimestampMicros, "timestamp_ltz": TimestampMicros,
	"timestamp_ntz": TimestampMicros, "string": String, "binary": Binary,
}

// ParseSparkType returns the field (without a name) that carries the Spark
// SQL type named s, as spark-rapids lays it out on the GPU: the names of
// DataType.simpleString and their DDL aliases, case-insensitive;
// decimal(p,s) (or decimal(p), or decimal: (10,0)) is Decimal32 for p <= 9,
// Decimal64 for p <= 18 and Decimal128 up to 38. A type this package
// cannot carry — array, struct, map, the interval types, void, char,
// varchar, variant — is an ErrUnsupportedType error; anything else that
// is not a Spark type is an ErrInvalidArgument error.
func ParseSparkType(s string) (Field, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if typ, ok := sparkTypes[t]; ok {
		return Field{Type: typ}, nil
	}
	if t == "decimal" || t == "dec" || t == "numeric" {
		return decimalField(10, 0)
	}
	for _, prefix := range []string{"decimal(", "dec(", "numeric("} {
		if strings.HasPrefix(t, prefix) && strings.HasSuffix(t, ")") {
			args := strings.Split(t[len(prefix):len(t)-1], ",")
			if len(args) > 2 {
				break
			}
			p, err := strconv.Atoi(strings.TrimSpace(args[0]))
			if err != nil {
				break
			}
			sc := 0
			if len(args) == 2 {
				if sc, err = strconv.Atoi(strings.TrimSpace(args[1])); err != nil {
					break
				}
			}
			return decimalField(p, sc)
		}
	}
	for _, prefix := range []string{"array<", "struct<", "map<", "interval", "void", "null", "char(", "varchar(", "variant", "calendarinterval"} {
		if strings.HasPrefix(t, prefix) {
			return Field{}, fmt.Errorf("%w: %q (nested, interval, void, char/varchar and variant types are not carried yet)", ErrUnsupportedType, s)
		}
	}
	return Field{}, fmt.Errorf("%w: %q is not a Spark SQL type", ErrInvalidArgument, s)
}

func decimalField(p, s int) (Field, error) {
	if p < 1 || p > MaxDecimal128Precision || s < 0 || s > p {
		return Field{}, fmt.Errorf("%w: decimal(%d,%d): want precision 1 to %d and scale 0 to precision", ErrInvalidArgument, p, s, MaxDecimal128Precision)
	}
	f := Field{Type: Decimal128, Precision: int8(p), Scale: int8(s)}
	switch {
	case p <= MaxDecimal32Precision:
		f.Type = Decimal32
	case p <= MaxDecimal64Precision:
		f.Type = Decimal64
	}
	return f, nil
}

// ParseSchema parses a Spark DDL column list, "name type, name type, ...",
// with the types of ParseSparkType (names may be `quoted` with backticks).
// An empty string is the schema of no columns.
func ParseSchema(ddl string) ([]Field, error) {
	out := []Field{}
	if strings.TrimSpace(ddl) == "" {
		return out, nil
	}
	for i, part := range splitTopLevel(ddl) {
		part = strings.TrimSpace(part)
		var name, typ string
		if strings.HasPrefix(part, "`") {
			end := strings.Index(part[1:], "`")
			if end < 0 {
				return nil, fmt.Errorf("%w: schema column %d %q: unterminated `name`", ErrInvalidArgument, i, part)
			}
			name, typ = part[1:1+end], part[2+end:]
		} else {
			sp := strings.IndexAny(part, " \t")
			if sp < 0 {
				return nil, fmt.Errorf("%w: schema column %d %q: want \"name type\"", ErrInvalidArgument, i, part)
			}
			name, typ = part[:sp], part[sp+1:]
		}
		if strings.TrimSpace(typ) == "" {
			return nil, fmt.Errorf("%w: schema column %d %q: no type", ErrInvalidArgument, i, name)
		}
		f, err := ParseSparkType(typ)
		if err != nil {
			return nil, fmt.Errorf("schema column %d %q: %w", i, name, err)
		}
		f.Name = name
		out = append(out, f)
	}
	return out, nil
}

// splitTopLevel splits s at the commas outside <> and ().
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '<', '(':
			depth++
		case '>', ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// FormatSchema returns schema as ParseSchema reads it.
func FormatSchema(schema []Field) string {
	var sb strings.Builder
	for i, f := range schema {
		if i > 0 {
			sb.WriteString(", ")
		}
		if f.Name == "" || strings.ContainsAny(f.Name, " \t,`<>()") {
			sb.WriteString("`" + f.Name + "`")
		} else {
			sb.WriteString(f.Name)
		}
		sb.WriteString(" " + f.SparkType())
	}
	return sb.String()
}

// CheckSchema checks that b's columns are those of schema: as many, and
// each of its field's type, precision and scale (names are not compared).
// The error wraps ErrInvalidBatch and names the column.
func CheckSchema(b *Batch, schema []Field) error {
	if len(b.Columns) != len(schema) {
		return fmt.Errorf("%w: %d columns, the schema has %d", ErrInvalidBatch, len(b.Columns), len(schema))
	}
	for i := range schema {
		c, f := &b.Columns[i], &schema[i]
		if c.Type != f.Type || c.Precision != f.Precision || c.Scale != f.Scale {
			got := Field{Type: c.Type, Precision: c.Precision, Scale: c.Scale}
			return fmt.Errorf("%w: column %d %q: %v (%s), the schema declares %v (%s)", ErrInvalidBatch, i, c.Name, c.Type, got.SparkType(), f.Type, f.SparkType())
		}
	}
	return nil
}
