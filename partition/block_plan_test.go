package partition

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"
)

// applyBlockPlan builds the block of rows [start, end) of b from
// AppendBlockPlan's header and pieces, reading b's flattened columns:
// bitmaps shifted, offsets rebased, data copied.
func applyBlockPlan(t *testing.T, b *Batch, start, end int) ([]byte, []BlockPiece) {
	t.Helper()
	var flat []*Column
	walkRanges(b.Columns, 0, 0, func(c *Column, _, _ int) { flat = append(flat, c) })
	head, pieces, size := AppendBlockPlan([]byte{0xee}, nil, b, start, end)
	got := append([]byte(nil), head[1:]...)
	for _, p := range pieces {
		if p.Len <= 0 {
			t.Fatalf("piece %+v of no bytes", p)
		}
		switch p.Section {
		case BlockZeros:
			got = append(got, make([]byte, p.Len)...)
		case BlockValidity:
			bits := make([]byte, (p.Len+7)/8)
			for i := range p.Len {
				if r := p.Off + i; flat[p.Column].Validity[r>>3]>>(r&7)&1 != 0 {
					bits[i>>3] |= 1 << (i & 7)
				}
			}
			got = append(got, bits...)
		case BlockOffsets:
			for _, o := range flat[p.Column].Offsets[p.Off : p.Off+p.Len] {
				got = binary.LittleEndian.AppendUint32(got, uint32(o-p.Base))
			}
		case BlockData:
			got = append(got, flat[p.Column].Data[p.Off:p.Off+p.Len]...)
		default:
			t.Fatalf("piece %+v", p)
		}
	}
	if len(got) != size {
		t.Fatalf("plan of %d bytes, size %d", len(got), size)
	}
	return got, pieces
}

// skeleton returns cols without their bitmap and data bytes: what a GPU
// plan knows of them (types, names, offsets, whether a bitmap is there).
func skeleton(cols []Column) []Column {
	if cols == nil {
		return nil
	}
	out := make([]Column, len(cols))
	for i, c := range cols {
		out[i] = Column{Name: c.Name, Type: c.Type, Precision: c.Precision, Scale: c.Scale, Offsets: c.Offsets, Children: skeleton(c.Children)}
		if c.Validity != nil {
			out[i].Validity = []byte{}
		}
	}
	return out
}

// A block plan's header and pieces, applied to the batch's buffers, are
// AppendBlock's block byte for byte, for flat batches of every type and
// random nested ones (nulls at every level, empty lists, slices starting
// mid-byte at every depth); the plan of a skeleton batch (no bitmap or
// data bytes) is the same.
func TestAppendBlockPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	for iter := range 600 {
		rows := r.IntN(90)
		var b *Batch
		if iter%2 == 0 {
			b = randomBatch(r, rows, iter%4 == 0, 11)
		} else {
			b = randomNestedBatch(r, rows%40)
			rows = b.Rows
		}
		if iter%9 == 0 {
			b.Columns = nil
		}
		start := r.IntN(rows + 1)
		end := start + r.IntN(rows-start+1)
		want := AppendBlock(nil, b, start, end)
		got, pieces := applyBlockPlan(t, b, start, end)
		if !bytes.Equal(got, want) {
			t.Fatalf("iter %d rows [%d,%d) of %s: plan makes\n%x\nAppendBlock\n%x", iter, start, end, FormatSchema(SchemaOf(b)), got, want)
		}
		sk := &Batch{Rows: b.Rows, Columns: skeleton(b.Columns)}
		head2, pieces2, size2 := AppendBlockPlan(nil, nil, sk, start, end)
		if !bytes.Equal(head2, got[:len(head2)]) || size2 != len(want) || !reflect.DeepEqual(pieces2, pieces) {
			t.Fatalf("iter %d: the skeleton batch's plan differs", iter)
		}
	}
}
