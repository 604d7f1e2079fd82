package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// TestKudoRoundTrip writes kudo map outputs through the socket, one column
// of every type (nulls in all but the key), every codec, one run and
// several (batches whose partitions go backwards), over memfd; every
// partition must decode, table by table, to exactly the rows
// that were sent, in order, and every table must have the alignment
// spark-rapids' reader relies on.
func TestKudoRoundTrip(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	const parts = 7
	var batches []*partition.Batch
	for seed := range int64(3) {
		raw, err := synth.Generate("types", seed, 900+int(seed)*50, synth.WithNulls(0.15))
		if err != nil {
			t.Fatal(err)
		}
		b, err := partition.Partition(raw, []int{0, 12, 13}, parts)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	schema := partition.SchemaOf(batches[0])
	c := dial(t, d, "app", client.WithDataPlane(client.PlaneMemfd))
	mapID := int64(0)
	for _, k := range []codec.Kind{codec.LZ4, codec.Zstd, codec.Snappy, codec.None} {
		for _, runs := range []int{1, len(batches)} {
			t.Run(fmt.Sprintf("%v/%d runs", k, runs), func(t *testing.T) {
				mapID++
				mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 4, MapID: mapID, NumPartitions: parts,
					Kind: protocol.KindColumnar, Format: protocol.FormatKudo, Codec: k.String(),
					Schema: columnar.SparkSchema(batches[0])})
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range batches[:runs] {
					payload, layout := columnar.Append(nil, b)
					if err := mo.WriteColumnar(ctx, payload, layout); err != nil {
						t.Fatalf("WriteColumnar: %v", err)
					}
				}
				res, err := mo.Commit(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if int(res.Runs) != runs {
					t.Errorf("%d runs, want %d", res.Runs, runs)
				}
				got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "app", "1")), shufflefile.ID{Shuffle: 4, Map: mapID}, k)
				for p := range parts {
					tabs, err := partition.DecodeKudoTables(got[p], schema)
					if err != nil {
						t.Fatalf("partition %d: %v", p, err)
					}
					checkTables(t, got[p], tabs)
					// The tables' rows, in order, are the partition's rows of
					// each batch in turn.
					i := 0
					for _, b := range batches[:runs] {
						start, end := b.PartitionRows(p)
						for r := start; r < end; {
							if i >= len(tabs) {
								t.Fatalf("partition %d: %d tables, rows of batch left", p, len(tabs))
							}
							tab := tabs[i]
							if tab.RowOffset != r || r+tab.Rows > end {
								t.Fatalf("partition %d table %d: rows [%d,+%d), want from %d to at most %d", p, i, tab.RowOffset, tab.Rows, r, end)
							}
							sameRowsAs(t, tab.Batch, b, r)
							r += tab.Rows
							i++
						}
					}
					if i != len(tabs) {
						t.Fatalf("partition %d: %d tables, want %d", p, len(tabs), i)
					}
				}
			})
		}
	}
}

// checkTables asserts each table's alignment: header + validity section
// and the table length multiples of 4, the tables back to back.
func checkTables(t *testing.T, data []byte, tabs []*partition.KudoTable) {
	t.Helper()
	off := 0
	for i, tab := range tabs {
		h := 28 + (tab.Columns+7)/8
		v := int(binary.BigEndian.Uint32(data[off+12:]))
		o := int(binary.BigEndian.Uint32(data[off+16:]))
		if (h+v)%4 != 0 || o%4 != 0 || tab.Size%4 != 0 || off%4 != 0 {
			t.Fatalf("table %d at %d: header %d + V' %d, O' %d, size %d: misaligned", i, off, h, v, o, tab.Size)
		}
		off += tab.Size
	}
	if off != len(data) {
		t.Fatalf("tables end at %d of %d bytes", off, len(data))
	}
}

// sameRowsAs compares every row of got with the rows of b from start on,
// value by value (nulls as nulls).
func sameRowsAs(t *testing.T, got, b *partition.Batch, start int) {
	t.Helper()
	for ci := range b.Columns {
		g, w := &got.Columns[ci], &b.Columns[ci]
		for r := range got.Rows {
			if g.IsNull(r) != w.IsNull(start+r) {
				t.Fatalf("column %d row %d: null %v, want %v", ci, start+r, g.IsNull(r), w.IsNull(start+r))
			}
			if !w.IsNull(start+r) && string(g.AppendText(nil, r)) != string(w.AppendText(nil, start+r)) {
				t.Fatalf("column %d row %d: %s, want %s", ci, start+r, g.AppendText(nil, r), w.AppendText(nil, start+r))
			}
		}
	}
}

// TestKudoRefused: types this build cannot carry are refused at Open naming
// the column; a batch unlike the declared schema aborts its map output;
// a schema of no columns writes row-count-only tables.
func TestKudoRefused(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	c := dial(t, d, "app")
	open := func(id int64, schema ...protocol.SchemaField) (*client.MapOutput, error) {
		return c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 6, MapID: id, NumPartitions: 2, Kind: protocol.KindColumnar,
			Format: protocol.FormatKudo, Schema: schema})
	}
	for _, typ := range []string{"calendarinterval", "char(3)", "array<varchar(4)>", "struct<a:variant>"} {
		_, err := open(1, protocol.SchemaField{Name: "k", SparkType: "int"}, protocol.SchemaField{Name: "nested", SparkType: typ})
		if protocol.CodeOf(err) != protocol.CodeUnsupported || !strings.Contains(err.Error(), `column 1 "nested"`) {
			t.Errorf("Open with %s = %v, want Unsupported naming column 1", typ, err)
		}
	}
	if _, err := open(1, protocol.SchemaField{Name: "x", SparkType: "integr"}); protocol.CodeOf(err) != protocol.CodeInvalidArgument {
		t.Errorf("Open with a misspelt type = %v, want InvalidArgument", err)
	}

	// Declared decimal(20,2) (decimal128), sent as decimal64.
	mo, err := open(2, protocol.SchemaField{Name: "d", SparkType: "decimal(20,2)"})
	if err != nil {
		t.Fatal(err)
	}
	b := &partition.Batch{Rows: 2, PartitionOffsets: []int32{0, 1, 2}, Columns: []partition.Column{
		{Name: "d", Type: partition.Decimal64, Precision: 18, Scale: 2, Data: make([]byte, 16)}}}
	payload, layout := columnar.Append(nil, b)
	if err := mo.WriteColumnar(ctx, payload, layout); protocol.CodeOf(err) != protocol.CodeInvalidArgument || !strings.Contains(err.Error(), "decimal(20,2)") {
		t.Errorf("batch unlike the schema = %v, want InvalidArgument naming decimal(20,2)", err)
	}

	// No columns: kudo's row-count-only tables, nothing for an empty
	// partition.
	mo, err = open(3)
	if err != nil {
		t.Fatal(err)
	}
	payload, layout = columnar.Append(nil, &partition.Batch{Rows: 5, PartitionOffsets: []int32{0, 0, 5}})
	if err := mo.WriteColumnar(ctx, payload, layout); err != nil {
		t.Fatal(err)
	}
	if _, err := mo.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "app", "1")), shufflefile.ID{Shuffle: 6, Map: 3}, codec.LZ4)
	want := "KUD0\x00\x00\x00\x00\x00\x00\x00\x05" + strings.Repeat("\x00", 16)
	if len(got[0]) != 0 || string(got[1]) != want {
		t.Errorf("row-count-only output = %q, %q; want empty, %q", got[0], got[1], want)
	}
}
