package inspect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/cmd/shuffled/command"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/inspect"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/writer"
)

// TestCatCommand runs `shuffled cat` on a map output the writer committed:
// rows on stdout and the table on stderr, a JSON summary, a corrupted byte
// (exit status 1, the partition named) and usage mistakes (status 2).
func TestCatCommand(t *testing.T) {
	const n = 5
	ctx := context.Background()
	dir := t.TempDir()
	id := shufflefile.ID{Shuffle: 4, Map: 9}
	raw, err := synth.Generate("ints", 7, 400)
	if err != nil {
		t.Fatal(err)
	}
	b, err := partition.Partition(raw, []int{0}, n)
	if err != nil {
		t.Fatal(err)
	}
	e, err := writer.New(writer.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	w, err := e.Open(ctx, writer.Spec{ID: id, NumPartitions: n, Codec: codec.Zstd, Checksum: checksum.CRC32, Layout: shufflefile.Flat(dir)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	res, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, shufflefile.IndexName(id))

	var out, errb bytes.Buffer
	if err := command.Run(ctx, []string{"cat", index, "--rows", "csv"}, &out, &errb); err != nil {
		t.Fatalf("cat --rows csv: %v\n%s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1+b.Rows || !strings.HasPrefix(lines[0], inspect.PartitionColumn+",key,") {
		t.Errorf("cat --rows csv printed %d lines starting %q, want a header and %d rows", len(lines), lines[0], b.Rows)
	}
	for _, want := range []string{"partition", "400 rows", "codec zstd (detected), checksum CRC32 (detected)", "verified OK"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("cat --rows csv: stderr lacks %q:\n%s", want, errb.String())
		}
	}

	out.Reset()
	errb.Reset()
	args := []string{"inspect", "--json", "--dir", dir, "--shuffle", "4", "--map", "9"}
	if err := command.Run(ctx, args, &out, &errb); err != nil {
		t.Fatalf("%q: %v\n%s", args, err, errb.String())
	}
	var sum struct {
		OK         bool  `json:"ok"`
		Rows       int64 `json:"rows"`
		Bytes      int64 `json:"bytes"`
		Partitions []struct {
			Bytes int64 `json:"bytes"`
			Rows  int64 `json:"rows"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("%q: %v:\n%s", args, err, out.String())
	}
	if !sum.OK || sum.Rows != int64(b.Rows) || len(sum.Partitions) != n {
		t.Errorf("%q: ok %v, rows %d, %d partitions; want true, %d, %d", args, sum.OK, sum.Rows, len(sum.Partitions), b.Rows, n)
	}
	for p, got := range sum.Partitions {
		start, end := b.PartitionRows(p)
		if got.Bytes != res.Lengths[p] || got.Rows != int64(end-start) {
			t.Errorf("%q: partition %d: %d bytes, %d rows; want %d, %d", args, p, got.Bytes, got.Rows, res.Lengths[p], end-start)
		}
	}

	// Corrupt the last byte of the last non-empty partition.
	bad := n - 1
	for res.Lengths[bad] == 0 {
		bad--
	}
	var size int64
	for _, l := range res.Lengths[:bad+1] {
		size += l
	}
	data := filepath.Join(dir, shufflefile.DataName(id))
	f, err := os.OpenFile(data, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0x5a}, size-1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out.Reset()
	errb.Reset()
	err = command.Run(ctx, []string{"cat", data}, &out, &errb)
	if err == nil || command.ExitCode(err) != 1 || !errors.Is(err, inspect.ErrChecksumMismatch) ||
		!strings.Contains(err.Error(), fmt.Sprintf("partition %d ", bad)) {
		t.Errorf("cat of a corrupted output = %v (exit %d), want exit 1 naming partition %d", err, command.ExitCode(err), bad)
	}
	if !strings.Contains(out.String(), "1 checksum mismatch") || !strings.Contains(out.String(), "MISMATCH") {
		t.Errorf("cat of a corrupted output printed:\n%s", out.String())
	}

	for _, args := range [][]string{
		{"cat"},
		{"cat", "--shuffle", "4", "--map", "9"},
		{"cat", "--dir", dir, "--map", "9"},
		{"cat", "--dir", dir, "--shuffle", "4", "--map", "9", index},
		{"cat", "--codec", "brotli", index},
		{"cat", "--rows", "xml", index},
		{"cat", "--partition", strconv.Itoa(n), index},
		{"cat", filepath.Join(dir, "README")},
	} {
		errb.Reset()
		if err := command.Run(ctx, args, &out, &errb); command.ExitCode(err) != 2 {
			t.Errorf("%q = %v (exit %d), want a usage error (exit 2)", args, err, command.ExitCode(err))
		}
	}
}
