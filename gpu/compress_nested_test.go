package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

// nestedSchema has every shape of nested column: a list of structs, a map
// of lists, a struct of lists (and void), lists three deep, a list of
// strings, binary at depth, and a void column.
const nestedSchema = "k bigint, a array<struct<d:decimal(7,2),e:decimal(30,3),f:string>>, m map<string,array<binary>>, " +
	"s struct<b:boolean,l:array<int>,v:void,i:interval day to second>, x array<array<array<int>>>, " +
	"e array<string>, n void, y map<int,struct<p:array<smallint>,q:tinyint>>"

// newNestedTestBatch returns rows rows of nestedSchema (nulls at every
// other column at every depth when nulls > 0, about 1 in 4 lists empty),
// partitioned into parts by column k.
func newNestedTestBatch(t testing.TB, rows, parts int, nulls float64, seed int64) *testBatch {
	t.Helper()
	fields, err := partition.ParseSchema(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	raw := &partition.Batch{Rows: rows}
	for i, f := range fields {
		raw.Columns = append(raw.Columns, synth.Column(f, seed+int64(i), rows, nulls))
	}
	return partitionedTestBatch(t, raw, parts)
}

// The plans lay out nested and void columns exactly as the CPU
// serializer does, in both formats: every column at every depth cut at
// the rows its parents reach (children's slices starting mid-byte), with
// and without nulls at every level, with empty lists, empty partitions
// and records split by the record size.
func TestPlanColumnarNested(t *testing.T) {
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		for _, nulls := range []float64{0, 0.3} {
			for _, parts := range []int{1, 9, 300} {
				for _, rs := range []int{1 << 20, 3000} {
					tb := newNestedTestBatch(t, 1500, parts, nulls, int64(parts))
					name := fmt.Sprintf("%v nested nulls %v partitions %d record size %d", f, nulls, parts, rs)
					checkPlanColumnar(t, name, f, tb, rs)
				}
			}
		}
	}
}

// The records of a nested plan decode, in either format, to the rows of
// their partition, values and nulls at every level.
func TestPlanNestedDecode(t *testing.T) {
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		tb := newNestedTestBatch(t, 2000, 7, 0.2, 3)
		pl, g := gathered(t, f, tb)
		for i, s := range pl.Streams(g, codec.DefaultBlockSize) {
			r := pl.Records[i]
			raw, err := codec.Decode(codec.LZ4, nil, s)
			if err != nil {
				t.Fatal(err)
			}
			var got *partition.Batch
			if f == partition.Kudo {
				tab, err := partition.DecodeKudo(raw, partition.SchemaOf(tb.b))
				if err != nil {
					t.Fatalf("%v record %d: %v", f, i, err)
				}
				got = tab.Batch
			} else if got, _, err = partition.DecodeBlock(raw); err != nil {
				t.Fatalf("%v record %d: %v", f, i, err)
			}
			lo, hi := tb.b.PartitionRows(r.Partition)
			if got.Rows != hi-lo {
				t.Fatalf("%v record %d: %d rows, want %d", f, i, got.Rows, hi-lo)
			}
			for k := range got.Rows {
				for c := range got.Columns {
					gc, wc := &got.Columns[c], &tb.b.Columns[c]
					if gc.IsNull(k) != wc.IsNull(lo+k) {
						t.Fatalf("%v record %d row %d column %d: null %v, want %v", f, i, k, c, gc.IsNull(k), wc.IsNull(lo+k))
					}
					if a, b := gc.AppendText(nil, k), wc.AppendText(nil, lo+k); !bytes.Equal(a, b) {
						t.Fatalf("%v record %d row %d column %d: %s, want %s", f, i, k, c, a, b)
					}
				}
			}
		}
	}
}

// A list's child may hold more rows than its parent's offsets reach (the
// excess ignored), and a batch may be only void and nested columns: the
// plans still lay out what the serializer does.
func TestPlanColumnarNestedEdges(t *testing.T) {
	const rows = 21
	list := partition.Column{Name: "l", Type: partition.List, Offsets: make([]int32, rows+1), Validity: make([]byte, 3)}
	for i := range rows {
		list.Offsets[i+1] = list.Offsets[i] + int32(i%3)
		if i%4 != 1 {
			list.Validity[i/8] |= 1 << (i % 8)
		}
	}
	n := int(list.Offsets[rows]) + 13 // rows past the last offset
	elem := partition.Column{Type: partition.Int16, Data: make([]byte, 2*n), Validity: make([]byte, (n+7)/8)}
	for i := range elem.Data {
		elem.Data[i] = byte(3*i + 1)
	}
	for i := range elem.Validity {
		elem.Validity[i] = 0xb5
	}
	list.Children = []partition.Column{elem}
	void := partition.Column{Name: "v", Type: partition.Void, Data: make([]byte, rows), Validity: []byte{0, 0, 0xe0}} // bits past the rows set
	empty := partition.Column{Name: "s", Type: partition.Struct, Children: []partition.Column{}}
	b := &partition.Batch{Rows: rows, Columns: []partition.Column{list, void, empty}, PartitionOffsets: []int32{0, 3, 3, 11, 12, 21}}
	tb := laidOutTestBatch(t, b)
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		for _, rs := range []int{1 << 20, 100} {
			checkPlanColumnar(t, fmt.Sprintf("%v edges record size %d", f, rs), f, tb, rs)
		}
	}
}

// PlanColumnar and ReadHost refuse what partition.Batch.Validate refuses
// of nested and void columns: a valid row in a void column, a list's
// offsets that reach past its child's buffers or decrease, and column
// trees that do not hold together.
func TestPlanColumnarNestedRejects(t *testing.T) {
	tb := newNestedTestBatch(t, 200, 4, 0.3, 5)
	size := int64(len(tb.region))
	first := func(typ partition.Type) int {
		for i, c := range tb.l.Columns {
			if c.Type == typ {
				return i
			}
		}
		t.Fatalf("no %v column", typ)
		return -1
	}
	list, void, mp := first(partition.List), first(partition.Void), first(partition.Map)
	read := func(region []byte) func([]byte, int64) error {
		return func(dst []byte, off int64) error { copy(dst, region[off:]); return nil }
	}
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		// A valid row in a void column.
		h := tb.host
		h.Validity = append([][]byte(nil), tb.host.Validity...)
		h.Validity[void] = append([]byte(nil), h.Validity[void]...)
		h.Validity[void][3] |= 0x10
		if _, err := PlanColumnar(f, tb.l, tb.meta, h, tb.prows, size, 1<<20); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v valid void row: err = %v, want ErrInvalid", f, err)
		}
		h.Validity = nil
		if _, err := PlanColumnar(f, tb.l, tb.meta, h, tb.prows, size, 1<<20); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v void without a host bitmap: err = %v, want ErrInvalid", f, err)
		}
		// A list's offsets that reach past its child's buffers, or
		// decrease.
		for name, edit := range map[string]func(o []int32){
			"past the child": func(o []int32) { o[len(o)-1] += 1 << 20 },
			"decreasing":     func(o []int32) { o[2] = o[1] - 1 },
			"first":          func(o []int32) { o[0] = 1 },
		} {
			h := tb.host
			h.Offsets = append([][]int32(nil), tb.host.Offsets...)
			h.Offsets[list] = append([]int32(nil), h.Offsets[list]...)
			edit(h.Offsets[list])
			if _, err := PlanColumnar(f, tb.l, tb.meta, h, tb.prows, size, 1<<20); !errors.Is(err, ErrInvalid) {
				t.Errorf("%v list offsets %s: err = %v, want ErrInvalid", f, name, err)
			}
		}
	}
	// The same offsets in the region: ReadHost refuses them.
	region := append([]byte(nil), tb.region...)
	lo := tb.l.Columns[list].Offsets
	region[lo.Offset+lo.Length-1] = 0x7f
	if _, _, err := tb.l.ReadHost(read(region)); !errors.Is(err, ErrInvalid) {
		t.Errorf("ReadHost of a list reaching past its child: err = %v, want ErrInvalid", err)
	}
	// Trees that do not hold together.
	for name, edit := range map[string]func(l *Layout){
		"list of two children":  func(l *Layout) { l.Columns[list].Children = 2 },
		"map of a list":         func(l *Layout) { l.Columns[mp+1].Type = partition.List },
		"int with a child":      func(l *Layout) { l.Columns[0].Children = 1 },
		"columns end in a tree": func(l *Layout) { l.Columns = l.Columns[:list+1] },
		"data on a list":        func(l *Layout) { l.Columns[list].Data = Range{0, 8} },
		"offsets on a struct":   func(l *Layout) { l.Columns[mp+1].Offsets = Range{0, 8} },
	} {
		l := tb.l
		l.Columns = append([]Column(nil), tb.l.Columns...)
		edit(&l)
		if err := l.Validate(size); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
	// Too deep.
	deep := Layout{Rows: 0}
	for range partition.MaxNestingDepth + 1 {
		deep.Columns = append(deep.Columns, Column{Type: partition.List, Children: 1})
	}
	deep.Columns = append(deep.Columns, Column{Type: partition.Int32})
	if err := deep.Validate(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("nested %d deep: Validate = %v, want ErrInvalid", partition.MaxNestingDepth+1, err)
	}
}

// ReadHost copies what the plans need and nothing more: each offset
// buffer with rows, for the rows its column has, and void bitmaps.
func TestReadHost(t *testing.T) {
	tb := newNestedTestBatch(t, 300, 3, 0.3, 9)
	var want int64
	for i, c := range tb.l.Columns {
		if c.Type.HasOffsets() != (tb.host.Offsets[i] != nil) && c.Offsets.Length > 0 {
			t.Errorf("column %d %v: offsets copied %v", i, c.Type, tb.host.Offsets[i] != nil)
		}
		if (c.Type == partition.Void) != (tb.host.Validity[i] != nil) {
			t.Errorf("column %d %v: bitmap copied %v", i, c.Type, tb.host.Validity[i] != nil)
		}
		want += 4*int64(len(tb.host.Offsets[i])) + int64(len(tb.host.Validity[i]))
		if c.Offsets.Length > 0 && int64(4*len(tb.host.Offsets[i])) != c.Offsets.Length {
			t.Errorf("column %d: %d offsets copied of a buffer of %d bytes", i, len(tb.host.Offsets[i]), c.Offsets.Length)
		}
	}
	var reads int64
	_, copied, err := tb.l.ReadHost(func(dst []byte, off int64) error {
		reads += int64(len(dst))
		copy(dst, tb.region[off:])
		return nil
	})
	if err != nil || copied != want || reads != want {
		t.Errorf("ReadHost = %d bytes copied, %d read, %v; want %d", copied, reads, err, want)
	}
	boom := errors.New("copy failed")
	if _, _, err := tb.l.ReadHost(func([]byte, int64) error { return boom }); !errors.Is(err, boom) || errors.Is(err, ErrInvalid) {
		t.Errorf("ReadHost with a failing copy: %v, want the copy's error", err)
	}
}

// levelCopier is a hostCopier that copies from region and records the
// columns each round of copies reads.
type levelCopier struct {
	region []byte
	rounds [][]int64 // the offsets copied from, per round
}

func (c *levelCopier) buf(n int) ([]byte, error) { return heapCopier(nil).buf(n) }

func (c *levelCopier) copy(cs []hostCopy) error {
	var round []int64
	for _, h := range cs {
		copy(h.dst, c.region[h.off:])
		round = append(round, h.off)
	}
	c.rounds = append(c.rounds, round)
	return nil
}

// readHost copies a level of the column trees at a time, all of it at
// once: a flat batch in one round, the nested schema in one round per
// level of lists and maps that has offsets or bitmaps to read (x's lists
// three deep: three; the ints below them need none), each buffer once,
// and the same copies as ReadHost one by one.
func TestReadHostLevels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tb     *testBatch
		rounds int
	}{
		{"strings", newTestBatch(t, "strings", 500, 4, 0.2), 1},
		{"nested", newNestedTestBatch(t, 500, 4, 0.2, 2), 3},
	} {
		c := &levelCopier{region: tc.tb.region}
		h, n, err := tc.tb.l.readHost(c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, want, _ := tc.tb.l.ReadHost(func(dst []byte, off int64) error {
			copy(dst, tc.tb.region[off:])
			return nil
		})
		if n != want || !reflect.DeepEqual(h, tc.tb.host) {
			t.Errorf("%s: readHost by levels = %d bytes, want %d, copies equal %v", tc.name, n, want, reflect.DeepEqual(h, tc.tb.host))
		}
		if len(c.rounds) != tc.rounds {
			t.Errorf("%s: %d rounds of copies, want %d", tc.name, len(c.rounds), tc.rounds)
		}
		seen := map[int64]bool{}
		for _, r := range c.rounds {
			for _, off := range r {
				if seen[off] {
					t.Errorf("%s: buffer at %d copied twice", tc.name, off)
				}
				seen[off] = true
			}
		}
	}
}
