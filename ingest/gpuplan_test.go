package ingest

import (
	"errors"
	"testing"

	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
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
	bad := &protocol.Batch{Kind: protocol.KindColumnar, Columnar: protocol.ColumnarLayout{Columns: []protocol.Column{{Type: protocol.TypeInt32}, {Type: columnar.MaxType + 1}}}}
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
