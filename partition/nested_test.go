package partition

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// nestedGoldens are slices of batches with nested columns whose kudo
// tables and blocks were derived by hand from the format rules
// (docs/format.md sections 2 and 7), not by running the encoders. They
// cover nulls at every level, empty and null lists, a list child whose
// slice is empty, slices starting mid-byte, a map, binary inside a list,
// the intervals and void.
var nestedGoldens = []struct {
	name       string
	batch      func() *Batch
	start, end int
	kudo, shfc string
}{
	{
		// a array<int>: [10], [11,12], null, [], [13,null,15]
		// s struct<x:smallint,y:string>: {1,p}, {2,""}, {null,qr}, null, {5,s}
		name: "array and struct, rows 1..4",
		batch: func() *Batch {
			return &Batch{Rows: 5, Columns: []Column{
				{Name: "a", Type: List, Validity: []byte{0x1b}, Offsets: []int32{0, 1, 3, 3, 3, 6}, Children: []Column{
					{Name: "element", Type: Int32, Validity: []byte{0x2f}, Data: le32(10, 11, 12, 13, 14, 15)},
				}},
				{Name: "s", Type: Struct, Validity: []byte{0x17}, Children: []Column{
					{Name: "x", Type: Int16, Validity: []byte{0x1b}, Data: []byte{1, 0, 2, 0, 3, 0, 4, 0, 5, 0}},
					{Name: "y", Type: String, Offsets: []int32{0, 1, 1, 3, 3, 4}, Data: []byte("pqrs")},
				}},
			}}
		},
		start: 1, end: 5,
		// Flattened: 0 a, 1 a.element, 2 s, 3 s.x, 4 s.y. Slices: a, s,
		// s.x, s.y (1, 4); a.element (o[1], o[5]-o[1]) = (1, 5).
		kudo: `4b554430 00000001 00000004 00000007 00000028 0000004f 00000005 0f // header, 29 bytes
		       1b 2f 17 1b 000000                          // validity byte 0 of a, element, s, x; pad to 36
		       01000000 03000000 03000000 03000000 06000000 // a offsets 1..5, verbatim
		       01000000 01000000 03000000 03000000 04000000 // y offsets 1..5
		       0b000000 0c000000 0d000000 0e000000 0f000000 // element rows 1..5
		       0200 0300 0400 0500                         // x rows 1..4
		       717273 00                                   // y chars 1..4 "qrs", pad`,
		shfc: `53484643 01 01 0500 04000000 c8000000 // header: 5 flattened columns, 4 rows, 200 bytes
		       0f 01 0000 05000000                 // a: list, nulls, 5 child rows
		       04 01 0000 14000000                 // element: int32, nulls, 20 bytes
		       10 01 0000 02000000                 // s: struct, nulls, 2 children
		       03 01 0000 08000000                 // x: int16, nulls, 8 bytes
		       0b 00 0000 03000000                 // y: string, 3 bytes
		       0100 0700 0100 0100 0100 61 656c656d656e74 73 78 79 000000 // names
		       0d 00000000000000                   // a validity, bits 1..4 of 0x1b
		       00000000 02000000 02000000 02000000 05000000 00000000 // a offsets rebased
		       17 00000000000000                   // element validity, bits 1..5 of 0x2f
		       0b000000 0c000000 0d000000 0e000000 0f000000 00000000 // element data
		       0b 00000000000000                   // s validity, bits 1..4 of 0x17
		       0d 00000000000000                   // x validity
		       0200 0300 0400 0500                 // x data
		       00000000 00000000 02000000 02000000 03000000 00000000 // y offsets rebased
		       717273 0000000000                   // y data`,
	},
	{
		// m map<string,bigint>: rows 0..8 one entry each, row 9 none.
		// v void; ym interval year to month; dt interval day to second;
		// b array<binary>: rows 0..8 empty, row 9 [0102, null].
		name: "map, void, intervals, array of binary, row 9",
		batch: func() *Batch {
			keys := Column{Name: "key", Type: String, Offsets: make([]int32, 10)}
			off := make([]int32, 11)
			for i := range 9 {
				keys.Data = append(keys.Data, 'k', byte('0'+i))
				keys.Offsets[i+1] = int32(2 * (i + 1))
				off[i+1] = int32(i + 1)
			}
			off[10] = 9
			vals := Column{Name: "value", Type: Int64, Validity: []byte{0xff, 0x01}, Data: le64(0, 1, 2, 3, 4, 5, 6, 7, 8)}
			return &Batch{Rows: 10, Columns: []Column{
				{Name: "m", Type: Map, Offsets: off, Children: []Column{{Name: "entries", Type: Struct, Children: []Column{keys, vals}}}},
				{Name: "v", Type: Void, Validity: []byte{0, 0}, Data: make([]byte, 10)},
				{Name: "ym", Type: YearMonthInterval, Data: le32(0, 0, 0, 0, 0, 0, 0, 0, 0, 14)},
				{Name: "dt", Type: DayTimeInterval, Validity: []byte{0xff, 0x02}, Data: le64(0, 0, 0, 0, 0, 0, 0, 0, 0, -1)},
				{Name: "b", Type: List, Offsets: []int32{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, Children: []Column{
					{Name: "element", Type: Binary, Validity: []byte{0x01}, Offsets: []int32{0, 2, 2}, Data: []byte{1, 2}},
				}},
			}}
		},
		start: 9, end: 10,
		// Flattened: 0 m, 1 entries, 2 key, 3 value, 4 v, 5 ym, 6 dt, 7 b,
		// 8 b.element, 9 its bytes. The entries' slice (9, 0) has no rows:
		// no validity bit for value, no offsets for key.
		kudo: `4b554430 00000009 00000001 00000006 0000001c 00000032 0000000a 50 01 // header, 30 bytes
		       00 02 01 000000             // validity byte 1 of v, dt; byte 0 of b.element; pad to 36
		       09000000 09000000           // m offsets 9..10
		       00000000 02000000           // b offsets 9..10
		       00000000 02000000 02000000  // b.element offsets 0..2
		       00                          // v row 9
		       0e000000                    // ym row 9: 14 months
		       ffffffffffffffff            // dt row 9: -1 µs
		       0102 00                     // b.element bytes 0..2, pad`,
	},
}

func TestNestedGolden(t *testing.T) {
	for _, g := range nestedGoldens {
		t.Run(g.name, func(t *testing.T) {
			b := g.batch()
			if err := b.Validate(); err != nil {
				t.Fatal(err)
			}
			want := unhex(t, g.kudo)
			if got := AppendKudo(nil, b, g.start, g.end); !bytes.Equal(got, want) {
				t.Fatalf("AppendKudo =\n%x\nwant\n%x", got, want)
			}
			var buf bytes.Buffer
			if n, err := WriteKudo(&buf, b, g.start, g.end); err != nil || n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("WriteKudo = %d, %v", n, err)
			}
			if got := KudoSize(b, g.start, g.end); got != len(want) {
				t.Fatalf("KudoSize = %d, want %d", got, len(want))
			}
			checkKudoAlignment(t, want)
			if got := applyKudoPlan(t, b, g.start, g.end); !bytes.Equal(got, want) {
				t.Fatalf("AppendKudoPlan makes\n%x\nwant\n%x", got, want)
			}
			tab, err := DecodeKudo(want, SchemaOf(b))
			if err != nil {
				t.Fatal(err)
			}
			assertSameRows(t, tab.Batch, b, g.start, g.end)
			if g.shfc == "" {
				checkBlockRoundTrip(t, b, g.start, g.end)
				return
			}
			wantBlk := unhex(t, g.shfc)
			if got := AppendBlock(nil, b, g.start, g.end); !bytes.Equal(got, wantBlk) {
				t.Fatalf("AppendBlock =\n%x\nwant\n%x", got, wantBlk)
			}
			checkBlockRoundTrip(t, b, g.start, g.end)
		})
	}
}

// checkBlockRoundTrip checks that the block of rows [start, end) of b has
// BlockSize bytes, is WriteSlice's, decodes to those rows with every
// column's name and shape, and re-encodes to itself.
func checkBlockRoundTrip(t *testing.T, b *Batch, start, end int) {
	t.Helper()
	blk := AppendBlock(nil, b, start, end)
	if len(blk) != BlockSize(b, start, end) {
		t.Fatalf("block of %d bytes, BlockSize %d", len(blk), BlockSize(b, start, end))
	}
	var w bytes.Buffer
	if _, err := WriteSlice(&w, b, start, end); err != nil || !bytes.Equal(w.Bytes(), blk) {
		t.Fatalf("WriteSlice = %v, or other bytes than AppendBlock", err)
	}
	got, n, err := DecodeBlock(blk)
	if err != nil || n != len(blk) {
		t.Fatalf("DecodeBlock = %d, %v", n, err)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("decoded block: %v", err)
	}
	if err := sameRows(b, start, end, got); err != nil {
		t.Fatal(err)
	}
	if err := CheckSchema(got, SchemaOf(b)); err != nil {
		t.Fatal(err)
	}
	if FormatSchema(SchemaOf(got)) != FormatSchema(SchemaOf(b)) {
		t.Fatalf("decoded schema %s, want %s", FormatSchema(SchemaOf(got)), FormatSchema(SchemaOf(b)))
	}
	if again := AppendBlock(nil, got, 0, got.Rows); !bytes.Equal(again, blk) {
		t.Fatalf("decoded block re-encodes to other bytes")
	}
}

// applyKudoPlan builds the table of rows [start, end) of b from
// AppendKudoPlan's header and pieces, copying from b's flattened columns.
func applyKudoPlan(t *testing.T, b *Batch, start, end int) []byte {
	t.Helper()
	var flat []*Column
	walkRanges(b.Columns, 0, 0, func(c *Column, _, _ int) { flat = append(flat, c) })
	head, pieces, size := AppendKudoPlan(nil, nil, b, start, end)
	got := head
	for _, p := range pieces {
		switch p.Buffer {
		case KudoZeros:
			got = append(got, make([]byte, p.Len)...)
		case KudoValidity:
			got = append(got, flat[p.Column].Validity[p.Off:p.Off+p.Len]...)
		case KudoOffsets:
			got = append(got, int32Bytes(flat[p.Column].Offsets)[p.Off:p.Off+p.Len]...)
		case KudoData:
			got = append(got, flat[p.Column].Data[p.Off:p.Off+p.Len]...)
		}
	}
	if len(got) != size {
		t.Fatalf("plan of %d bytes, size %d", len(got), size)
	}
	return got
}

// randomColumn returns a random valid column of rows rows: at depth > 0
// or by chance a leaf of any type, else a list, map or struct of random
// children, with validity at about half the levels (a third of rows
// null, garbage past the last row).
func randomColumn(r *rand.Rand, rows, depth int, name string) Column {
	var c Column
	kind := r.IntN(5)
	if depth >= 3 {
		kind = 4
	}
	switch kind {
	case 0, 1:
		c = Column{Type: List, Offsets: randomOffsets(r, rows, 3)}
		c.Children = []Column{randomColumn(r, int(c.Offsets[rows]), depth+1, "element")}
	case 2:
		c = Column{Type: Map, Offsets: randomOffsets(r, rows, 3)}
		n := int(c.Offsets[rows])
		c.Children = []Column{{Name: "entries", Type: Struct, Children: []Column{
			randomLeaf(r, n, String, false), randomColumn(r, n, depth+1, "value")}}}
		c.Children[0].Children[0].Name = "key"
	case 3:
		c = Column{Type: Struct}
		for i := range r.IntN(4) {
			c.Children = append(c.Children, randomColumn(r, rows, depth+1, fmt.Sprintf("f%d", i)))
		}
	default:
		types := append(allTypes[:len(allTypes):len(allTypes)], YearMonthInterval, DayTimeInterval, Void)
		c = randomLeaf(r, rows, types[r.IntN(len(types))], r.IntN(2) == 0)
	}
	if c.Type.Nested() && r.IntN(2) == 0 {
		c.Validity = randomValidity(r, rows)
	}
	c.Name = name
	return c
}

func randomOffsets(r *rand.Rand, rows, maxLen int) []int32 {
	off := make([]int32, rows+1)
	for i := range rows {
		off[i+1] = off[i] + int32(r.IntN(maxLen+1))
	}
	return off
}

func randomValidity(r *rand.Rand, rows int) []byte {
	v := make([]byte, (rows+7)/8)
	for i := range v {
		v[i] = byte(r.Uint32())
	}
	for i := range rows {
		if r.IntN(3) != 0 {
			v[i>>3] |= 1 << (i & 7)
		}
	}
	return v
}

func randomLeaf(r *rand.Rand, rows int, t Type, nulls bool) Column {
	c := Column{Type: t}
	switch t {
	case Decimal32:
		c.Precision, c.Scale = 7, 2
	case Decimal64:
		c.Precision, c.Scale = 12, 3
	case Decimal128:
		c.Precision, c.Scale = 30, 5
	}
	if t.VarWidth() {
		c.Offsets = randomOffsets(r, rows, 4)
		c.Data = make([]byte, c.Offsets[rows])
		for i := range c.Data {
			c.Data[i] = byte('a' + r.IntN(26))
		}
	} else {
		c.Data = make([]byte, rows*t.Width())
		for i := range c.Data {
			c.Data[i] = byte(r.Uint32())
			if t == Bool {
				c.Data[i] &= 1
			}
		}
	}
	if t == Void {
		c.Validity = make([]byte, (rows+7)/8)
	} else if nulls {
		c.Validity = randomValidity(r, rows)
	}
	return c
}

func randomNestedBatch(r *rand.Rand, rows int) *Batch {
	b := &Batch{Rows: rows}
	for i := range 1 + r.IntN(4) {
		b.Columns = append(b.Columns, randomColumn(r, rows, 0, fmt.Sprintf("c%d", i)))
	}
	return b
}

// TestNestedRandom checks, for random batches of nested columns and
// random slices, that both formats' sizes, writers and plans agree, that
// kudo tables are aligned, and that both decode to the slice's rows
// (values and nulls at every level).
func TestNestedRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 17))
	for iter := range 300 {
		rows := r.IntN(40)
		b := randomNestedBatch(r, rows)
		if err := b.Validate(); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		start := r.IntN(rows + 1)
		end := start + r.IntN(rows-start+1)
		checkBlockRoundTrip(t, b, start, end)
		want := AppendKudo(nil, b, start, end)
		if KudoSize(b, start, end) != len(want) {
			t.Fatalf("iter %d: KudoSize %d, table %d", iter, KudoSize(b, start, end), len(want))
		}
		var w bytes.Buffer
		if _, err := WriteKudo(&w, b, start, end); err != nil || !bytes.Equal(w.Bytes(), want) {
			t.Fatalf("iter %d: WriteKudo differs: %v", iter, err)
		}
		if start == end {
			continue
		}
		if got := applyKudoPlan(t, b, start, end); !bytes.Equal(got, want) {
			t.Fatalf("iter %d: plan differs from AppendKudo", iter)
		}
		checkKudoAlignment(t, want)
		tab, err := DecodeKudo(want, SchemaOf(b))
		if err != nil {
			t.Fatalf("iter %d: rows [%d,%d) of %s: %v", iter, start, end, FormatSchema(SchemaOf(b)), err)
		}
		assertSameRows(t, tab.Batch, b, start, end)
		// A table of the decoded rows, at row offset 0, reads the same.
		again, err := DecodeKudo(AppendKudo(nil, tab.Batch, 0, tab.Rows), SchemaOf(b))
		if err != nil {
			t.Fatalf("iter %d: re-encoded table: %v", iter, err)
		}
		assertSameRows(t, again.Batch, tab.Batch, 0, tab.Rows)
		for _, f := range []Format{SHFC, Kudo} {
			bounds := f.Split(b, start, end, 200)
			for k := 1; k < len(bounds); k++ {
				if bounds[k]-bounds[k-1] > 1 && f.Size(b, bounds[k-1], bounds[k]) > 200 {
					t.Fatalf("iter %d: %v split [%d,%d) of %d bytes", iter, f, bounds[k-1], bounds[k], f.Size(b, bounds[k-1], bounds[k]))
				}
			}
		}
	}
}

func TestNestedValidate(t *testing.T) {
	good := nestedGoldens[0].batch
	for _, c := range []struct {
		name string
		mod  func(b *Batch)
		want string
	}{
		{"list without child", func(b *Batch) { b.Columns[0].Children = nil }, `column 0 "a": 0 children on a list column`},
		{"list offsets past", func(b *Batch) { b.Columns[0].Offsets[5] = 7 }, `column 0 "a".element: data length = 24 bytes, want at least 28`},
		{"list offsets decrease", func(b *Batch) { b.Columns[0].Offsets[2] = 0 }, `column 0 "a": offsets[2] = 0, less than offsets[1] = 1`},
		{"list data", func(b *Batch) { b.Columns[0].Data = []byte{1} }, `column 0 "a": data length = 1 on a list column`},
		{"child validity", func(b *Batch) { b.Columns[0].Children[0].Validity = []byte{} }, `column 0 "a".element: validity length = 0 bytes, want at least 1`},
		{"struct child short", func(b *Batch) { b.Columns[1].Children[0].Data = b.Columns[1].Children[0].Data[:8] }, `column 1 "s".x: data length = 8 bytes`},
		{"struct child string", func(b *Batch) { b.Columns[1].Children[1].Offsets[5] = 9 }, `column 1 "s".y: offsets[5] = 9, past the end of data`},
		{"struct offsets", func(b *Batch) { b.Columns[1].Offsets = []int32{0} }, `column 1 "s": offsets, data lengths = 1, 0 on a struct column`},
		{"leaf children", func(b *Batch) { b.Columns[1].Children[0].Children = []Column{{}} }, `column 1 "s".x: 1 children on a int16 column`},
		{"map shape", func(b *Batch) { b.Columns[0].Type = Map }, `column 0 "a": children of a map column`},
		{"void valid", func(b *Batch) {
			b.Columns = append(b.Columns, Column{Type: Void, Validity: []byte{0x04}, Data: make([]byte, 5)})
		}, `column 2 "": void column: 1 of 5 rows valid`},
		{"void no validity", func(b *Batch) { b.Columns = append(b.Columns, Column{Type: Void, Data: make([]byte, 5)}) }, `void column of 5 rows without a validity bitmap`},
		{"too deep", func(b *Batch) {
			c := Column{Type: Int32, Data: make([]byte, 20)}
			for range MaxNestingDepth + 1 {
				c = Column{Type: Struct, Children: []Column{c}}
			}
			b.Columns = []Column{c}
		}, "nested deeper than 256 levels"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := good()
			c.mod(b)
			err := b.Validate()
			if !errors.Is(err, ErrInvalidBatch) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// A table or block cut from a nested golden and corrupted in its nested
// parts is refused with an error naming the column path and the field.
func TestNestedDecodeErrors(t *testing.T) {
	g := nestedGoldens[0]
	b := g.batch()
	schema := SchemaOf(b)
	good := unhex(t, g.kudo)
	mod := func(at int, v byte) []byte { p := bytes.Clone(good); p[at] = v; return p }
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"list offsets decrease", mod(40, 0), `column 0 "a": offsets[1] = 0, less than offsets[0] = 1`},
		{"list child past data", mod(52, 9), `column 1 "s".x: data: 8 bytes at 32, past the section's 32 bytes`},
		{"struct child offsets", mod(68, 9), `column 1 "s".y: offsets[4] = 4, less than offsets[3] = 9`},
		{"validity bit on an empty slice", nil, `column 0 "m".entries.value: has-validity bit set on a slice of 0 rows`},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema := schema
			if c.in == nil {
				g2 := nestedGoldens[1]
				c.in = unhex(t, g2.kudo)
				c.in[28] |= 1 << 3
				schema = SchemaOf(g2.batch())
			}
			_, err := DecodeKudo(c.in, schema)
			if !errors.Is(err, ErrCorruptKudo) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeKudo = %v, want ErrCorruptKudo containing %q", err, c.want)
			}
		})
	}
	blk := unhex(t, g.shfc)
	bmod := func(at int, v byte) []byte { p := bytes.Clone(blk); p[at] = v; return p }
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"child rows", bmod(20, 6), `column 0 "a": offsets[4] = 5, want child rows 6`},
		{"map shape", bmod(16, byte(Map)), `column 0 "a": children of a map column`},
		{"list type child of struct", bmod(40, byte(List)), `column 1 "s".x: offsets: nonzero padding`},
		{"struct children", bmod(36, 3), `column 1 "s": 3 children, but 2 descriptors follow`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeBlock(c.in)
			if !errors.Is(err, ErrCorruptBlock) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeBlock = %v, want ErrCorruptBlock containing %q", err, c.want)
			}
		})
	}
}

// randomColumnOf returns a random valid column of field f's shape.
func randomColumnOf(r *rand.Rand, f Field, rows int) Column {
	var c Column
	switch f.Type {
	case List, Map:
		c = Column{Type: f.Type, Offsets: randomOffsets(r, rows, 3), Validity: randomValidity(r, rows)}
		c.Children = []Column{randomColumnOf(r, f.Children[0], int(c.Offsets[rows]))}
	case Struct:
		c = Column{Type: Struct, Validity: randomValidity(r, rows)}
		for _, cf := range f.Children {
			c.Children = append(c.Children, randomColumnOf(r, cf, rows))
		}
	default:
		c = randomLeaf(r, rows, f.Type, true)
		c.Precision, c.Scale = f.Precision, f.Scale
	}
	c.Name = f.Name
	return c
}

// Partition reorders nested columns with their rows, children included:
// every output row reads as the input row it came from.
func TestPartitionNested(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for iter := range 50 {
		rows := r.IntN(40)
		b := randomNestedBatch(r, rows)
		b.Columns = append(b.Columns, randomLeaf(r, rows, Int32, false))
		key := len(b.Columns) - 1
		p, err := Partition(b, []int{key, 0}, 1+r.IntN(5))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("iter %d: partitioned batch: %v", iter, err)
		}
		want := map[string]int{}
		for i := range rows {
			want[rowText(b, i)]++
		}
		for i := range rows {
			want[rowText(p, i)]--
		}
		for row, n := range want {
			if n != 0 {
				t.Fatalf("iter %d: row %q appears %d more times in the input than in the output", iter, row, n)
			}
		}
		hashes := make([]int32, p.Rows)
		HashRows(p, []int{key, 0}, hashes)
		for q := range p.NumPartitions() {
			start, end := p.PartitionRows(q)
			for i := start; i < end; i++ {
				if Pmod(hashes[i], p.NumPartitions()) != q {
					t.Fatalf("iter %d: row %d in partition %d", iter, i, q)
				}
			}
		}
	}
}
