package partition

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// unhex decodes hex with spaces, newlines and // comments.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("bad golden hex: %v", err)
	}
	return b
}

// kudoGoldens are slices whose kudo tables were derived by hand from the
// format rules (docs/format.md section 7), not by running
// the encoder: header big-endian (magic, row offset R, rows N, V', O', T,
// flattened columns C, has-validity bits), then validity bytes R/8 ..
// (R+N-1)/8 padded so that header + V' is a multiple of 4, then offsets
// o[R..R+N] verbatim, then data, padded to 4.
var kudoGoldens = []struct {
	name       string
	batch      func() *Batch
	start, end int
	want       string
}{
	{
		// The worked example of docs/format.md section 7.
		name: "worked example",
		batch: func() *Batch {
			return &Batch{Rows: 4, Columns: []Column{
				{Name: "id", Type: Int32, Validity: []byte{0x0d}, Data: le32(7, 8, 9, 10)},
				{Name: "s", Type: String, Offsets: []int32{0, 2, 2, 5, 6}, Data: []byte("abcdef")},
			}}
		},
		start: 1, end: 4,
		want: `4b554430 00000001 00000003 00000003 00000010 00000023 00000002 01 // header, 29 bytes
		       0d 0000                                   // id validity byte 0 + pad to 32
		       02000000 02000000 05000000 06000000       // s offsets 1..4, not rebased
		       08000000 09000000 0a000000                // id rows 1..3
		       63646566                                  // "cdef"`,
	},
	{
		// C = 3, H = 29; no validity, yet V' = 3 pads the header to 32.
		// D = 2 (bool) + 2 (int8) + 4 (int16) = 8, T = 3 + 0 + 8 = 11.
		name: "bool int8 int16",
		batch: func() *Batch {
			return &Batch{Rows: 3, Columns: []Column{
				{Type: Bool, Data: []byte{1, 0, 1}},
				{Type: Int8, Data: []byte{0xff, 2, 3}},
				{Type: Int16, Data: []byte{0x02, 0x01, 0xfe, 0xff, 0x05, 0x00}},
			}}
		},
		start: 1, end: 3,
		want: `4b554430 00000001 00000002 00000003 00000000 0000000b 00000003 00
		       000000          // validity padding only
		       00 01           // bool rows 1, 2
		       02 03           // int8 rows 1, 2
		       feff 0500       // int16 -2, 5`,
	},
	{
		// Begin bit 6: rows 6..9 touch validity bytes 0 and 1 (ff 02: row
		// 8 null). V = 2, V' = pad4(29+2) - 29 = 3. D = 16, T = 19.
		name: "int32 unaligned begin bit across a byte",
		batch: func() *Batch {
			return &Batch{Rows: 10, Columns: []Column{
				{Type: Int32, Validity: []byte{0xff, 0x02}, Data: le32(0, 10, 20, 30, 40, 50, 60, 70, 80, 90)},
			}}
		},
		start: 6, end: 10,
		want: `4b554430 00000006 00000004 00000003 00000000 00000013 00000001 01
		       ff 02 00                              // validity bytes 0, 1 + pad
		       3c000000 46000000 50000000 5a000000  // 60, 70, 80, 90`,
	},
	{
		// D = 8 + 4 + 8 = 20, T = 3 + 20 = 23.
		name: "int64 float32 float64",
		batch: func() *Batch {
			return &Batch{Rows: 2, Columns: []Column{
				{Type: Int64, Data: []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 9, 9, 9, 9, 9, 9, 9, 9}},
				{Type: Float32, Data: []byte{0, 0, 0xc0, 0x3f, 9, 9, 9, 9}},
				{Type: Float64, Data: []byte{0, 0, 0, 0, 0, 0, 0xd0, 0xbf, 9, 9, 9, 9, 9, 9, 9, 9}},
			}}
		},
		start: 0, end: 1,
		want: `4b554430 00000000 00000001 00000003 00000000 00000017 00000003 00
		       000000
		       feffffffffffffff   // -2
		       0000c03f           // 1.5
		       000000000000d0bf   // -0.25`,
	},
	{
		// Row 1 of date32, timestamp_us, decimal32(9,2), decimal64(18,4),
		// decimal128(38,10): D = 4 + 8 + 4 + 8 + 16 = 40, C = 5, T = 43.
		name: "date timestamp decimals",
		batch: func() *Batch {
			return &Batch{Rows: 2, Columns: []Column{
				{Type: Date32, Data: append(le32(0), 0x38, 0x4a, 0, 0)},
				{Type: TimestampMicros, Data: append(make([]byte, 8), 1, 0, 0, 0, 0, 0, 0, 0)},
				{Type: Decimal32, Precision: 9, Scale: 2, Data: append(le32(0), le32(-12345)...)},
				{Type: Decimal64, Precision: 18, Scale: 4, Data: append(make([]byte, 8), 1, 0, 0, 0, 0, 0, 0, 0)},
				{Type: Decimal128, Precision: 38, Scale: 10, Data: append(make([]byte, 16), bytes.Repeat([]byte{0xff}, 16)...)},
			}}
		},
		start: 1, end: 2,
		want: `4b554430 00000001 00000001 00000003 00000000 0000002b 00000005 00
		       000000
		       384a0000                          // 19000 days
		       0100000000000000                  // 1 µs
		       c7cfffff                          // -12345 (-123.45)
		       0100000000000000                  // 1 (0.0001)
		       ffffffffffffffffffffffffffffffff  // -1`,
	},
	{
		// s = "ab", null, "cde", "", "fgh" (validity 0x1d); rows 2..4:
		// begin bit 2, offsets 2, 5, 5, 8 verbatim, chars [2, 8) = "cdefgh"
		// padded to 8. V' = 3, O' = 16, T = 3 + 16 + 8 = 27.
		name: "string slice with nulls",
		batch: func() *Batch {
			return &Batch{Rows: 5, Columns: []Column{
				{Type: String, Validity: []byte{0x1d}, Offsets: []int32{0, 2, 2, 5, 5, 8}, Data: []byte("abcdefgh")},
			}}
		},
		start: 2, end: 5,
		want: `4b554430 00000002 00000003 00000003 00000010 0000001b 00000001 01
		       1d 0000
		       02000000 05000000 05000000 08000000
		       636465666768 0000`,
	},
	{
		// binary is LIST<UINT8>: flattened columns b (list, bit 0), b's
		// bytes (bit 1, no validity), x (bit 2): C = 3. Rows 1..2: list
		// validity byte 05, offsets 2, 2, 3, child bytes [2, 3) = 10, then
		// x's 02 03, data 3 bytes padded to 4. T = 3 + 12 + 4 = 19.
		name: "binary",
		batch: func() *Batch {
			return &Batch{Rows: 3, Columns: []Column{
				{Type: Binary, Validity: []byte{0x05}, Offsets: []int32{0, 2, 2, 3}, Data: []byte{0x00, 0xff, 0x10}},
				{Type: Int8, Data: []byte{1, 2, 3}},
			}}
		},
		start: 1, end: 3,
		want: `4b554430 00000001 00000002 00000003 0000000c 00000013 00000003 01
		       05 0000
		       02000000 02000000 03000000
		       10 02 03 00`,
	},
	{
		// Nine columns: a 2-byte bitset (column 8's bit is bit 0 of byte
		// 1), H = 30, V = 1, V' = pad4(31) - 30 = 2; D = 9 padded to 12.
		name: "nine columns",
		batch: func() *Batch {
			b := &Batch{Rows: 1}
			for i := range 9 {
				b.Columns = append(b.Columns, Column{Type: Int8, Data: []byte{byte(i + 1)}})
			}
			b.Columns[8].Validity = []byte{0x01}
			return b
		},
		start: 0, end: 1,
		want: `4b554430 00000000 00000001 00000002 00000000 0000000e 00000009 0001
		       01 00
		       010203040506070809 000000`,
	},
	{
		// writeRowCountToStream: row offset 0 whatever the slice, no body.
		name:  "no columns",
		batch: func() *Batch { return &Batch{Rows: 5} },
		start: 2, end: 5,
		want: `4b554430 00000000 00000003 00000000 00000000 00000000 00000000`,
	},
	{
		// KudoSerializer writes no table of 0 rows.
		name:  "zero rows",
		batch: func() *Batch { return validBatch() },
		start: 2, end: 2,
		want: ``,
	},
}

func TestKudoGolden(t *testing.T) {
	for _, g := range kudoGoldens {
		t.Run(g.name, func(t *testing.T) {
			b := g.batch()
			if err := b.Validate(); err != nil {
				t.Fatal(err)
			}
			want := unhex(t, g.want)
			if got := AppendKudo([]byte("x"), b, g.start, g.end); !bytes.Equal(got[1:], want) || got[0] != 'x' {
				t.Fatalf("AppendKudo =\n%x\nwant\n%x", got[1:], want)
			}
			var buf bytes.Buffer
			n, err := WriteKudo(&buf, b, g.start, g.end)
			if err != nil || n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("WriteKudo = %d, %v,\n%x\nwant\n%x", n, err, buf.Bytes(), want)
			}
			if got := KudoSize(b, g.start, g.end); got != len(want) {
				t.Fatalf("KudoSize = %d, want %d", got, len(want))
			}
			if len(want) == 0 {
				return
			}
			checkKudoAlignment(t, want)
			tab, err := DecodeKudo(want, SchemaOf(b))
			if err != nil {
				t.Fatal(err)
			}
			if tab.Size != len(want) || tab.Rows != g.end-g.start {
				t.Fatalf("decoded size %d rows %d, want %d, %d", tab.Size, tab.Rows, len(want), g.end-g.start)
			}
			if len(b.Columns) > 0 && tab.RowOffset != g.start {
				t.Fatalf("row offset %d, want %d", tab.RowOffset, g.start)
			}
			assertSameRows(t, tab.Batch, b, g.start, g.end)
		})
	}
}

// checkKudoAlignment asserts the alignment spark-rapids' GPU reader relies
// on: header + V' and the whole table are multiples of 4.
func checkKudoAlignment(t *testing.T, tab []byte) {
	t.Helper()
	if len(tab)%4 != 0 {
		t.Fatalf("table of %d bytes, not a multiple of 4", len(tab))
	}
	c := int(binary.BigEndian.Uint32(tab[24:]))
	h := 28 + (c+7)/8
	v := int(binary.BigEndian.Uint32(tab[12:]))
	o := int(binary.BigEndian.Uint32(tab[16:]))
	body := int(binary.BigEndian.Uint32(tab[20:]))
	if (h+v)%4 != 0 || o%4 != 0 || (body-v-o)%4 != 0 || h+body != len(tab) {
		t.Fatalf("header %d, V' %d, O' %d, T %d, length %d: misaligned", h, v, o, body, len(tab))
	}
}

// assertSameRows compares every row of got (0..) with rows [start, end) of
// want: nulls, and the values of non-null rows.
func assertSameRows(t *testing.T, got, want *Batch, start, end int) {
	t.Helper()
	if err := got.Validate(); err != nil {
		t.Fatalf("decoded batch: %v", err)
	}
	if got.Rows != end-start || len(got.Columns) != len(want.Columns) {
		t.Fatalf("decoded %d rows × %d columns, want %d × %d", got.Rows, len(got.Columns), end-start, len(want.Columns))
	}
	for ci := range want.Columns {
		g, w := &got.Columns[ci], &want.Columns[ci]
		if g.Type != w.Type || g.Precision != w.Precision || g.Scale != w.Scale {
			t.Fatalf("column %d: %v(%d,%d), want %v(%d,%d)", ci, g.Type, g.Precision, g.Scale, w.Type, w.Precision, w.Scale)
		}
		for r := start; r < end; r++ {
			if g.IsNull(r-start) != w.IsNull(r) {
				t.Fatalf("column %d row %d: null %v, want %v", ci, r, g.IsNull(r-start), w.IsNull(r))
			}
			if w.IsNull(r) {
				continue
			}
			if a, b := g.AppendText(nil, r-start), w.AppendText(nil, r); !bytes.Equal(a, b) {
				t.Fatalf("column %d row %d: %q, want %q", ci, r, a, b)
			}
		}
	}
}

// TestKudoRandom checks, for random batches of every type with and without
// nulls, that AppendKudo, WriteKudo and KudoSize agree, tables are aligned
// and decode to the rows of their slice, and Kudo.Split cuts tables under
// the budget that decode to the same rows.
func TestKudoRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	for iter := range 200 {
		rows := r.IntN(70)
		b := randomBatch(r, rows, iter%2 == 0, 9)
		if iter%5 == 0 {
			b.Columns = nil
		}
		schema := SchemaOf(b)
		start := r.IntN(rows + 1)
		end := start + r.IntN(rows-start+1)
		tab := AppendKudo(nil, b, start, end)
		var buf bytes.Buffer
		if _, err := WriteKudo(iotest.TruncateWriter(&buf, 1<<30), b, start, end); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), tab) || KudoSize(b, start, end) != len(tab) {
			t.Fatalf("iter %d: WriteKudo, AppendKudo, KudoSize disagree: %d, %d, %d", iter, buf.Len(), len(tab), KudoSize(b, start, end))
		}
		if start == end {
			if len(tab) != 0 {
				t.Fatalf("iter %d: %d bytes for an empty range", iter, len(tab))
			}
			continue
		}
		checkKudoAlignment(t, tab)
		d, err := DecodeKudo(tab, schema)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		assertSameRows(t, d.Batch, b, start, end)
		// Split under a small budget: every table fits (or is one row),
		// and the tables back to back decode to the same rows.
		budget := 64 + r.IntN(200)
		bounds := Kudo.Split(b, start, end, budget)
		var all []byte
		for i := 1; i < len(bounds); i++ {
			part := Kudo.Append(nil, b, bounds[i-1], bounds[i])
			if len(part) > budget && bounds[i]-bounds[i-1] > 1 {
				t.Fatalf("iter %d: table of %d rows is %d bytes, over %d", iter, bounds[i]-bounds[i-1], len(part), budget)
			}
			all = append(all, part...)
		}
		tabs, err := DecodeKudoTables(all, schema)
		if err != nil || len(tabs) != len(bounds)-1 {
			t.Fatalf("iter %d: %d tables, %v; want %d", iter, len(tabs), err, len(bounds)-1)
		}
		for i, tb := range tabs {
			assertSameRows(t, tb.Batch, b, bounds[i], bounds[i+1])
		}
		// The stream decoder, a byte at a time, reads the same tables.
		dec := NewKudoDecoder(iotest.OneByteReader(bytes.NewReader(all)), schema, 0)
		for i := range tabs {
			tb, err := dec.Next()
			if err != nil {
				t.Fatalf("iter %d: KudoDecoder table %d: %v", iter, i, err)
			}
			assertSameRows(t, tb.Batch, b, bounds[i], bounds[i+1])
		}
		if _, err := dec.Next(); err != io.EOF {
			t.Fatalf("iter %d: after the last table: %v, want io.EOF", iter, err)
		}
	}
}

func TestKudoDecodeErrors(t *testing.T) {
	g := kudoGoldens[0]
	b := g.batch()
	schema := SchemaOf(b)
	good := unhex(t, g.want)
	mod := func(f func(p []byte) []byte) []byte { return f(bytes.Clone(good)) }
	be := func(off int, v uint32) func([]byte) []byte {
		return func(p []byte) []byte { binary.BigEndian.PutUint32(p[off:], v); return p }
	}
	for _, c := range []struct {
		name   string
		in     []byte
		schema []Field
		want   string
	}{
		{"short", good[:20], schema, "shorter than the 28-byte header"},
		{"magic", mod(func(p []byte) []byte { p[3] = '1'; return p }), schema, "magic"},
		{"negative rows", mod(be(8, 0x80000000)), schema, "rows = -2147483648"},
		{"zero rows", mod(be(8, 0)), schema, "rows = 0"},
		{"columns vs schema", good, schema[:1], "2 flattened columns, the schema has 1"},
		{"validity length", mod(be(12, 7)), schema, `column 1 "s": data: 6 bytes at 12, past the section's 12 bytes`},
		{"validity length, fits", mod(be(12, 3+4)), schema[:0:0], "flattened columns"},
		{"offsets length", mod(be(16, 12)), schema, `column 1 "s": offsets: 16 bytes at 0, past the section's 12 bytes`},
		{"body length", mod(be(20, 0x27)), schema, "past the end of the input"},
		{"body too short", append(mod(be(20, 0x1f))[:60], 0, 0, 0, 0), schema, `column 1 "s": data: 4 bytes at 12, past the section's 12 bytes`},
		{"body too long", append(mod(be(20, 0x27)), 0, 0, 0, 0), schema, "body length 39, want 35"},
		{"validity padding", mod(func(p []byte) []byte { p[30] = 1; return p }), schema, "validity padding"},
		{"offsets decrease", mod(func(p []byte) []byte { p[37] = 1; return p }), schema, "offsets[2] = 5, less than offsets[1] = 258"},
		{"truncated", good[:63], schema, "past the end of the input"},
		{"bitset bits past C", mod(func(p []byte) []byte { p[28] = 0x05; return p }), schema, "has-validity bits past column 2"},
		{"binary child validity", unhex(t, `4b554430 00000001 00000002 00000003 0000000c 00000013 00000003 03
		       05 0000 02000000 02000000 03000000 10 02 03 00`), SchemaOf(kudoGoldens[6].batch()), "byte child has validity"},
		{"row count table with offset", unhex(t, `4b554430 00000001 00000003 00000000 00000000 00000000 00000000`), nil, "a table without columns"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeKudo(c.in, c.schema)
			if !errors.Is(err, ErrCorruptKudo) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeKudo = %v, want ErrCorruptKudo containing %q", err, c.want)
			}
		})
	}
	// A stream cut inside a table, and a table over the decoder's limit.
	if _, err := NewKudoDecoder(bytes.NewReader(good[:40]), schema, 0).Next(); !errors.Is(err, ErrCorruptKudo) {
		t.Fatalf("truncated stream: %v", err)
	}
	if _, err := NewKudoDecoder(bytes.NewReader(good), schema, 60).Next(); !errors.Is(err, ErrBlockTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	// Headers alone, without a schema.
	tab, err := DecodeKudo(good, nil)
	if err != nil || tab.Batch != nil || tab.Rows != 3 || tab.Columns != 2 || tab.Size != 64 {
		t.Fatalf("header-only decode = %+v, %v", tab, err)
	}
}

func TestKudoWriteErrors(t *testing.T) {
	b := validBatch()
	if _, err := WriteKudo(io.Discard, b, 2, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("reversed range: %v", err)
	}
	wantErr := errors.New("disk full")
	n, err := WriteKudo(errWriter{wantErr}, b, 0, b.Rows)
	if !errors.Is(err, wantErr) || n != 0 {
		t.Fatalf("failing writer: %d, %v", n, err)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

func TestFormat(t *testing.T) {
	for _, f := range []Format{SHFC, Kudo} {
		g, err := ParseFormat(f.String())
		if err != nil || g != f || !f.Valid() {
			t.Fatalf("ParseFormat(%q) = %v, %v", f, g, err)
		}
	}
	if _, err := ParseFormat("arrow"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ParseFormat(arrow) = %v", err)
	}
	if Format(2).Valid() {
		t.Fatal("Format(2) is valid")
	}
	b := validBatch()
	for _, f := range []Format{SHFC, Kudo} {
		var buf bytes.Buffer
		if _, err := f.Write(&buf, b, 1, 3); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), f.Append(nil, b, 1, 3)) || f.Size(b, 1, 3) != buf.Len() {
			t.Fatalf("%v: Write, Append and Size disagree", f)
		}
	}
	if !bytes.HasPrefix(Kudo.Append(nil, b, 1, 3), kudoMagic[:]) || !bytes.HasPrefix(SHFC.Append(nil, b, 1, 3), blockMagic[:]) {
		t.Fatal("formats write the wrong magic")
	}
}
