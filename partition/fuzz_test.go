package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
)

// FuzzDecodeBlocks feeds arbitrary bytes to the decoders. They must never
// panic; whatever decodes must validate, re-encode to exactly the input (the
// encoding is canonical), and decode the same through the stream Decoder.
// Seeds: a few blocks below, more in testdata/fuzz/FuzzDecodeBlocks.
func FuzzDecodeBlocks(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 1))
	b := randomBatch(r, 20, true, 5)
	f.Add(AppendBlock(nil, b, 3, 11))
	f.Add(AppendBlock(AppendBlock(nil, b, 0, 0), b, 9, 20))
	f.Add(AppendBlock(nil, validBatch(), 0, 3))
	f.Add(AppendBlock(nil, &Batch{Rows: 4}, 0, 4))
	f.Add([]byte("SHFC\x01\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00"))
	for _, g := range nestedGoldens {
		f.Add(AppendBlock(nil, g.batch(), g.start, g.end))
	}
	nr := rand.New(rand.NewPCG(2, 3))
	nb := randomNestedBatch(nr, 25)
	f.Add(AppendBlock(AppendBlock(nil, nb, 0, 7), nb, 7, 25))
	f.Fuzz(func(t *testing.T, data []byte) {
		batches, err := DecodeBlocks(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptBlock) && !errors.Is(err, ErrBlockVersion) {
				t.Fatalf("DecodeBlocks error %v wraps neither ErrCorruptBlock nor ErrBlockVersion", err)
			}
		}
		var again []byte
		for i, b := range batches {
			if err := b.Validate(); err != nil {
				t.Fatalf("block %d decodes to an invalid batch: %v", i, err)
			}
			again = AppendBlock(again, b, 0, b.Rows)
		}
		if !bytes.Equal(again, data[:len(again)]) {
			t.Fatalf("decoded blocks re-encode to other bytes")
		}
		if err == nil && len(again) != len(data) {
			t.Fatalf("decoded blocks re-encode to %d bytes, input is %d", len(again), len(data))
		}
		d := NewDecoder(bytes.NewReader(data), 0)
		for i := 0; ; i++ {
			b, derr := d.Next()
			if derr == io.EOF || (derr != nil && err != nil && i == len(batches)) {
				if i != len(batches) {
					t.Fatalf("Decoder read %d blocks, DecodeBlocks %d", i, len(batches))
				}
				break
			}
			if derr != nil || i >= len(batches) {
				t.Fatalf("Decoder block %d: %v (DecodeBlocks: %d blocks, %v)", i, derr, len(batches), err)
			}
			if err := sameRows(batches[i], 0, batches[i].Rows, b); err != nil {
				t.Fatalf("Decoder block %d: %v", i, err)
			}
		}
	})
}

// byteSource hands out fuzz input as small numbers, zeros once exhausted.
type byteSource struct{ p []byte }

func (s *byteSource) u8() int {
	if len(s.p) == 0 {
		return 0
	}
	v := s.p[0]
	s.p = s.p[1:]
	return int(v)
}

func (s *byteSource) u16() int { return s.u8() | s.u8()<<8 }

func (s *byteSource) bytes(n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(s.u8())
	}
	return out
}

// columnFromBytes reads a column of rows rows from s, as batchFromBytes
// does, mostly valid: a list, map or struct gets children built the same
// way (a list's child as many rows as its offsets reach), up to 3 levels
// deep; the mistakes bits break one rule or another.
func columnFromBytes(s *byteSource, rows, depth int) Column {
	mode, colMistakes := s.u8(), s.u8()&s.u8()&s.u8()
	c := Column{Type: Type(s.u8()%int(maxType) + 1)}
	if colMistakes&1 != 0 {
		c.Type = Type(s.u8() % (int(maxType) + 2))
	}
	if mode&1 != 0 {
		c.Name = string(s.bytes(s.u8() % 8))
	}
	if mp := c.Type.MaxPrecision(); mp > 0 {
		c.Precision = int8(1 + s.u8()%mp)
		c.Scale = int8(s.u8() % (int(c.Precision) + 1))
	}
	if colMistakes&2 != 0 {
		c.Precision, c.Scale = int8(s.u8()), int8(s.u8())
	}
	if mode&2 != 0 {
		n := (rows+7)/8 + s.u8()%3
		if colMistakes&4 != 0 {
			n = s.u8() % 40
		}
		c.Validity = s.bytes(n)
	}
	dataLen := rows*c.Type.Width() + s.u8()%3
	if c.Type.VarWidth() || colMistakes&8 != 0 {
		n := rows + 1
		if colMistakes&16 != 0 {
			n = s.u8() % (rows + 3)
		}
		c.Offsets = make([]int32, n)
		for i := 1; i < n; i++ {
			c.Offsets[i] = c.Offsets[i-1] + int32(s.u8()%6)
			if colMistakes&32 != 0 {
				c.Offsets[i] += int32(int8(s.u8())) / 8
			}
		}
		if n > 0 {
			dataLen = int(c.Offsets[n-1]) + s.u8()%3
		}
	}
	if colMistakes&64 != 0 {
		dataLen = s.u16() % 2500
	}
	c.Data = s.bytes(max(dataLen, 0))
	if depth < 3 {
		switch c.Type {
		case List, Map:
			if c.Offsets == nil {
				c.Offsets = make([]int32, rows+1)
				for i := 1; i <= rows; i++ {
					c.Offsets[i] = c.Offsets[i-1] + int32(s.u8()%3)
				}
			}
			childRows := 0
			if len(c.Offsets) > 0 {
				childRows = max(int(c.Offsets[len(c.Offsets)-1]), 0)
			}
			child := columnFromBytes(s, min(childRows, 1000), depth+1)
			if c.Type == Map {
				child = Column{Type: Struct, Children: []Column{columnFromBytes(s, min(childRows, 1000), depth+1), child}}
			}
			c.Children = []Column{child}
			if colMistakes&128 == 0 {
				c.Data = nil
			}
		case Struct:
			for range s.u8() % 3 {
				c.Children = append(c.Children, columnFromBytes(s, rows, depth+1))
			}
			if colMistakes&128 == 0 {
				c.Offsets, c.Data = nil, nil
			}
		case Void:
			if colMistakes&128 == 0 && rows > 0 {
				c.Validity = make([]byte, (rows+7)/8)
			}
		}
	}
	return c
}

// batchFromBytes builds an arbitrary batch from data: well-formed by
// construction, except where the bits of a "mistake" byte ask for one field
// or another to be drawn without regard to the rules, so that the fuzzer
// reaches both valid batches and near misses.
func batchFromBytes(data []byte) *Batch {
	s := &byteSource{p: data}
	rows := s.u16() % 300
	mistakes := s.u8() & s.u8() // few bits set
	b := &Batch{Rows: rows}
	if mistakes&1 != 0 {
		b.Rows = rows - 2
	}
	if np := s.u8() % 6; np > 0 {
		b.PartitionOffsets = make([]int32, np+1)
		for p := 1; p < np; p++ {
			prev := int(b.PartitionOffsets[p-1])
			b.PartitionOffsets[p] = int32(prev + s.u8()%(rows-prev+1))
		}
		b.PartitionOffsets[np] = int32(rows)
		if mistakes&2 != 0 {
			b.PartitionOffsets[s.u8()%(np+1)] += int32(int8(s.u8()))
		}
	}
	for range s.u8() % 6 {
		b.Columns = append(b.Columns, columnFromBytes(s, rows, 0))
	}
	return b
}

// FuzzValidate builds arbitrary batches and checks the package's main
// invariant: whatever Validate accepts, every other function handles
// without panicking, and its blocks round-trip.
func FuzzValidate(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{10, 0, 2, 5, 1, 11, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 0, 3, 2, 1, 4, 3, 5, 6, 1, 0, 'a', 'b', 'c', 4, 11, 9, 0, 1, 1, 1, 7, 0})
	f.Add([]byte{200, 0, 0, 2, 7, 10, 15, 2, 40, 1, 255, 255, 255, 3, 0, 0, 9, 0, 1, 2, 3, 4, 5, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := batchFromBytes(data)
		if err := b.Validate(); err != nil {
			if !errors.Is(err, ErrInvalidBatch) {
				t.Fatalf("Validate error %v does not wrap ErrInvalidBatch", err)
			}
			return
		}
		hashes := make([]int32, b.Rows)
		keys := make([]int, len(b.Columns))
		for i := range keys {
			keys[i] = i
		}
		HashRows(b, keys, hashes)
		for ci := range b.Columns {
			for i := range b.Rows {
				b.Columns[ci].AppendText(nil, i)
				b.Columns[ci].Hash(i, 1)
			}
		}
		for p := range b.NumPartitions() {
			start, end := b.PartitionRows(p)
			blk := AppendSlice(nil, b, p)
			if len(blk) != SliceSize(b, p) {
				t.Fatalf("partition %d: AppendSlice wrote %d bytes, SliceSize = %d", p, len(blk), SliceSize(b, p))
			}
			got, _, err := DecodeBlock(blk)
			if err != nil {
				t.Fatalf("partition %d: DecodeBlock(AppendSlice) = %v", p, err)
			}
			if err := sameRows(b, start, end, got); err != nil {
				t.Fatalf("partition %d: %v", p, err)
			}
			var w bytes.Buffer
			if _, err := WriteSlice(&w, b, start, end); err != nil || !bytes.Equal(w.Bytes(), blk) {
				t.Fatalf("partition %d: WriteSlice = %v, or bytes differ from AppendSlice", p, err)
			}
			tab := AppendKudo(nil, b, start, end)
			if len(tab) != KudoSize(b, start, end) || len(tab)%4 != 0 || (start == end) != (len(tab) == 0) {
				t.Fatalf("partition %d: AppendKudo wrote %d bytes, KudoSize = %d", p, len(tab), KudoSize(b, start, end))
			}
			if start == end {
				continue
			}
			kt, err := DecodeKudo(tab, SchemaOf(b))
			if err != nil {
				t.Fatalf("partition %d: DecodeKudo(AppendKudo) = %v", p, err)
			}
			if err := sameRows(b, start, end, kt.Batch); err != nil {
				t.Fatalf("partition %d: kudo: %v", p, err)
			}
		}
		n := max(b.NumPartitions(), 1)
		out, err := Partition(b, keys, n)
		if err != nil {
			t.Fatalf("Partition of a valid batch = %v", err)
		}
		if err := out.Validate(); err != nil {
			t.Fatalf("Partition output invalid: %v", err)
		}
	})
}

// kudoFuzzSchemas are the schemas FuzzDecodeKudo reads its input with,
// picked by the input's first byte.
var kudoFuzzSchemas = [][]Field{
	nil, // headers alone
	{},  // no columns
	{{Name: "id", Type: Int32}, {Name: "s", Type: String}},
	{{Type: Binary}, {Type: Int8}},
	{{Type: Bool}, {Type: Int16}, {Type: Int64}, {Type: Float32}, {Type: Float64}, {Type: Date32},
		{Type: TimestampMicros}, {Type: Decimal32, Precision: 9, Scale: 2},
		{Type: Decimal64, Precision: 18, Scale: 4}, {Type: Decimal128, Precision: 38, Scale: 10}},
}

// FuzzDecodeKudo feeds arbitrary bytes to the kudo decoders with one of
// kudoFuzzSchemas. They must never panic; errors wrap ErrCorruptKudo;
// whatever decodes validates, decodes the same through the KudoDecoder, and
// re-encodes to exactly the input from a batch rebuilt around it (the
// table's row offset, its validity bytes and its offsets as they were):
// the decoder accepts only what KudoSerializer writes. Seeds: tables
// below, more in testdata/fuzz/FuzzDecodeKudo.
func FuzzDecodeKudo(f *testing.F) {
	for _, g := range kudoGoldens {
		b := g.batch()
		sel := byte(0)
		for i, s := range kudoFuzzSchemas {
			if s != nil && slices.EqualFunc(s, SchemaOf(b), func(a, b Field) bool { return a.Type == b.Type }) {
				sel = byte(i)
			}
		}
		f.Add(append([]byte{sel}, AppendKudo(nil, b, g.start, g.end)...))
	}
	r := rand.New(rand.NewPCG(5, 5))
	b := randomBatch(r, 30, true, 4)
	b.Columns = slices.DeleteFunc(b.Columns, func(c Column) bool { return c.Type == String || c.Type == Int8 || c.Type == Binary })
	f.Add(append([]byte{4}, append(AppendKudo(nil, b, 3, 17), AppendKudo(nil, b, 17, 30)...)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		schema := kudoFuzzSchemas[int(data[0])%len(kudoFuzzSchemas)]
		data = data[1:]
		tabs, err := DecodeKudoTables(data, schema)
		if err != nil && !errors.Is(err, ErrCorruptKudo) {
			t.Fatalf("DecodeKudoTables error %v does not wrap ErrCorruptKudo", err)
		}
		off := 0
		for i, tab := range tabs {
			raw := data[off : off+tab.Size]
			off += tab.Size
			if schema == nil {
				continue
			}
			if err := tab.Batch.Validate(); err != nil {
				t.Fatalf("table %d decodes to an invalid batch: %v", i, err)
			}
			src, ok := kudoSource(raw, tab)
			if !ok {
				continue
			}
			if err := src.Validate(); err != nil {
				t.Fatalf("table %d: rebuilt source invalid: %v", i, err)
			}
			if again := AppendKudo(nil, src, tab.RowOffset, tab.RowOffset+tab.Rows); !bytes.Equal(again, raw) {
				t.Fatalf("table %d re-encodes to\n%x\nnot\n%x", i, again, raw)
			}
		}
		d := NewKudoDecoder(bytes.NewReader(data), schema, 0)
		for i := 0; ; i++ {
			tab, derr := d.Next()
			if derr == io.EOF || (derr != nil && err != nil && i == len(tabs)) {
				if i != len(tabs) {
					t.Fatalf("KudoDecoder read %d tables, DecodeKudoTables %d", i, len(tabs))
				}
				break
			}
			if derr != nil || i >= len(tabs) {
				t.Fatalf("KudoDecoder table %d: %v (DecodeKudoTables: %d tables, %v)", i, derr, len(tabs), err)
			}
			if tab.Size != tabs[i].Size || tab.Rows != tabs[i].Rows || tab.RowOffset != tabs[i].RowOffset {
				t.Fatalf("KudoDecoder table %d: %+v, DecodeKudoTables %+v", i, tab, tabs[i])
			}
			if schema != nil {
				if err := sameRows(tabs[i].Batch, 0, tab.Rows, tab.Batch); err != nil {
					t.Fatalf("KudoDecoder table %d: %v", i, err)
				}
			}
		}
	})
}

// kudoSource rebuilds a batch whose rows [R, R+N) serialize to the decoded
// table raw: validity bytes R/8.. as they are in raw, offsets shifted back
// by the table's first offset, data placed at row R. It reports false for
// a table no valid batch serializes to (a first offset above 0 at row 0),
// and for one whose source would take more memory than a fuzz run should.
func kudoSource(raw []byte, tab *KudoTable) (*Batch, bool) {
	R, N := tab.RowOffset, tab.Rows
	if R > 1<<16 {
		return nil, false
	}
	h := kudoFixedHeader + (tab.Columns+7)/8
	first, nb := 0, 0
	if N > 0 {
		first, nb = validitySpan(R, N)
	}
	body := raw[h:]
	b := &Batch{Rows: R + N}
	vpos, opos := 0, int(binary.BigEndian.Uint32(raw[12:]))
	for _, c := range tab.Batch.Columns {
		s := Column{Name: c.Name, Type: c.Type, Precision: c.Precision, Scale: c.Scale}
		if c.Validity != nil {
			s.Validity = make([]byte, (R+N+7)/8)
			copy(s.Validity[first:], body[vpos:vpos+nb])
			vpos += nb
		}
		if c.Type.VarWidth() {
			base := int32(binary.LittleEndian.Uint32(body[opos:]))
			opos += 4 * (N + 1)
			if R == 0 && base != 0 || base > 1<<20 {
				return nil, false
			}
			s.Offsets = make([]int32, R+N+1)
			for i := 1; i <= R; i++ {
				s.Offsets[i] = base
			}
			for i, o := range c.Offsets {
				s.Offsets[R+i] = base + o
			}
			s.Data = append(make([]byte, base), c.Data...)
		} else {
			w := c.Type.Width()
			s.Data = append(make([]byte, R*w), c.Data...)
		}
		b.Columns = append(b.Columns, s)
	}
	return b, true
}

// nestedFuzzSchemas are the schemas FuzzDecodeKudoNested reads tables
// with: the nested goldens' and a deep one.
var nestedFuzzSchemas = func() [][]Field {
	var out [][]Field
	for _, g := range nestedGoldens {
		out = append(out, SchemaOf(g.batch()))
	}
	deep, err := ParseSchema("x array<struct<a:array<binary>,m:map<string,array<int>>>>, v void")
	if err != nil {
		panic(err)
	}
	return append(out, deep)
}()

// FuzzDecodeKudoNested feeds arbitrary bytes to the kudo decoders with a
// schema of nested columns (the first byte picks it). They must never
// panic; errors wrap ErrCorruptKudo; whatever decodes validates, and its
// rows re-encoded (at row offset 0) decode to the same rows.
func FuzzDecodeKudoNested(f *testing.F) {
	for i, g := range nestedGoldens {
		f.Add(append([]byte{byte(i)}, AppendKudo(nil, g.batch(), g.start, g.end)...))
	}
	r := rand.New(rand.NewPCG(9, 9))
	deep := &Batch{Rows: 12}
	for _, fl := range nestedFuzzSchemas[len(nestedFuzzSchemas)-1] {
		deep.Columns = append(deep.Columns, randomColumnOf(r, fl, 12))
	}
	f.Add(append([]byte{byte(len(nestedFuzzSchemas) - 1)}, append(AppendKudo(nil, deep, 3, 9), AppendKudo(nil, deep, 9, 12)...)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		schema := nestedFuzzSchemas[int(data[0])%len(nestedFuzzSchemas)]
		tabs, err := DecodeKudoTables(data[1:], schema)
		if err != nil && !errors.Is(err, ErrCorruptKudo) {
			t.Fatalf("DecodeKudoTables error %v does not wrap ErrCorruptKudo", err)
		}
		for i, tab := range tabs {
			if err := tab.Batch.Validate(); err != nil {
				t.Fatalf("table %d decodes to an invalid batch: %v", i, err)
			}
			again, err := DecodeKudo(AppendKudo(nil, tab.Batch, 0, tab.Rows), schema)
			if err != nil {
				t.Fatalf("table %d re-encoded: %v", i, err)
			}
			if err := sameRows(tab.Batch, 0, tab.Rows, again.Batch); err != nil {
				t.Fatalf("table %d re-encoded: %v", i, err)
			}
		}
	})
}
