package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/gpu/lz4ref"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
)

// testBatch is a partitioned batch laid out in one region as a client
// sends it, with what PlanColumnar takes.
type testBatch struct {
	b      *partition.Batch
	region []byte
	l      Layout
	meta   []ColumnMeta
	host   HostBuffers
	prows  []int64
}

// schemaTestBatch is newNestedTestBatch of nestedRows rows for "nested",
// newTestBatch of rows rows for any other schema.
func schemaTestBatch(t testing.TB, schema string, rows, nestedRows, parts int, nulls float64) *testBatch {
	t.Helper()
	if schema == "nested" {
		return newNestedTestBatch(t, nestedRows, parts, nulls, 1)
	}
	return newTestBatch(t, schema, rows, parts, nulls)
}

func newTestBatch(t testing.TB, schema string, rows, parts int, nulls float64) *testBatch {
	t.Helper()
	raw, err := synth.Generate(schema, 11, rows, synth.WithNulls(nulls))
	if err != nil {
		t.Fatal(err)
	}
	return partitionedTestBatch(t, raw, parts)
}

// partitionedTestBatch partitions raw by its column 0 and lays it out in
// one region as a client would.
func partitionedTestBatch(t testing.TB, raw *partition.Batch, parts int) *testBatch {
	t.Helper()
	b, err := partition.Partition(raw, []int{0}, parts)
	if err != nil {
		t.Fatal(err)
	}
	return laidOutTestBatch(t, b)
}

// laidOutTestBatch lays out b, which is partitioned, in one region as a
// client would.
func laidOutTestBatch(t testing.TB, b *partition.Batch) *testBatch {
	t.Helper()
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	size, wl := columnar.Layout(b)
	tb := &testBatch{b: b, region: make([]byte, size), prows: wl.PartitionRows}
	columnar.Fill(tb.region, b, &wl)
	tb.l, tb.meta, tb.host = fromWire(t, &wl, tb.region)
	return tb
}

// fromWire converts a wire layout, reading the host copies from region
// as ReadHost reads them from device memory.
func fromWire(t testing.TB, wl *protocol.ColumnarLayout, region []byte) (Layout, []ColumnMeta, HostBuffers) {
	t.Helper()
	l := Layout{Rows: int(wl.Rows), Columns: make([]Column, len(wl.Columns))}
	meta := make([]ColumnMeta, len(wl.Columns))
	for i, c := range wl.Columns {
		l.Columns[i] = Column{Type: partition.Type(c.Type), Validity: Range(c.Validity), Offsets: Range(c.Offsets), Data: Range(c.Data), Children: int(c.Children)}
		meta[i] = ColumnMeta{Name: c.Name, Precision: int8(c.Precision), Scale: int8(c.Scale)}
	}
	if err := l.Validate(int64(len(region))); err != nil {
		t.Fatal(err)
	}
	host, _, err := l.ReadHost(func(dst []byte, off int64) error {
		copy(dst, region[off:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, meta, host
}

// The gather program lays out each record exactly as the writer's CPU
// serializer does, in either format: the same row ranges, the same SHFC
// blocks or kudo tables, for every schema (every type under "types"),
// with and without nulls, at the unaligned row starts of 9 partitions and
// with the empty partitions of 300.
func TestPlanColumnarMatchesSerializer(t *testing.T) {
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		for _, schema := range synth.Schemas {
			for _, nulls := range []float64{0, 0.2} {
				for _, parts := range []int{9, 300} {
					for _, rs := range []int{1 << 20, 5000} {
						tb := newTestBatch(t, schema, 2000, parts, nulls)
						name := fmt.Sprintf("%v %s nulls %v partitions %d record size %d", f, schema, nulls, parts, rs)
						checkPlanColumnar(t, name, f, tb, rs)
					}
				}
			}
		}
	}
}

// gathered plans tb's records in format f, of at most 1 MiB, and gathers
// them from its region.
func gathered(t testing.TB, f partition.Format, tb *testBatch) (*CompressPlan, []byte) {
	t.Helper()
	pl, err := PlanColumnar(f, tb.l, tb.meta, tb.host, tb.prows, int64(len(tb.region)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	g := make([]byte, pl.Gathered)
	pl.Gather(g, tb.region)
	return pl, g
}

// checkPlanColumnar checks f's plan of tb against the serializer.
func checkPlanColumnar(t *testing.T, name string, f partition.Format, tb *testBatch, rs int) {
	t.Helper()
	pl, err := PlanColumnar(f, tb.l, tb.meta, tb.host, tb.prows, int64(len(tb.region)), rs)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got := make([]byte, pl.Gathered)
	pl.Gather(got, tb.region)
	var want []Record
	var wantBytes []byte
	for p := range tb.b.NumPartitions() {
		s, e := tb.b.PartitionRows(p)
		if s == e {
			continue
		}
		bounds := []int{s, e}
		if f.Size(tb.b, s, e) > rs {
			bounds = f.Split(tb.b, s, e, rs)
		}
		for k := 1; k < len(bounds); k++ {
			blk := f.Append(nil, tb.b, bounds[k-1], bounds[k])
			want = append(want, Record{Partition: p, Off: int64(len(wantBytes)), Len: int64(len(blk))})
			wantBytes = append(wantBytes, blk...)
		}
	}
	if fmt.Sprint(pl.Records) != fmt.Sprint(want) {
		t.Fatalf("%s: records %v, want %v", name, pl.Records, want)
	}
	if !bytes.Equal(got, wantBytes) {
		t.Fatalf("%s: gathered bytes differ from the serializer's", name)
	}
	if pl.RawBytes != int64(len(wantBytes)) {
		t.Errorf("%s: RawBytes %d, want %d", name, pl.RawBytes, len(wantBytes))
	}
	if err := pl.check(int64(len(tb.region))); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, o := range pl.Ops {
		if out := map[uint8]int64{OpCopy: o.N, OpBits: (o.N + 7) / 8, OpRebase: 4 * o.N}[o.Kind]; out > gatherPiece {
			t.Fatalf("%s: op %+v writes %d bytes, more than %d", name, o, out, gatherPiece)
		}
		if f == partition.Kudo && o.Kind != OpCopy {
			t.Fatalf("%s: op %+v in a kudo plan, want byte copies only", name, o)
		}
	}
}

// A kudo plan of a batch without columns is kudo's row-count-only table
// per non-empty partition; one of large sections cuts its copies into
// pieces and keeps the bytes.
func TestPlanKudoEdges(t *testing.T) {
	tb := newTestBatch(t, "ints", 500, 7, 0)
	tb.b.Columns, tb.l.Columns, tb.meta, tb.host = nil, nil, nil, HostBuffers{Offsets: [][]int32{}}
	checkPlanColumnar(t, "no columns", partition.Kudo, tb, 1<<20)
	big := newTestBatch(t, "strings", 60000, 3, 0.3)
	checkPlanColumnar(t, "large sections", partition.Kudo, big, 64<<20)
	one := newTestBatch(t, "types", 1, 1, 0)
	checkPlanColumnar(t, "one row", partition.Kudo, one, 1<<20)
	pl, err := PlanColumnar(partition.Kudo, one.l, one.meta, one.host, one.prows, int64(len(one.region)), 1)
	if err != nil || len(pl.Records) != 1 {
		t.Fatalf("one row under a 1-byte record size: %v, %d records", err, len(pl.Records))
	}
}

// Gather ops split into pieces keep the bytes: bitmaps, offsets and data
// longer than one piece, at odd row starts.
func TestPlanColumnarLargeSections(t *testing.T) {
	tb := newTestBatch(t, "strings", 8*gatherPiece+5000, 1, 0.3)
	pl, err := PlanColumnar(partition.SHFC, tb.l, tb.meta, tb.host, tb.prows, int64(len(tb.region)), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	split := map[uint8]bool{}
	for i := 1; i < len(pl.Ops); i++ {
		if a, b := pl.Ops[i-1], pl.Ops[i]; a.Kind == b.Kind && !a.FromMeta && a.Src < b.Src && b.Dst-a.Dst == gatherPiece {
			split[a.Kind] = true
		}
	}
	if !split[OpCopy] || !split[OpBits] || !split[OpRebase] {
		t.Fatalf("ops split into pieces: %v, want copies, bitmaps and offsets", split)
	}
	got := make([]byte, pl.Gathered)
	pl.Gather(got, tb.region)
	for _, r := range pl.Records {
		s, e := tb.b.PartitionRows(r.Partition)
		if want := partition.AppendBlock(nil, tb.b, s, e); !bytes.Equal(got[r.Off:r.Off+r.Len], want) {
			t.Fatalf("partition %d differs", r.Partition)
		}
	}
}

func TestPlanColumnarRejects(t *testing.T) {
	tb := newTestBatch(t, "strings", 100, 4, 0)
	size := int64(len(tb.region))
	str := -1
	for i, c := range tb.l.Columns {
		if c.Type.VarWidth() {
			str = i
			break
		}
	}
	clone := func() [][]int32 {
		o := make([][]int32, len(tb.host.Offsets))
		for i := range o {
			o[i] = append([]int32(nil), tb.host.Offsets[i]...)
			if tb.host.Offsets[i] == nil {
				o[i] = nil
			}
		}
		return o
	}
	for _, c := range []struct {
		name  string
		edit  func(o [][]int32, prows []int64)
		rsize int
	}{
		{"decreasing offsets", func(o [][]int32, _ []int64) { o[str][5] = o[str][4] - 1 }, 1 << 20},
		{"offsets past the data", func(o [][]int32, _ []int64) { o[str][100] = 1 << 30 }, 1 << 20},
		{"first offset", func(o [][]int32, _ []int64) { o[str][0] = 1 }, 1 << 20},
		{"short offsets", func(o [][]int32, _ []int64) { o[str] = o[str][:50] }, 1 << 20},
		{"offsets of a fixed-width column", func(o [][]int32, _ []int64) { o[0] = []int32{0} }, 1 << 20},
		{"partition rows decreasing", func(_ [][]int32, p []int64) { p[1], p[2] = 60, 50 }, 1 << 20},
		{"partition rows last", func(_ [][]int32, p []int64) { p[len(p)-1] = 99 }, 1 << 20},
		{"record size", func([][]int32, []int64) {}, 0},
	} {
		for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
			o := clone()
			prows := append([]int64(nil), tb.prows...)
			c.edit(o, prows)
			if _, err := PlanColumnar(f, tb.l, tb.meta, HostBuffers{Offsets: o}, prows, size, c.rsize); !errors.Is(err, ErrInvalid) {
				t.Errorf("%v %s: err = %v, want ErrInvalid", f, c.name, err)
			}
		}
	}
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		if _, err := PlanColumnar(f, tb.l, tb.meta, tb.host, tb.prows, size-64, 1<<20); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v region too small: err = %v, want ErrInvalid", f, err)
		}
	}
	if _, err := PlanColumnar(partition.Format(7), tb.l, tb.meta, tb.host, tb.prows, size, 1<<20); !errors.Is(err, ErrNotCovered) {
		t.Errorf("format 7: err = %v, want ErrNotCovered", err)
	}
}

func TestPlanOpaque(t *testing.T) {
	pl, err := PlanOpaque([]int64{0, 0, 10, 10, 35}, 35, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{{1, 0, 10}, {3, 10, 10}, {3, 20, 10}, {3, 30, 5}}
	if fmt.Sprint(pl.Records) != fmt.Sprint(want) || pl.RawBytes != 35 || pl.Gathered != 0 {
		t.Errorf("records %v raw %d gathered %d, want %v 35 0", pl.Records, pl.RawBytes, pl.Gathered, want)
	}
	for _, offs := range [][]int64{{0, 5, 4, 35}, {1, 35}, {0, 34}, {0}} {
		if _, err := PlanOpaque(offs, 35, 10); !errors.Is(err, ErrInvalid) {
			t.Errorf("offsets %v: err = %v, want ErrInvalid", offs, err)
		}
	}
}

// The jobs frame each record as lz4ref.AppendStream does: blocks of the
// block size, then an end mark, slots that never overlap.
func TestJobs(t *testing.T) {
	pl := &CompressPlan{Records: []Record{{0, 0, 100000}, {1, 100000, 1}, {2, 100001, 65536}}}
	jobs, first, scratch := pl.jobs(32 << 10)
	if fmt.Sprint(first) != fmt.Sprint([]int{0, 5, 7, 10}) {
		t.Fatalf("first = %v", first)
	}
	var end int64
	for i, j := range jobs {
		if j.slot < end || j.slot%16 != 0 {
			t.Fatalf("job %d slot %d overlaps %d or is unaligned", i, j.slot, end)
		}
		end = j.slot + lz4ref.HeaderLen + int64(j.len)
	}
	if end > scratch || jobs[4].len != 0 || jobs[3].len != 100000-3*32768 || jobs[3].src != 3*32768 {
		t.Errorf("jobs %+v scratch %d", jobs, scratch)
	}
}

// The reference streams of a plan decode to the records' bytes, which
// decode as SHFC blocks or kudo tables.
func TestPlanStreamsDecode(t *testing.T) {
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		for _, schema := range []string{"lineitem", "types"} {
			tb := newTestBatch(t, schema, 3000, 5, 0.1)
			pl, g := gathered(t, f, tb)
			for i, s := range pl.Streams(g, codec.DefaultBlockSize) {
				r := pl.Records[i]
				got, err := codec.Decode(codec.LZ4, nil, s)
				if err != nil || !bytes.Equal(got, g[r.Off:r.Off+r.Len]) {
					t.Fatalf("%v %s record %d: %v", f, schema, i, err)
				}
				if f == partition.Kudo {
					_, err = partition.DecodeKudo(got, partition.SchemaOf(tb.b))
				} else {
					_, _, err = partition.DecodeBlock(got)
				}
				if err != nil {
					t.Fatalf("%v %s record %d: decode: %v", f, schema, i, err)
				}
			}
		}
	}
}

// check refuses records and gather ops outside their buffers, and passes
// the plans PlanOpaque and PlanColumnar make.
func TestPlanCheck(t *testing.T) {
	tb := newTestBatch(t, "wide", 500, 3, 0.2)
	pl, err := PlanColumnar(partition.SHFC, tb.l, tb.meta, tb.host, tb.prows, int64(len(tb.region)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.check(int64(len(tb.region))); err != nil {
		t.Errorf("PlanColumnar's plan: %v", err)
	}
	op, err := PlanOpaque([]int64{0, 4, 10}, 10, 3)
	if err != nil || op.check(10) != nil {
		t.Errorf("PlanOpaque's plan: %v, %v", err, op.check(10))
	}
	for _, c := range []struct {
		name string
		pl   CompressPlan
		size int64
	}{
		{"record past the region", CompressPlan{Records: []Record{{0, 5, 6}}}, 10},
		{"negative record", CompressPlan{Records: []Record{{0, -1, 2}}}, 10},
		{"record past the gathered buffer", CompressPlan{Gathered: 8, Records: []Record{{0, 0, 9}}}, 100},
		{"copy past the region", CompressPlan{Gathered: 8, Ops: []GatherOp{{Kind: OpCopy, N: 8, Src: 5}}}, 10},
		{"copy past the gathered buffer", CompressPlan{Gathered: 8, Ops: []GatherOp{{Kind: OpCopy, N: 8, Dst: 1}}}, 10},
		{"copy past the meta", CompressPlan{Gathered: 8, Meta: make([]byte, 4), Ops: []GatherOp{{Kind: OpCopy, FromMeta: true, N: 5}}}, 10},
		{"bits past the region", CompressPlan{Gathered: 8, Ops: []GatherOp{{Kind: OpBits, N: 9, Shift: 7, Src: 9}}}, 10},
		{"rebase past the region", CompressPlan{Gathered: 64, Ops: []GatherOp{{Kind: OpRebase, N: 3, Src: 0}}}, 11},
		{"unknown kind", CompressPlan{Gathered: 8, Ops: []GatherOp{{Kind: 3, N: 1}}}, 10},
		{"shift", CompressPlan{Gathered: 8, Ops: []GatherOp{{Kind: OpBits, N: 1, Shift: 8}}}, 10},
	} {
		if err := c.pl.check(c.size); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: check = %v, want ErrInvalid", c.name, err)
		}
	}
}

// BenchmarkPlanColumnar is the host's share of a columnar device batch:
// the plan of a load generator batch (lineitem, 100,000 rows, 200
// partitions), the job list included.
func BenchmarkPlanColumnar(b *testing.B) {
	tb := newTestBatch(b, "lineitem", 100_000, 200, 0)
	b.SetBytes(int64(len(tb.region)))
	for b.Loop() {
		pl, err := PlanColumnar(partition.SHFC, tb.l, tb.meta, tb.host, tb.prows, int64(len(tb.region)), 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		pl.jobs(32 << 10)
	}
}

// Covers takes every type of package partition, nested and void
// included, in both formats, and names what it refuses.
func TestCovers(t *testing.T) {
	var all []partition.Type
	for typ := partition.Bool; typ.Valid(); typ++ {
		all = append(all, typ)
	}
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		if err := Covers(f, all); err != nil {
			t.Errorf("%v, every type: %v", f, err)
		}
	}
	if err := Covers(partition.SHFC, []partition.Type{partition.Int32, 0}); !errors.Is(err, ErrNotCovered) {
		t.Errorf("type 0: %v, want ErrNotCovered", err)
	}
	if err := Covers(partition.SHFC, []partition.Type{partition.Void + 1}); !errors.Is(err, ErrNotCovered) {
		t.Errorf("type %d: %v, want ErrNotCovered", partition.Void+1, err)
	}
	if err := Covers(partition.Format(7), nil); !errors.Is(err, ErrNotCovered) {
		t.Errorf("format 7: %v, want ErrNotCovered", err)
	}
}

// The plans lay out the ANSI interval columns (int32 months, int64
// microseconds) as the serializer does, with and without nulls, in both
// formats.
func TestPlanColumnarIntervals(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	const rows = 1500
	ym := partition.Column{Name: "ym", Type: partition.YearMonthInterval, Data: make([]byte, 4*rows)}
	dt := partition.Column{Name: "dt", Type: partition.DayTimeInterval, Data: make([]byte, 8*rows), Validity: make([]byte, (rows+7)/8)}
	key := partition.Column{Name: "k", Type: partition.Int64, Data: make([]byte, 8*rows)}
	for _, c := range []*partition.Column{&ym, &dt, &key} {
		for i := range c.Data {
			c.Data[i] = byte(r.Uint32())
		}
	}
	for i := range dt.Validity {
		dt.Validity[i] = byte(r.Uint32())
	}
	tb := partitionedTestBatch(t, &partition.Batch{Rows: rows, Columns: []partition.Column{key, ym, dt}}, 9)
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		checkPlanColumnar(t, fmt.Sprintf("%v intervals", f), f, tb, 3000)
	}
}
