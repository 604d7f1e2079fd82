package server

import (
	"context"
	"errors"
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

// nestedSchema is the schema of nestedBatch.
const nestedSchema = "k bigint, a array<int>, s struct<x:string,y:array<binary>>, m map<string,bigint>, " +
	"aa array<array<smallint>>, ym interval year to month, dt interval day to second, v void"

// nestedBatch returns rows rows of nestedSchema (synth.Column), partitioned:
// nulls at every other level of the flattened columns, empty and null
// lists, a void column.
func nestedBatch(t *testing.T, seed int64, rows, parts int) *partition.Batch {
	t.Helper()
	schema, err := partition.ParseSchema(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	b := &partition.Batch{Rows: rows}
	for i, f := range schema {
		b.Columns = append(b.Columns, synth.Column(f, seed+int64(i), rows, 0.25))
	}
	b.Columns[0].Validity = nil // the key
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := partition.Partition(b, []int{0}, parts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNestedRoundTrip writes batches of nested, interval and void columns
// through the socket as SHFC and as kudo, inline and over memfd; every
// partition must decode to exactly the rows that were sent, values and
// nulls at every level.
func TestNestedRoundTrip(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	const parts = 5
	batches := []*partition.Batch{nestedBatch(t, 21, 301, parts), nestedBatch(t, 22, 77, parts)}
	schema := partition.SchemaOf(batches[0])
	mapID := int64(0)
	for _, plane := range []client.DataPlane{client.PlaneInline, client.PlaneMemfd} {
		c := dial(t, d, "app", client.WithDataPlane(plane))
		for _, f := range []protocol.PayloadFormat{protocol.FormatSHFC, protocol.FormatKudo} {
			t.Run(fmt.Sprintf("%v/%v", plane, f), func(t *testing.T) {
				mapID++
				open := protocol.OpenMapOutput{ShuffleID: 9, MapID: mapID, NumPartitions: parts,
					Kind: protocol.KindColumnar, Format: f, Codec: codec.LZ4.String()}
				if f == protocol.FormatKudo {
					open.Schema = columnar.SparkSchema(batches[0])
				}
				mo, err := c.Open(ctx, open)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range batches {
					payload, layout := columnar.Append(nil, b)
					if err := mo.WriteColumnar(ctx, payload, layout); err != nil {
						t.Fatalf("WriteColumnar: %v", err)
					}
				}
				if _, err := mo.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "app", "1")), shufflefile.ID{Shuffle: 9, Map: mapID}, codec.LZ4)
				for p := range parts {
					var decoded []*partition.Batch
					if f == protocol.FormatKudo {
						tabs, err := partition.DecodeKudoTables(got[p], schema)
						if err != nil {
							t.Fatalf("partition %d: %v", p, err)
						}
						checkTables(t, got[p], tabs)
						for _, tab := range tabs {
							decoded = append(decoded, tab.Batch)
						}
					} else if decoded, err = partition.DecodeBlocks(got[p]); err != nil {
						t.Fatalf("partition %d: %v", p, err)
					}
					i := 0
					for _, b := range batches {
						start, end := b.PartitionRows(p)
						for row := start; row < end; {
							if i >= len(decoded) {
								t.Fatalf("partition %d: %d records, rows of a batch left", p, len(decoded))
							}
							if err := partition.CheckSchema(decoded[i], schema); err != nil {
								t.Fatalf("partition %d record %d: %v", p, i, err)
							}
							sameRowsAs(t, decoded[i], b, row)
							row += decoded[i].Rows
							i++
						}
					}
					if i != len(decoded) {
						t.Fatalf("partition %d: %d records, want %d", p, len(decoded), i)
					}
				}
			})
		}
	}
}

// TestNestedRefused: children whose bytes are wrong abort their map output
// with InvalidArgument naming the column; a layout whose tree is malformed
// is refused by the client before it is sent, naming the field.
func TestNestedRefused(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	c := dial(t, d, "app")
	b := nestedBatch(t, 1, 40, 2)
	for i, tc := range []struct {
		name      string
		mod       func(l *protocol.ColumnarLayout, payload []byte)
		malformed bool
		want      string
	}{
		{"list offsets past the child", func(l *protocol.ColumnarLayout, payload []byte) {
			o := l.Columns[1].Offsets
			payload[o.Offset+o.Length-4] = 0xff
		}, false, `column 1 "a"`},
		{"string child offsets past its data", func(l *protocol.ColumnarLayout, payload []byte) {
			o := l.Columns[4].Offsets // s.x
			payload[o.Offset+o.Length-1] = 0x7f
		}, false, `column 2 "s".x: offsets`},
		{"struct with offsets", func(l *protocol.ColumnarLayout, payload []byte) {
			l.Columns[3].Offsets.Length = 8
		}, true, `Columns[3].Offsets`},
		{"children missing", func(l *protocol.ColumnarLayout, payload []byte) {
			l.Columns = l.Columns[:len(l.Columns)-1]
			l.Columns[len(l.Columns)-1].Type = protocol.TypeStruct
			l.Columns[len(l.Columns)-1].Children = 2
			l.Columns[len(l.Columns)-1].Data = protocol.Buffer{}
		}, true, "children of a nested column still to come"},
	} {
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 10, MapID: int64(i), NumPartitions: 2, Kind: protocol.KindColumnar})
		if err != nil {
			t.Fatal(err)
		}
		payload, layout := columnar.Append(nil, b)
		tc.mod(&layout, payload)
		err = mo.WriteColumnar(ctx, payload, layout)
		if tc.malformed {
			if !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: WriteColumnar = %v, want ErrMalformed containing %q", tc.name, err, tc.want)
			}
			if err := mo.Abort(ctx); err != nil {
				t.Errorf("%s: Abort: %v", tc.name, err)
			}
			continue
		}
		if protocol.CodeOf(err) != protocol.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: WriteColumnar = %v, want InvalidArgument containing %q", tc.name, err, tc.want)
		}
	}
}
