package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
)

// TestDumpInputReplays dumps a run's input and rebuilds every committed
// data file from the dump alone, as the JVM writer model does: per
// partition, per batch of the task in order, the partition's bytes
// compressed as one lz4 stream per record of at most record_size bytes.
func TestDumpInputReplays(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	root, dump := t.TempDir(), filepath.Join(t.TempDir(), "in")
	args := append(append([]string{}, small...), "--payload", "opaque", "--batches-per-task", "2",
		"--keep", "--root", root, "--dump-input", dump)
	cfg, err := ParseArgs(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	raw, err := os.ReadFile(filepath.Join(dump, "input.properties"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		props[k] = v
	}
	atoi := func(k string) int {
		n, err := strconv.Atoi(props[k])
		if err != nil {
			t.Fatalf("input.properties %s = %q: %v", k, props[k], err)
		}
		return n
	}
	if atoi("tasks") != cfg.Tasks || atoi("partitions") != cfg.Partitions || props["codec"] != "lz4" {
		t.Fatalf("input.properties = %v, want %d tasks, %d partitions, lz4", props, cfg.Tasks, cfg.Partitions)
	}
	if got := int64(atoi("serialized_bytes")); got != rep.SerializedBytes {
		t.Errorf("serialized_bytes = %d, the run sent %d", got, rep.SerializedBytes)
	}
	recordSize := atoi("record_size")
	enc, err := codec.NewEncoder(codec.LZ4, codec.WithBlockSize(atoi("block_size")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Tasks {
		var want []byte
		var batches [][]byte
		var offsets [][]int64
		for _, j := range strings.Split(props["task."+strconv.Itoa(i)], ",") {
			data, err := os.ReadFile(filepath.Join(dump, "batch-"+j+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			ob, err := os.ReadFile(filepath.Join(dump, "batch-"+j+".offsets"))
			if err != nil {
				t.Fatal(err)
			}
			if len(ob) != 8*(cfg.Partitions+1) {
				t.Fatalf("batch-%s.offsets: %d bytes, want %d", j, len(ob), 8*(cfg.Partitions+1))
			}
			offs := make([]int64, cfg.Partitions+1)
			for q := range offs {
				offs[q] = int64(binary.LittleEndian.Uint64(ob[8*q:]))
			}
			batches, offsets = append(batches, data), append(offsets, offs)
		}
		for q := range cfg.Partitions {
			for b, data := range batches {
				part := data[offsets[b][q]:offsets[b][q+1]]
				for len(part) > 0 {
					n := min(len(part), recordSize)
					want = enc.Encode(want, part[:n])
					part = part[n:]
				}
			}
		}
		id := shufflefile.ID{Shuffle: 0, Map: int64(i)}
		found, _ := filepath.Glob(filepath.Join(rep.Kept, "*", shufflefile.DataName(id)))
		if len(found) != 1 {
			t.Fatalf("%v: %d data files, want 1", id, len(found))
		}
		got, err := os.ReadFile(found[0])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%v: data file of %d bytes differs from the %d rebuilt from the dump", id, len(got), len(want))
		}
	}
}
