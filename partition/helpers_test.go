package partition

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
)

// allTypes lists every column type once.
var allTypes = []Type{Bool, Int8, Int16, Int32, Int64, Float32, Float64, Date32,
	TimestampMicros, Decimal64, String, Binary, Decimal32, Decimal128}

// randomBatch returns a valid, unpartitioned batch of rows rows with one
// column of every type. With nulls, every other column has a validity
// bitmap with about a third of its rows null (and with garbage bits past
// the last row). Strings are 0 to maxLen bytes, a quarter of them empty.
func randomBatch(r *rand.Rand, rows int, nulls bool, maxLen int) *Batch {
	b := &Batch{Rows: rows}
	for ci, t := range allTypes {
		c := Column{Name: fmt.Sprintf("c%d_%v", ci, t), Type: t}
		switch t {
		case Decimal32:
			c.Precision, c.Scale = 7, 2
		case Decimal64:
			c.Precision, c.Scale = 12, 3
		case Decimal128:
			c.Precision, c.Scale = 30, 5
		}
		if t.VarWidth() {
			c.Offsets = make([]int32, 1, rows+1)
			for range rows {
				n := 0
				if r.IntN(4) != 0 && maxLen > 0 {
					n = r.IntN(maxLen + 1)
				}
				for range n {
					c.Data = append(c.Data, byte('a'+r.IntN(26)))
				}
				c.Offsets = append(c.Offsets, int32(len(c.Data)))
			}
		} else {
			c.Data = make([]byte, rows*t.Width())
			for i := range c.Data {
				c.Data[i] = byte(r.Uint32())
			}
			if t == Bool {
				for i := range c.Data {
					c.Data[i] &= 1
				}
			}
		}
		if nulls && ci%2 == 0 {
			c.Validity = make([]byte, (rows+7)/8)
			for i := range c.Validity {
				c.Validity[i] = byte(r.Uint32())
			}
			for i := range rows {
				if r.IntN(3) != 0 {
					c.Validity[i>>3] |= 1 << (i & 7)
				} else {
					c.Validity[i>>3] &^= 1 << (i & 7)
				}
			}
		}
		b.Columns = append(b.Columns, c)
	}
	return b
}

// rowText renders row i of b, nulls as NULL, for comparing rows across
// batches.
func rowText(b *Batch, i int) string {
	var sb strings.Builder
	for ci := range b.Columns {
		c := &b.Columns[ci]
		if ci > 0 {
			sb.WriteByte('|')
		}
		if c.IsNull(i) {
			sb.WriteString("NULL")
			continue
		}
		sb.Write(c.AppendText(nil, i))
	}
	return sb.String()
}

// sameRows reports the first difference between rows [start, end) of a
// and all rows of b: schema, row count, values and nulls. Values under a
// null are not compared.
func sameRows(a *Batch, start, end int, b *Batch) error {
	if len(a.Columns) != len(b.Columns) {
		return fmt.Errorf("%d columns, want %d", len(b.Columns), len(a.Columns))
	}
	if b.Rows != end-start {
		return fmt.Errorf("%d rows, want %d", b.Rows, end-start)
	}
	for ci := range a.Columns {
		ca, cb := &a.Columns[ci], &b.Columns[ci]
		if ca.Name != cb.Name || ca.Type != cb.Type || ca.Precision != cb.Precision || ca.Scale != cb.Scale {
			return fmt.Errorf("column %d is %q %v(%d,%d), want %q %v(%d,%d)", ci,
				cb.Name, cb.Type, cb.Precision, cb.Scale, ca.Name, ca.Type, ca.Precision, ca.Scale)
		}
		if (ca.Validity == nil) != (cb.Validity == nil) {
			return fmt.Errorf("column %d: has validity %v, want %v", ci, cb.Validity != nil, ca.Validity != nil)
		}
		for i := range b.Rows {
			na, nb := ca.IsNull(start+i), cb.IsNull(i)
			if na != nb {
				return fmt.Errorf("column %d row %d: null %v, want %v", ci, i, nb, na)
			}
			if na {
				continue
			}
			if va, vb := ca.AppendText(nil, start+i), cb.AppendText(nil, i); !bytes.Equal(va, vb) {
				return fmt.Errorf("column %d row %d: %q, want %q", ci, i, vb, va)
			}
		}
	}
	return nil
}
