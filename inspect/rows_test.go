package inspect

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/shufflefile"
)

// wantRow is one expected row: its partition and, per column, its text
// (partition.Column.AppendText) or nil for a null.
type wantRow struct {
	partition int
	values    []*string
}

// expectedRows lists b's rows in partition order.
func expectedRows(b *partition.Batch) []wantRow {
	var rows []wantRow
	for p := range b.NumPartitions() {
		start, end := b.PartitionRows(p)
		for i := start; i < end; i++ {
			r := wantRow{partition: p}
			for ci := range b.Columns {
				c := &b.Columns[ci]
				if c.IsNull(i) {
					r.values = append(r.values, nil)
					continue
				}
				s := string(c.AppendText(nil, i))
				r.values = append(r.values, &s)
			}
			rows = append(rows, r)
		}
	}
	return rows
}

func wantNames(b *partition.Batch) []string {
	names := []string{PartitionColumn}
	for i, c := range b.Columns {
		if c.Name == "" {
			c.Name = fmt.Sprintf("_c%d", i)
		}
		names = append(names, c.Name)
	}
	return names
}

// csvField is one parsed CSV field; quoted tells "" from a null.
type csvField struct {
	text   string
	quoted bool
}

// parseCSV splits RFC 4180 text into records, keeping whether each field
// was quoted (encoding/csv forgets it, and with it nulls).
func parseCSV(t *testing.T, s string) [][]csvField {
	t.Helper()
	var recs [][]csvField
	var rec []csvField
	for len(s) > 0 {
		var f csvField
		if s[0] == '"' {
			f.quoted = true
			i := 1
			var sb strings.Builder
			for {
				if i >= len(s) {
					t.Fatalf("unterminated quoted field")
				}
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						sb.WriteByte('"')
						i += 2
						continue
					}
					i++
					break
				}
				sb.WriteByte(s[i])
				i++
			}
			f.text, s = sb.String(), s[i:]
		} else {
			end := strings.IndexAny(s, ",\n")
			if end < 0 {
				end = len(s)
			}
			f.text, s = s[:end], s[end:]
		}
		rec = append(rec, f)
		switch {
		case s == "":
			t.Fatalf("CSV does not end in a newline")
		case s[0] == ',':
			s = s[1:]
		case s[0] == '\n':
			recs = append(recs, rec)
			rec, s = nil, s[1:]
		default:
			t.Fatalf("junk after a quoted field: %q", s[:min(len(s), 10)])
		}
	}
	return recs
}

// TestRowsRoundTrip writes a batch of every type with nulls and edge values
// through the writer, prints its rows as CSV and JSON, and parses them back.
func TestRowsRoundTrip(t *testing.T) {
	b := everyType()
	o := writeBatches(t, shufflefile.Flat(t.TempDir()), codec.LZ4, checksum.Adler32, 3, b)
	want := expectedRows(b)
	names := wantNames(b)

	t.Run("csv", func(t *testing.T) {
		var out bytes.Buffer
		s, err := Inspect(context.Background(), o.src, WithRows(CSV, &out))
		if err != nil || s.Err() != nil {
			t.Fatalf("Inspect: %v, %v", err, s.Err())
		}
		recs := parseCSV(t, out.String())
		if len(recs) != 1+len(want) {
			t.Fatalf("%d records, want a header and %d rows:\n%s", len(recs), len(want), out.String())
		}
		for i, f := range recs[0] {
			if i >= len(names) || f.text != names[i] {
				t.Fatalf("header %v, want %v", recs[0], names)
			}
		}
		for i, rec := range recs[1:] {
			w := want[i]
			if len(rec) != 1+len(w.values) || rec[0].text != strconv.Itoa(w.partition) {
				t.Fatalf("row %d: %v, want partition %d and %d values", i, rec, w.partition, len(w.values))
			}
			for ci, v := range w.values {
				got := rec[1+ci]
				if v == nil {
					if got.text != "" || got.quoted {
						t.Errorf("row %d column %s: %+v, want a null (empty, unquoted)", i, names[1+ci], got)
					}
					continue
				}
				if got.text != *v || (*v == "" && !got.quoted) {
					t.Errorf("row %d column %s: %+v, want %q", i, names[1+ci], got, *v)
				}
			}
		}
	})

	t.Run("json", func(t *testing.T) {
		var out bytes.Buffer
		s, err := Inspect(context.Background(), o.src, WithRows(JSON, &out))
		if err != nil || s.Err() != nil {
			t.Fatalf("Inspect: %v, %v", err, s.Err())
		}
		sc := bufio.NewScanner(&out)
		i := 0
		for ; sc.Scan(); i++ {
			if i >= len(want) {
				t.Fatalf("more than %d rows: %s", len(want), sc.Text())
			}
			dec := json.NewDecoder(strings.NewReader(sc.Text()))
			dec.UseNumber()
			var row map[string]any
			if err := dec.Decode(&row); err != nil {
				t.Fatalf("row %d: %v: %s", i, err, sc.Text())
			}
			if len(row) != len(names) {
				t.Errorf("row %d has %d keys, want %v", i, len(row), names)
			}
			if got := row[PartitionColumn]; got != json.Number(strconv.Itoa(want[i].partition)) {
				t.Errorf("row %d: %s = %v, want %d", i, PartitionColumn, got, want[i].partition)
			}
			for ci, v := range want[i].values {
				col := &b.Columns[ci]
				name := names[1+ci]
				got, ok := row[name]
				if !ok {
					t.Errorf("row %d lacks %q", i, name)
					continue
				}
				if v == nil {
					if got != nil {
						t.Errorf("row %d %s = %#v, want null", i, name, got)
					}
					continue
				}
				if err := checkJSONValue(col.Type, got, *v); err != nil {
					t.Errorf("row %d %s: %v", i, name, err)
				}
			}
		}
		if i != len(want) {
			t.Errorf("%d rows, want %d", i, len(want))
		}
	})
}

// checkJSONValue checks that a decoded JSON value has the JSON type the
// column type maps to and the value whose text is want.
func checkJSONValue(typ partition.Type, got any, want string) error {
	switch typ {
	case partition.Bool:
		if b, ok := got.(bool); !ok || strconv.FormatBool(b) != want {
			return fmt.Errorf("%#v, want boolean %s", got, want)
		}
	case partition.Int8, partition.Int16, partition.Int32, partition.Int64, partition.Decimal64:
		if n, ok := got.(json.Number); !ok || string(n) != want {
			return fmt.Errorf("%#v, want number %s", got, want)
		}
	case partition.Float32, partition.Float64:
		f, err := strconv.ParseFloat(want, 64)
		if err != nil {
			return err
		}
		switch {
		case math.IsNaN(f):
			want = "NaN"
		case math.IsInf(f, 1):
			want = "Infinity"
		case math.IsInf(f, -1):
			want = "-Infinity"
		default:
			if n, ok := got.(json.Number); !ok || string(n) != want {
				return fmt.Errorf("%#v, want number %s", got, want)
			}
			return nil
		}
		if s, ok := got.(string); !ok || s != want {
			return fmt.Errorf("%#v, want string %q", got, want)
		}
	default:
		if s, ok := got.(string); !ok || s != want {
			return fmt.Errorf("%#v, want string %q", got, want)
		}
	}
	return nil
}

// TestCSVHeaderChanges prints a header again when the columns change
// between blocks.
func TestCSVHeaderChanges(t *testing.T) {
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	w := newRowWriter(CSV, bw)
	one := &partition.Batch{Rows: 1, Columns: []partition.Column{fixedColumn("a", partition.Int32, i64s(1), nil)}}
	two := &partition.Batch{Rows: 1, Columns: []partition.Column{fixedColumn("b", partition.Int32, i64s(2), nil)}}
	w.batch(0, one)
	w.batch(1, one)
	w.batch(2, two)
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "_partition,a\n0,1\n1,1\n_partition,b\n2,2\n"; got != want {
		t.Errorf("CSV = %q, want %q", got, want)
	}
}

func TestCSVQuoting(t *testing.T) {
	tests := []struct {
		in      string
		notNull bool
		want    string
	}{
		{"", false, ""},
		{"", true, `""`},
		{"plain", true, "plain"},
		{"a,b", true, `"a,b"`},
		{`say "hi"`, true, `"say ""hi"""`},
		{"two\nlines", true, "\"two\nlines\""},
		{"cr\r", true, "\"cr\r\""},
		{" lead", true, `" lead"`},
		{"trail\t", true, "\"trail\t\""},
		{"in side", true, "in side"},
	}
	for _, tt := range tests {
		if got := string(appendCSVField(nil, []byte(tt.in), tt.notNull)); got != tt.want {
			t.Errorf("appendCSVField(%q, %v) = %q, want %q", tt.in, tt.notNull, got, tt.want)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", `""`},
		{"plain", `"plain"`},
		{`q"b\`, `"q\"b\\"`},
		{"\n\r\t\x00\x1f\x7f", `"\n\r\t\u0000\u001f\u007f"`},
		{"héllo ✓", `"héllo ✓"`},
		{"bad\xffutf8\xc3", `"bad\ufffdutf8\ufffd"`},
		{"<&>", `"<&>"`},
	}
	for _, tt := range tests {
		got := string(appendJSONString(nil, []byte(tt.in)))
		if got != tt.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", tt.in, got, tt.want)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("appendJSONString(%q) = %s, not JSON: %v", tt.in, got, err)
		}
	}
}

// TestJSONNestedEscaped: a nested value's text goes into a JSON string
// escaped, so strings inside an array that hold quotes, backslashes or
// control characters still give valid JSON that reads back as the text.
func TestJSONNestedEscaped(t *testing.T) {
	elems := []string{`say "hi"`, `back\slash`, "tab\there"}
	var data []byte
	offs := []int32{0}
	for _, e := range elems {
		data = append(data, e...)
		offs = append(offs, int32(len(data)))
	}
	c := &partition.Column{Name: "a", Type: partition.List, Offsets: []int32{0, int32(len(elems))},
		Children: []partition.Column{{Name: "element", Type: partition.String, Offsets: offs, Data: data}}}
	out := appendJSONValue(nil, c, 0)
	var got string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("array<string> as JSON: %s: %v", out, err)
	}
	if want := string(c.AppendText(nil, 0)); got != want {
		t.Errorf("array<string> as JSON reads back as %q, want %q", got, want)
	}
	for _, e := range elems {
		if !strings.Contains(got, e) {
			t.Errorf("%q lacks the element %q", got, e)
		}
	}
}
