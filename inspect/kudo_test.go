package inspect_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/cmd/shuffled/command"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/inspect"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
)

// TestCatKudo writes the same batches (one column of every type, nulls)
// as a kudo and as a block-format map output: `shuffled cat --schema`
// prints exactly the rows of the block output for the kudo one, as CSV and
// as JSON; without --schema it counts the tables' rows; rows without a
// schema are a usage error.
func TestCatKudo(t *testing.T) {
	const n = 6
	ctx := context.Background()
	dir := t.TempDir()
	var batches []*partition.Batch
	for seed := range int64(2) {
		raw, err := synth.Generate("types", seed, 300, synth.WithNulls(0.2))
		if err != nil {
			t.Fatal(err)
		}
		b, err := partition.Partition(raw, []int{0}, n)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	e, err := writer.New(writer.WithWorkers(2), writer.WithRecordSize(4<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var total int
	for mapID, format := range []partition.Format{partition.SHFC, partition.Kudo} {
		w, err := e.Open(ctx, writer.Spec{ID: shufflefile.ID{Shuffle: 1, Map: int64(mapID)}, NumPartitions: n, Codec: codec.LZ4,
			Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir), Format: format})
		if err != nil {
			t.Fatal(err)
		}
		total = 0
		for _, b := range batches {
			if err := w.WriteBatch(ctx, b, nil); err != nil {
				t.Fatal(err)
			}
			total += b.Rows
		}
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	shfc := filepath.Join(dir, shufflefile.IndexName(shufflefile.ID{Shuffle: 1, Map: 0}))
	kudo := filepath.Join(dir, shufflefile.IndexName(shufflefile.ID{Shuffle: 1, Map: 1}))
	schema := partition.FormatSchema(partition.SchemaOf(batches[0]))
	for _, rows := range []string{"csv", "json"} {
		var want, got, errb bytes.Buffer
		if err := command.Run(ctx, []string{"cat", shfc, "--rows", rows}, &want, &errb); err != nil {
			t.Fatalf("cat shfc: %v\n%s", err, errb.String())
		}
		errb.Reset()
		if err := command.Run(ctx, []string{"cat", kudo, "--rows", rows, "--schema", schema}, &got, &errb); err != nil {
			t.Fatalf("cat kudo: %v\n%s", err, errb.String())
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%s rows of the kudo output differ from the block output's:\n%.600s\nwant\n%.600s", rows, got.String(), want.String())
		}
		if lines := strings.Count(got.String(), "\n"); lines < total {
			t.Fatalf("%d lines for %d rows", lines, total)
		}
		if !strings.Contains(errb.String(), fmt.Sprintf("%d rows in", total)) || !strings.Contains(errb.String(), "payload kudo (detected)") {
			t.Fatalf("summary does not report %d rows of a detected kudo payload:\n%s", total, errb.String())
		}
	}
	// Headers only: rows and tables counted, no schema needed.
	s, err := inspect.Inspect(ctx, sourceOf(t, kudo))
	if err != nil || s.Err() != nil || s.Payload != inspect.Kudo || s.Rows != int64(total) || s.Blocks < int64(n) {
		t.Fatalf("Inspect without schema = %+v, %v", s, err)
	}
	// A wrong schema is a corrupt partition, not garbage rows.
	bad := strings.Replace(schema, "decimal(38,10)", "bigint", 1)
	var out, errb bytes.Buffer
	err = command.Run(ctx, []string{"cat", kudo, "--rows", "csv", "--schema", bad}, &out, &errb)
	if err == nil || !strings.Contains(errb.String(), "kudo") {
		t.Fatalf("cat with a wrong schema = %v\n%s", err, errb.String())
	}
	if err := command.Run(ctx, []string{"cat", kudo, "--rows", "csv"}, &out, &errb); command.ExitCode(err) != 2 {
		t.Fatalf("rows without a schema = %v, want a usage error", err)
	}
	if err := command.Run(ctx, []string{"cat", kudo, "--schema", "a array<char(3)>"}, &out, &errb); command.ExitCode(err) != 2 || !errors.Is(err, partition.ErrUnsupportedType) {
		t.Fatalf("--schema with an array of char(3) = %v, want a usage error", err)
	}
}

func sourceOf(t *testing.T, path string) inspect.Source {
	t.Helper()
	src, err := inspect.SourceFromPath(vfs.Default, path)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestCatNested: nested, interval and void columns written as kudo and
// as blocks print the same rows (`shuffled cat --schema` with a nested
// schema for the kudo output).
func TestCatNested(t *testing.T) {
	const n = 3
	ctx := context.Background()
	dir := t.TempDir()
	fields, err := partition.ParseSchema("k int, a array<int>, s struct<x:smallint,`y z`:string>, m map<string,array<bigint>>, ym interval year to month, v void")
	if err != nil {
		t.Fatal(err)
	}
	raw := &partition.Batch{Rows: 200}
	for i, f := range fields {
		raw.Columns = append(raw.Columns, synth.Column(f, int64(i), raw.Rows, 0.2))
	}
	b, err := partition.Partition(raw, []int{0}, n)
	if err != nil {
		t.Fatal(err)
	}
	e, err := writer.New(writer.WithWorkers(2), writer.WithRecordSize(2<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for mapID, format := range []partition.Format{partition.SHFC, partition.Kudo} {
		w, err := e.Open(ctx, writer.Spec{ID: shufflefile.ID{Shuffle: 2, Map: int64(mapID)}, NumPartitions: n, Codec: codec.LZ4,
			Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir), Format: format})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteBatch(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	shfc := filepath.Join(dir, shufflefile.IndexName(shufflefile.ID{Shuffle: 2, Map: 0}))
	kudo := filepath.Join(dir, shufflefile.IndexName(shufflefile.ID{Shuffle: 2, Map: 1}))
	var want, got, errb bytes.Buffer
	if err := command.Run(ctx, []string{"cat", shfc, "--rows", "csv"}, &want, &errb); err != nil {
		t.Fatalf("cat shfc: %v\n%s", err, errb.String())
	}
	if err := command.Run(ctx, []string{"cat", kudo, "--rows", "csv", "--schema", partition.FormatSchema(fields)}, &got, &errb); err != nil {
		t.Fatalf("cat kudo: %v\n%s", err, errb.String())
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) || !strings.Contains(want.String(), "INTERVAL '") || !strings.Contains(want.String(), " -> [") {
		t.Fatalf("kudo rows differ from the block rows, or lack nested values:\n%.600s\nwant\n%.600s", got.String(), want.String())
	}
}
