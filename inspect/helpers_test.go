package inspect

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/writer"
)

var testID = shufflefile.ID{Shuffle: 3, Map: 17}

// output describes a map output a test wrote.
type output struct {
	src    Source
	res    writer.Result
	counts []int64 // rows per partition, over every batch
	total  int64
}

// newEngine returns a writer engine with small records, so that partitions
// hold several blocks, closed when the test ends.
func newEngine(t testing.TB) *writer.Engine {
	t.Helper()
	e, err := writer.New(writer.WithRecordSize(8<<10), writer.WithWorkers(2), writer.WithSync(false))
	if err != nil {
		t.Fatalf("writer.New: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("engine Close: %v", err)
		}
	})
	return e
}

// writeBatches commits batches (each partitioned into n partitions) as one
// map output with the writer engine.
func writeBatches(t testing.TB, l shufflefile.Layout, k codec.Kind, alg checksum.Algorithm, n int, batches ...*partition.Batch) output {
	t.Helper()
	ctx := context.Background()
	w, err := newEngine(t).Open(ctx, writer.Spec{ID: testID, NumPartitions: n, Codec: k, Checksum: alg, Layout: l})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	o := output{src: Source{Layout: l, ID: testID}, counts: make([]int64, n)}
	for _, b := range batches {
		if err := w.WriteBatch(ctx, b, nil); err != nil {
			t.Fatalf("WriteBatch: %v", err)
		}
		for p := range n {
			start, end := b.PartitionRows(p)
			o.counts[p] += int64(end - start)
			o.total += int64(end - start)
		}
	}
	if o.res, err = w.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return o
}

// lineitem returns a lineitem-like batch of rows rows with some nulls,
// hash partitioned into n partitions.
func lineitem(t testing.TB, seed int64, rows, n int) *partition.Batch {
	t.Helper()
	raw, err := synth.Generate("lineitem", seed, rows, synth.WithNulls(0.1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := partition.Partition(raw, []int{0}, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeLineitem commits two lineitem batches (two runs, merged) into dir.
func writeLineitem(t testing.TB, l shufflefile.Layout, k codec.Kind, alg checksum.Algorithm) output {
	t.Helper()
	const n = 11
	return writeBatches(t, l, k, alg, n, lineitem(t, 1, 1500, n), lineitem(t, 2, 1000, n))
}

// largestPartition returns the partition with the most bytes on disk.
func largestPartition(lengths []int64) int {
	best := 0
	for p, n := range lengths {
		if n > lengths[best] {
			best = p
		}
	}
	return best
}

// flipByte inverts every bit of the byte at off in the file at path.
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// column builders for hand-made batches; a nil entry in valid means no
// validity bitmap.

func validity(nulls []bool) []byte {
	if nulls == nil {
		return nil
	}
	v := make([]byte, (len(nulls)+7)/8)
	for i, null := range nulls {
		if !null {
			v[i/8] |= 1 << (i % 8)
		}
	}
	return v
}

func fixedColumn(name string, t partition.Type, vals []uint64, nulls []bool) partition.Column {
	w := t.Width()
	data := make([]byte, len(vals)*w)
	for i, v := range vals {
		switch w {
		case 1:
			data[i] = byte(v)
		case 2:
			binary.LittleEndian.PutUint16(data[2*i:], uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(data[4*i:], uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(data[8*i:], v)
		}
	}
	return partition.Column{Name: name, Type: t, Data: data, Validity: validity(nulls)}
}

func varColumn(name string, t partition.Type, vals []string, nulls []bool) partition.Column {
	c := partition.Column{Name: name, Type: t, Offsets: []int32{0}, Validity: validity(nulls)}
	for _, v := range vals {
		c.Data = append(c.Data, v...)
		c.Offsets = append(c.Offsets, int32(len(c.Data)))
	}
	return c
}

func i64s(vs ...int64) []uint64 {
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = uint64(v)
	}
	return out
}

func f32s(vs ...float32) []uint64 {
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = uint64(math.Float32bits(v))
	}
	return out
}

func f64s(vs ...float64) []uint64 {
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = math.Float64bits(v)
	}
	return out
}

// everyType returns a 6-row batch with one column of every type (and one
// unnamed column), nulls, empty and awkward strings and the edge values of
// each type, partitioned 2 / 0 / 4 rows.
func everyType() *partition.Batch {
	nulls := func(rows ...int) []bool {
		n := make([]bool, 6)
		for _, r := range rows {
			n[r] = true
		}
		return n
	}
	inf := math.Inf(1)
	cols := []partition.Column{
		fixedColumn("flag", partition.Bool, i64s(1, 0, 1, 0, 1, 0), nulls(2)),
		fixedColumn("tiny", partition.Int8, i64s(-128, 127, 0, 1, -1, 5), nulls(3)),
		fixedColumn("small", partition.Int16, i64s(-32768, 32767, 0, 7, -7, 9), nil),
		fixedColumn("int", partition.Int32, i64s(math.MinInt32, math.MaxInt32, 0, 1, -1, 42), nulls(0)),
		fixedColumn("big", partition.Int64, i64s(math.MinInt64, math.MaxInt64, 0, 1<<53+1, -1, 3), nulls(5)),
		fixedColumn("f32", partition.Float32, f32s(float32(math.NaN()), float32(inf), float32(math.Copysign(0, -1)), 1.5, 1e-7, 3.4e38), nulls(4)),
		fixedColumn("f64", partition.Float64, f64s(-inf, 1e300, 0.1, math.NaN(), 5e-324, -2.5), nil),
		fixedColumn("day", partition.Date32, i64s(0, -1, 19000, 2932896, -719162, 1), nulls(1)),
		fixedColumn("ts", partition.TimestampMicros, i64s(0, -1, 1700000000123456, 253402300799999999, -62135596800000000, 1), nulls(2, 3)),
		varColumn("s", partition.String, []string{"a,b", "", "", "quote\"and\nnew line", " padded ", "héllo\x01"}, nulls(2)),
		varColumn("bin", partition.Binary, []string{"\x00\x01\xff", "", "x", "", "\n", "zz"}, nulls(3)),
		varColumn("", partition.String, []string{"u0", "u1", "u2", "u3", "u4", "u5"}, nil),
	}
	dec := fixedColumn("price", partition.Decimal64, i64s(12345, -5, 0, 100, -999999999999999999, 1), nulls(3))
	dec.Precision, dec.Scale = 18, 2
	cols = append(cols[:10], append([]partition.Column{dec}, cols[10:]...)...)
	return &partition.Batch{Columns: cols, Rows: 6, PartitionOffsets: []int32{0, 2, 2, 6}}
}
