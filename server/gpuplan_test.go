package server

import (
	"errors"
	"testing"

	"github.com/shuffled/shuffled/client/columnar"
	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
)

// Which device batches the GPU compression plans take: opaque ones of any
// format, columnar ones of the formats and types gpu.Covers; the others
// go to the CPU path.
func TestGPUPlans(t *testing.T) {
	opaque := &protocol.Batch{Kind: protocol.KindOpaque}
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		if err := gpuPlans(f, opaque); err != nil {
			t.Errorf("%v opaque batch: %v", f, err)
		}
	}
	for _, schema := range synth.Schemas {
		raw, err := synth.Generate(schema, 3, 100, synth.WithNulls(0.1))
		if err != nil {
			t.Fatal(err)
		}
		_, wl := columnar.Layout(raw)
		m := &protocol.Batch{Kind: protocol.KindColumnar, Columnar: wl}
		if err := gpuPlans(partition.SHFC, m); err != nil {
			t.Errorf("%s shfc: %v", schema, err)
		}
		err = gpuPlans(partition.Kudo, m)
		if want := gpu.Covers(partition.Kudo, nil); (err == nil) != (want == nil) {
			t.Errorf("%s kudo: %v, want as gpu.Covers: %v", schema, err, want)
		}
	}
	// Nested and void columns, at every depth.
	fields, err := partition.ParseSchema("k int, a array<struct<x:string,y:array<void>>>, m map<string,array<binary>>, v void")
	if err != nil {
		t.Fatal(err)
	}
	nested := &partition.Batch{Rows: 50}
	for i, f := range fields {
		nested.Columns = append(nested.Columns, synth.Column(f, int64(i), nested.Rows, 0.2))
	}
	_, wl := columnar.Layout(nested)
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		if err := gpuPlans(f, &protocol.Batch{Kind: protocol.KindColumnar, Columnar: wl}); err != nil {
			t.Errorf("%v nested and void columns: %v", f, err)
		}
	}
	bad := &protocol.Batch{Kind: protocol.KindColumnar, Columnar: protocol.ColumnarLayout{Columns: []protocol.Column{{Type: protocol.TypeInt32}, {Type: maxColumnType + 1}}}}
	if err := gpuPlans(partition.SHFC, bad); !errors.Is(err, gpu.ErrNotCovered) {
		t.Errorf("unknown column type: %v, want ErrNotCovered", err)
	}
	bad.Columnar.Columns[1].Type = 0
	if err := gpuPlans(partition.SHFC, bad); !errors.Is(err, gpu.ErrNotCovered) {
		t.Errorf("column type 0: %v, want ErrNotCovered", err)
	}
	if err := gpuPlans(partition.SHFC, &protocol.Batch{Kind: 99}); !errors.Is(err, gpu.ErrNotCovered) {
		t.Errorf("batch kind 99: %v, want ErrNotCovered", err)
	}
}

// checkDecimal, which the GPU path runs before planning, accepts exactly
// what partition.Batch.Validate accepts, for every type.
func TestCheckDecimalAsValidate(t *testing.T) {
	for typ := partition.Bool; typ <= partition.Decimal128; typ++ {
		for _, ps := range [][2]int32{{0, 0}, {1, 0}, {1, 1}, {1, 2}, {9, 0}, {9, 9}, {10, 2}, {18, 4}, {19, 0}, {38, 38}, {39, 0}, {5, -1}, {-1, 0}} {
			b := &partition.Batch{Columns: []partition.Column{{Type: typ, Precision: int8(ps[0]), Scale: int8(ps[1])}}}
			if typ.VarWidth() {
				b.Columns[0].Offsets = []int32{0}
			}
			verr := b.Validate()
			cerr := checkDecimal(typ, ps[0], ps[1])
			if (verr == nil) != (cerr == nil) {
				t.Errorf("%v precision %d scale %d: checkDecimal %v, Validate %v", typ, ps[0], ps[1], cerr, verr)
			}
		}
	}
}

// skeletonOf rebuilds the column trees of a layout, which the columns
// declared at Open are checked against; a layout whose columns end inside
// a tree loses that tree.
func TestSkeletonOf(t *testing.T) {
	fields, err := partition.ParseSchema("k int, a array<struct<x:string,y:array<void>>>, s struct<>, m map<string,array<binary>>, v void")
	if err != nil {
		t.Fatal(err)
	}
	b := &partition.Batch{Rows: 30}
	for i, f := range fields {
		b.Columns = append(b.Columns, synth.Column(f, int64(i), b.Rows, 0.2))
	}
	_, wl := columnar.Layout(b)
	sk := skeletonOf(&wl)
	if err := partition.CheckSchema(sk, fields); err != nil {
		t.Fatal(err)
	}
	if got, want := partition.FormatSchema(partition.SchemaOf(sk)), partition.FormatSchema(fields); got != want {
		t.Errorf("skeleton %s, want %s", got, want)
	}
	wl.Columns = wl.Columns[:3] // k, a, and a's struct without its children
	if sk := skeletonOf(&wl); len(sk.Columns) != 1 || partition.CheckSchema(sk, fields) == nil {
		t.Errorf("truncated layout: %d columns, want 1, and a schema mismatch", len(sk.Columns))
	}
}
