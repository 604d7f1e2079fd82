package columnar

import (
	"testing"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

// Skeleton rebuilds the column trees of a layout, which the columns
// declared at Open are checked against; a layout whose columns end inside
// a tree loses that tree.
func TestSkeleton(t *testing.T) {
	fields, err := partition.ParseSchema("k int, a array<struct<x:string,y:array<void>>>, s struct<>, m map<string,array<binary>>, v void")
	if err != nil {
		t.Fatal(err)
	}
	b := &partition.Batch{Rows: 30}
	for i, f := range fields {
		b.Columns = append(b.Columns, synth.Column(f, int64(i), b.Rows, 0.2))
	}
	_, wl := Layout(b)
	sk := Skeleton(&wl)
	if err := partition.CheckSchema(sk, fields); err != nil {
		t.Fatal(err)
	}
	if got, want := partition.FormatSchema(partition.SchemaOf(sk)), partition.FormatSchema(fields); got != want {
		t.Errorf("skeleton %s, want %s", got, want)
	}
	wl.Columns = wl.Columns[:3] // k, a, and a's struct without its children
	if sk := Skeleton(&wl); len(sk.Columns) != 1 || partition.CheckSchema(sk, fields) == nil {
		t.Errorf("truncated layout: %d columns, want 1, and a schema mismatch", len(sk.Columns))
	}
}
