package columnar

import (
	"testing"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
)

// FuzzView builds columnar layouts, nested ones included, from
// arbitrary bytes over an arbitrary payload, as a hostile client may send
// them. Whatever the protocol's checks, View and
// partition.Batch.Validate accept must serialize in both formats, every
// partition, and decode back to its rows; nothing may panic.
func FuzzView(f *testing.F) {
	// 3 rows: a array<struct<s:string,i:int8>> (offsets 0, 1, 2, 3 at
	// byte 4; list validity 0xff at 0), a void column (validity 0 at 20).
	payload := []byte{0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 'a', 'b', 'c'}
	f.Add(uint8(3), []byte{15, 1, 0, 4, 0xff, 16, 2, 0xff, 0xff, 0xff, 11, 0, 0xff, 4, 21, 2, 0, 0xff, 0xff, 21, 20, 0, 20, 0xff, 20}, payload)
	f.Add(uint8(2), []byte{17, 1, 0xff, 4, 0xff, 16, 2, 0xff, 0xff, 0xff, 12, 0, 0, 4, 21, 19, 0, 0xff, 0xff, 0}, payload)
	f.Fuzz(func(t *testing.T, rows uint8, spec, payload []byte) { checkColumnarSpec(t, rows, spec, payload) })
}

// TestColumnarSpecSeeds: the fuzz seeds are nested layouts the daemon
// accepts, so the fuzzer starts from batches that reach the serializers.
func TestColumnarSpecSeeds(t *testing.T) {
	payload := []byte{0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 'a', 'b', 'c'}
	if !checkColumnarSpec(t, 3, []byte{15, 1, 0, 4, 0xff, 16, 2, 0xff, 0xff, 0xff, 11, 0, 0xff, 4, 21, 2, 0, 0xff, 0xff, 21, 20, 0, 20, 0xff, 20}, payload) {
		t.Error("array<struct<string,int8>>, void: refused")
	}
	if !checkColumnarSpec(t, 2, []byte{17, 1, 0xff, 4, 0xff, 16, 2, 0xff, 0xff, 0xff, 12, 0, 0, 4, 21, 19, 0, 0xff, 0xff, 0}, payload) {
		t.Error("map<binary,interval day to second>: refused")
	}
}

// checkColumnarSpec checks the layout spec describes over payload and
// reports whether the daemon would accept it.
func checkColumnarSpec(t *testing.T, rows uint8, spec, payload []byte) bool {
	l := protocol.ColumnarLayout{Rows: int64(rows % 9), PartitionRows: []int64{0, int64(rows%9) / 2, int64(rows % 9)}}
	// Five bytes a column: type, children, and where its validity,
	// offsets and data start in the payload (each running to the
	// payload's end; 0xff: no such buffer).
	for i := 0; i+5 <= len(spec) && len(l.Columns) < 64; i += 5 {
		c := protocol.Column{Type: protocol.ColumnType(spec[i] % 22), Children: uint16(spec[i+1] % 4)}
		buf := func(at byte) protocol.Buffer {
			if at == 0xff || int(at) >= len(payload) {
				return protocol.Buffer{}
			}
			return protocol.Buffer{Offset: int64(at), Length: int64(len(payload) - int(at))}
		}
		c.Validity, c.Offsets, c.Data = buf(spec[i+2]), buf(spec[i+3]), buf(spec[i+4])
		if c.Type == protocol.TypeDecimal32 {
			c.Precision = 5
		}
		l.Columns = append(l.Columns, c)
	}
	m := protocol.Batch{Handle: 1, Kind: protocol.KindColumnar, Plane: protocol.PlaneInline, Columnar: l, Inline: payload}
	if m.Validate() != nil {
		return false
	}
	b, err := View(&m.Columnar, payload)
	if err != nil || b.Validate() != nil {
		return false
	}
	for p := range b.NumPartitions() {
		start, end := b.PartitionRows(p)
		blk := partition.AppendBlock(nil, b, start, end)
		got, _, err := partition.DecodeBlock(blk)
		if err != nil {
			t.Fatalf("partition %d: block: %v", p, err)
		}
		if got.Rows != end-start {
			t.Fatalf("partition %d: %d rows, want %d", p, got.Rows, end-start)
		}
		if start == end || manyRows(b.Columns, b.Rows) {
			continue // rendering every element would take the fuzzer's memory
		}
		tab, err := partition.DecodeKudo(partition.AppendKudo(nil, b, start, end), partition.SchemaOf(b))
		if err != nil {
			t.Fatalf("partition %d: kudo: %v", p, err)
		}
		for r := range tab.Rows {
			for ci := range b.Columns {
				w, g := &b.Columns[ci], &tab.Batch.Columns[ci]
				if w.IsNull(start+r) != g.IsNull(r) || !w.IsNull(start+r) && string(w.AppendText(nil, start+r)) != string(g.AppendText(nil, r)) ||
					string(got.Columns[ci].AppendText(nil, r)) != string(g.AppendText(nil, r)) && !w.IsNull(start+r) {
					t.Fatalf("partition %d row %d column %d differs", p, r, ci)
				}
			}
		}
	}
	return true
}

// manyRows reports whether cols of rows rows have a descendant of more
// than 4096 rows (a list's child may claim 2^31 rows of a struct without
// fields, which costs the daemon nothing but AppendText a lot).
func manyRows(cols []partition.Column, rows int) bool {
	for i := range cols {
		c := &cols[i]
		n := rows
		if c.Type.HasOffsets() && len(c.Offsets) > 0 && c.Type.Nested() {
			n = int(c.Offsets[rows])
		}
		if n > 4096 || manyRows(c.Children, n) {
			return true
		}
	}
	return false
}
