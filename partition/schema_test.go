package partition

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseSparkType(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Field
	}{
		{"boolean", Field{Type: Bool}}, {"TINYINT", Field{Type: Int8}}, {"byte", Field{Type: Int8}},
		{"smallint", Field{Type: Int16}}, {"int", Field{Type: Int32}}, {"integer", Field{Type: Int32}},
		{"bigint", Field{Type: Int64}}, {"long", Field{Type: Int64}}, {"float", Field{Type: Float32}},
		{"double", Field{Type: Float64}}, {"date", Field{Type: Date32}}, {"timestamp", Field{Type: TimestampMicros}},
		{"timestamp_ntz", Field{Type: TimestampMicros}}, {"string", Field{Type: String}}, {"binary", Field{Type: Binary}},
		{"decimal(9,2)", Field{Type: Decimal32, Precision: 9, Scale: 2}},
		{"decimal(10, 0)", Field{Type: Decimal64, Precision: 10}},
		{"decimal(18,18)", Field{Type: Decimal64, Precision: 18, Scale: 18}},
		{"decimal(19,3)", Field{Type: Decimal128, Precision: 19, Scale: 3}},
		{"decimal(38,10)", Field{Type: Decimal128, Precision: 38, Scale: 10}},
		{"decimal", Field{Type: Decimal64, Precision: 10}}, {"numeric(5)", Field{Type: Decimal32, Precision: 5}},
		{"interval year to month", Field{Type: YearMonthInterval}}, {"INTERVAL MONTH", Field{Type: YearMonthInterval}},
		{"interval day to second", Field{Type: DayTimeInterval}}, {"interval hour to minute", Field{Type: DayTimeInterval}},
		{"void", Field{Type: Void}},
		{"array<int>", Field{Type: List, Children: []Field{{Name: "element", Type: Int32}}}},
		{"ARRAY< array<string> >", Field{Type: List, Children: []Field{{Name: "element", Type: List, Children: []Field{{Name: "element", Type: String}}}}}},
		{"map<string,decimal(20,2)>", Field{Type: Map, Children: []Field{{Name: "entries", Type: Struct, Children: []Field{
			{Name: "key", Type: String}, {Name: "value", Type: Decimal128, Precision: 20, Scale: 2}}}}}},
		{"struct<A:int, `b c`:array<binary>, `x``y` void>", Field{Type: Struct, Children: []Field{
			{Name: "A", Type: Int32}, {Name: "b c", Type: List, Children: []Field{{Name: "element", Type: Binary}}}, {Name: "x`y", Type: Void}}}},
		{"struct<>", Field{Type: Struct, Children: []Field{}}},
	} {
		got, err := ParseSparkType(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseSparkType(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if err == nil {
			back, err := ParseSparkType(got.SparkType())
			if err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("ParseSparkType(%q.SparkType() = %q) = %+v, %v", c.in, got.SparkType(), back, err)
			}
		}
	}
	for _, in := range []string{"interval", "calendarinterval", "interval year to second", "char(3)", "varchar(10)", "variant", "array<char(3)>"} {
		if _, err := ParseSparkType(in); !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("ParseSparkType(%q) = %v, want ErrUnsupportedType", in, err)
		}
	}
	for _, in := range []string{"", "int32", "decimal(39,0)", "decimal(5,6)", "decimal(0)", "decimal(a,b)", "decimal(1,2,3)",
		"array<int,int>", "array<>", "map<int>", "struct<a>", "struct<`a:int>", "array<foo>", strings.Repeat("array<", 300) + "int" + strings.Repeat(">", 300)} {
		if _, err := ParseSparkType(in); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseSparkType(%q) = %v, want ErrInvalidArgument", in, err)
		}
	}
}

func TestParseSchema(t *testing.T) {
	s, err := ParseSchema("id int, `a b` decimal(20, 2), s string")
	if err != nil {
		t.Fatal(err)
	}
	want := []Field{{Name: "id", Type: Int32}, {Name: "a b", Type: Decimal128, Precision: 20, Scale: 2}, {Name: "s", Type: String}}
	if len(s) != len(want) {
		t.Fatalf("%d fields, want %d", len(s), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(s[i], want[i]) {
			t.Fatalf("field %d = %+v, want %+v", i, s[i], want[i])
		}
	}
	if got := FormatSchema(s); got != "id int, `a b` decimal(20,2), s string" {
		t.Fatalf("FormatSchema = %q", got)
	}
	if s, err := ParseSchema("  "); err != nil || s == nil || len(s) != 0 {
		t.Fatalf("empty schema = %v, %v", s, err)
	}
	for _, c := range []struct{ in, want string }{
		{"id", `column 0 "id"`}, {"a int, b char(3)", `column 1 "b"`}, {"a int, b array<int", `column 1 "b"`}, {"`x int", "unterminated"},
	} {
		if _, err := ParseSchema(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSchema(%q) = %v, want an error naming %s", c.in, err, c.want)
		}
	}
	b := validBatch()
	if err := CheckSchema(b, SchemaOf(b)); err != nil {
		t.Fatal(err)
	}
	other := SchemaOf(b)
	other[1].Scale++
	if err := CheckSchema(b, other); !errors.Is(err, ErrInvalidBatch) || !strings.Contains(err.Error(), "column 1") {
		t.Fatalf("CheckSchema with another scale = %v", err)
	}
	if err := CheckSchema(b, other[:1]); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("CheckSchema with fewer fields = %v", err)
	}
}
