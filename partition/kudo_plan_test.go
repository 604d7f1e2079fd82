package partition

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// A kudo plan's header and pieces, the pieces copied from the batch's
// buffers, are AppendKudo's table byte for byte, for every type, with and
// without nulls, at every begin bit; and the plan of a placeholder batch
// (no bitmap or data bytes) is the same.
func TestAppendKudoPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for iter := range 300 {
		rows := r.IntN(90)
		b := randomBatch(r, rows, iter%2 == 0, 11)
		if iter%7 == 0 {
			b.Columns = nil
		}
		start := r.IntN(rows + 1)
		end := start + r.IntN(rows-start+1)
		want := AppendKudo(nil, b, start, end)
		head, pieces, size := AppendKudoPlan([]byte{0xee}, nil, b, start, end)
		if size != len(want) {
			t.Fatalf("iter %d rows [%d,%d): size %d, want %d", iter, start, end, size, len(want))
		}
		got := append([]byte(nil), head[1:]...)
		for _, p := range pieces {
			if p.Len <= 0 {
				t.Fatalf("iter %d: piece %+v of no bytes", iter, p)
			}
			switch p.Buffer {
			case KudoZeros:
				got = append(got, make([]byte, p.Len)...)
			case KudoValidity:
				got = append(got, b.Columns[p.Column].Validity[p.Off:p.Off+p.Len]...)
			case KudoOffsets:
				got = append(got, int32Bytes(b.Columns[p.Column].Offsets)[p.Off:p.Off+p.Len]...)
			case KudoData:
				got = append(got, b.Columns[p.Column].Data[p.Off:p.Off+p.Len]...)
			default:
				t.Fatalf("iter %d: piece %+v", iter, p)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("iter %d rows [%d,%d) of %d columns: plan makes\n%x\nAppendKudo\n%x", iter, start, end, len(b.Columns), got, want)
		}
		sk := &Batch{Rows: b.Rows, Columns: make([]Column, len(b.Columns))}
		for i, c := range b.Columns {
			sk.Columns[i] = Column{Type: c.Type, Offsets: c.Offsets}
			if c.Validity != nil {
				sk.Columns[i].Validity = []byte{}
			}
		}
		head2, pieces2, size2 := AppendKudoPlan(nil, nil, sk, start, end)
		if !bytes.Equal(head2, head[1:]) || size2 != size || len(pieces2) != len(pieces) {
			t.Fatalf("iter %d: the placeholder batch's plan differs", iter)
		}
		for i := range pieces {
			if pieces[i] != pieces2[i] {
				t.Fatalf("iter %d: piece %d %+v, placeholder's %+v", iter, i, pieces[i], pieces2[i])
			}
		}
	}
}
