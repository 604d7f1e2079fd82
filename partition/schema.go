package partition

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/shuffled/shuffled/errdefs"
)

// ErrUnsupportedType is wrapped by the error for a Spark type that this
// package cannot carry (nested and interval types, among others).
var ErrUnsupportedType = errdefs.New(errdefs.ErrInternal, "partition: unsupported Spark type")

// Field is one column of a schema: what a kudo reader must know of a
// column, since kudo tables carry no types.
type Field struct {
	Name      string
	Type      Type
	Precision int8 // decimals only
	Scale     int8 // decimals only
	// Children are the fields of a nested type, shaped as Column.Children:
	// the element of a List, one Struct of key and value for a Map, the
	// fields of a Struct.
	Children []Field
}

// SchemaOf returns the fields of b's columns.
func SchemaOf(b *Batch) []Field { return fieldsOf(b.Columns) }

func fieldsOf(cols []Column) []Field {
	out := make([]Field, len(cols))
	for i := range cols {
		c := &cols[i]
		out[i] = Field{Name: c.Name, Type: c.Type, Precision: c.Precision, Scale: c.Scale}
		if c.Children != nil {
			out[i].Children = fieldsOf(c.Children)
		}
	}
	return out
}

// SparkType returns the Spark SQL type name of f (DataType.simpleString):
// boolean, tinyint, smallint, int, bigint, float, double, date, timestamp,
// decimal(p,s), string, binary, array<T>, struct<name:T,...>, map<K,V>,
// interval year to month, interval day to second, void. (The narrower
// interval types, such as interval day, share their layout with these
// and print as them.)
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
	case YearMonthInterval:
		return "interval year to month"
	case DayTimeInterval:
		return "interval day to second"
	case Void:
		return "void"
	case List:
		if len(f.Children) == 1 {
			return "array<" + f.Children[0].SparkType() + ">"
		}
	case Map:
		if len(f.Children) == 1 && len(f.Children[0].Children) == 2 {
			kv := f.Children[0].Children
			return "map<" + kv[0].SparkType() + "," + kv[1].SparkType() + ">"
		}
	case Struct:
		var sb strings.Builder
		sb.WriteString("struct<")
		for i, c := range f.Children {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(quoteName(c.Name, " \t,`<>():"))
			sb.WriteByte(':')
			sb.WriteString(c.SparkType())
		}
		sb.WriteByte('>')
		return sb.String()
	}
	return f.Type.String()
}

// quoteName returns name in backticks (each backtick in it doubled) when
// it is empty or holds any of special, and name itself otherwise.
func quoteName(name, special string) string {
	if name != "" && !strings.ContainsAny(name, special) {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// MaxNestingDepth is the deepest nesting ParseSparkType reads (an
// array<array<...>> of that many levels): deeper type strings are refused
// before they can exhaust the stack.
const MaxNestingDepth = 256

// intervalUnits maps the units of Spark's ANSI interval types to the type
// that carries them.
var intervalUnits = map[string]Type{
	"year": YearMonthInterval, "month": YearMonthInterval,
	"day": DayTimeInterval, "hour": DayTimeInterval, "minute": DayTimeInterval, "second": DayTimeInterval,
}

// parseInterval parses "interval U" or "interval U to V" (t is lower case).
func parseInterval(t string) (Field, bool) {
	words := strings.Fields(t)
	if len(words) != 2 && !(len(words) == 4 && words[2] == "to") {
		return Field{}, false
	}
	typ, ok := intervalUnits[words[1]]
	if !ok {
		return Field{}, false
	}
	if len(words) == 4 {
		if end, ok := intervalUnits[words[3]]; !ok || end != typ {
			return Field{}, false
		}
	}
	return Field{Type: typ}, true
}

// sparkTypes maps Spark's type names (simpleString and the DDL aliases) to
// the batch types that carry them as spark-rapids does.
var sparkTypes = map[string]Type{
	"boolean": Bool, "tinyint": Int8, "byte": Int8, "smallint": Int16, "short": Int16,
	"int": Int32, "integer": Int32, "bigint": Int64, "long": Int64,
	"float": Float32, "real": Float32, "double": Float64,
	"date": Date32, "timestamp": TimestampMicros, "timestamp_ltz": TimestampMicros,
	"timestamp_ntz": TimestampMicros, "string": String, "binary": Binary,
	"void": Void,
}

// parseNested parses array<T>, map<K,V> and struct<name:T,...> (also
// struct<name T,...>); orig is s with its case, for the field names. ok
// is false when s is none of them.
func parseNested(orig, t string, depth int) (Field, bool, error) {
	var kind string
	for _, k := range []string{"array", "map", "struct"} {
		if strings.HasPrefix(t, k) && strings.HasSuffix(t, ">") && strings.HasPrefix(strings.TrimSpace(t[len(k):]), "<") {
			kind = k
		}
	}
	if kind == "" {
		return Field{}, false, nil
	}
	lt, gt := strings.Index(orig, "<"), strings.LastIndex(orig, ">")
	if lt < 0 || gt < lt {
		return Field{}, false, nil
	}
	inner := orig[lt+1 : gt]
	bad := func(format string, args ...any) (Field, bool, error) {
		return Field{}, true, fmt.Errorf("%w: %q: %s", ErrInvalidArgument, orig, fmt.Sprintf(format, args...))
	}
	parts := splitTopLevel(inner)
	switch kind {
	case "array":
		if len(parts) != 1 {
			return bad("array<...> takes one element type, got %d", len(parts))
		}
		elem, err := parseSparkType(parts[0], depth+1)
		if err != nil {
			return Field{}, true, err
		}
		elem.Name = "element"
		return Field{Type: List, Children: []Field{elem}}, true, nil
	case "map":
		if len(parts) != 2 {
			return bad("map<...> takes a key and a value type, got %d types", len(parts))
		}
		k, err := parseSparkType(parts[0], depth+1)
		if err != nil {
			return Field{}, true, err
		}
		v, err := parseSparkType(parts[1], depth+1)
		if err != nil {
			return Field{}, true, err
		}
		k.Name, v.Name = "key", "value"
		return Field{Type: Map, Children: []Field{{Name: "entries", Type: Struct, Children: []Field{k, v}}}}, true, nil
	}
	f := Field{Type: Struct, Children: []Field{}}
	if strings.TrimSpace(inner) == "" {
		return f, true, nil
	}
	for i, part := range parts {
		name, typ, err := splitNameType(strings.TrimSpace(part), ":")
		if err != nil {
			return bad("struct field %d: %v", i, err)
		}
		c, err := parseSparkType(typ, depth+1)
		if err != nil {
			return Field{}, true, fmt.Errorf("struct field %d %q: %w", i, name, err)
		}
		c.Name = name
		f.Children = append(f.Children, c)
	}
	return f, true, nil
}

// splitNameType splits "name<sep>type" or "name type", the name perhaps
// in backticks (a doubled backtick in it standing for one).
func splitNameType(part, sep string) (name, typ string, err error) {
	if strings.HasPrefix(part, "`") {
		var sb strings.Builder
		i := 1
		for ; i < len(part); i++ {
			if part[i] == '`' {
				if i+1 < len(part) && part[i+1] == '`' {
					sb.WriteByte('`')
					i++
					continue
				}
				break
			}
			sb.WriteByte(part[i])
		}
		if i >= len(part) {
			return "", "", fmt.Errorf("unterminated `name` in %q", part)
		}
		name, typ = sb.String(), strings.TrimSpace(part[i+1:])
		typ = strings.TrimSpace(strings.TrimPrefix(typ, sep))
	} else {
		end := strings.IndexAny(part, sep+" \t")
		if end < 0 {
			return "", "", fmt.Errorf("want \"name type\" or \"name:type\", got %q", part)
		}
		name, typ = part[:end], strings.TrimSpace(part[end:])
		typ = strings.TrimSpace(strings.TrimPrefix(typ, sep))
	}
	if typ == "" {
		return "", "", fmt.Errorf("no type in %q", part)
	}
	return name, typ, nil
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
	return parseSparkType(s, 0)
}

func parseSparkType(s string, depth int) (Field, error) {
	if depth > MaxNestingDepth {
		return Field{}, fmt.Errorf("%w: type nested deeper than %d levels", ErrInvalidArgument, MaxNestingDepth)
	}
	t := strings.ToLower(strings.TrimSpace(s))
	if typ, ok := sparkTypes[t]; ok {
		return Field{Type: typ}, nil
	}
	if f, ok := parseInterval(t); ok {
		return f, nil
	}
	if nested, ok, err := parseNested(strings.TrimSpace(s), t, depth); ok {
		return nested, err
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
	for _, prefix := range []string{"interval", "char(", "varchar(", "variant", "calendarinterval"} {
		if strings.HasPrefix(t, prefix) {
			return Field{}, fmt.Errorf("%w: %q (calendar interval, char/varchar and variant types are not carried yet)", ErrUnsupportedType, s)
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
		name, typ, err := splitNameType(part, " ")
		if err != nil {
			return nil, fmt.Errorf("%w: schema column %d %q: %v", ErrInvalidArgument, i, part, err)
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
		sb.WriteString(quoteName(f.Name, " \t,`<>():"))
		sb.WriteString(" " + f.SparkType())
	}
	return sb.String()
}

// CheckSchema checks that b's columns are those of schema: as many, and
// each of its field's type, precision and scale, and the same of their
// children at every depth (names are not compared). The error wraps
// ErrInvalidBatch and names the column.
func CheckSchema(b *Batch, schema []Field) error {
	if len(b.Columns) != len(schema) {
		return fmt.Errorf("%w: %d columns, the schema has %d", ErrInvalidBatch, len(b.Columns), len(schema))
	}
	for i := range schema {
		c, f := &b.Columns[i], &schema[i]
		if !sameShape(c, f) {
			got := fieldsOf(b.Columns[i : i+1])[0]
			return fmt.Errorf("%w: column %d %q: %v (%s), the schema declares %v (%s)", ErrInvalidBatch, i, c.Name, c.Type, got.SparkType(), f.Type, f.SparkType())
		}
	}
	return nil
}

// sameShape reports whether c has f's type, precision, scale and
// children's shapes.
func sameShape(c *Column, f *Field) bool {
	if c.Type != f.Type || c.Precision != f.Precision || c.Scale != f.Scale || len(c.Children) != len(f.Children) {
		return false
	}
	for i := range c.Children {
		if !sameShape(&c.Children[i], &f.Children[i]) {
			return false
		}
	}
	return true
}
