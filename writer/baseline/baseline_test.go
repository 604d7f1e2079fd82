package baseline_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
	"github.com/shuffled/shuffled/writer/baseline"
)

const parts = 300

// writeOne writes one run of random records over parts partitions (some
// empty, some repeated), in partition order.
func writeOne(t *testing.T, e *writer.Engine, spec writer.Spec, seed uint64) (writer.Result, [][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, parts)
	for p := range parts {
		for k := rng.IntN(3); k > 0; k-- {
			b := make([]byte, rng.IntN(5000))
			for i := range b {
				b[i] = byte(rng.IntN(16)) // compressible
			}
			if err := w.Write(ctx, p, b); err != nil {
				t.Fatal(err)
			}
			want[p] = append(want[p], b...)
		}
	}
	res, err := w.Commit(ctx)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return res, want
}

// TestBaselinesAgree checks that Legacy writes the same data file as the
// writer's own run for one run, which reads back whole, and that Ceiling
// reports the same lengths without writing anything.
func TestBaselinesAgree(t *testing.T) {
	e, err := writer.New(writer.WithLimit(1 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}()
	var lengths [3][]int64
	var data [2][]byte
	for i, sink := range []func(writer.SinkSpec) (writer.Sink, error){nil, baseline.Legacy, baseline.Ceiling} {
		dir := t.TempDir()
		spec := writer.Spec{ID: shufflefile.ID{Shuffle: 3, Map: 1}, NumPartitions: parts, Codec: codec.LZ4, Checksum: checksum.Adler32,
			Layout: shufflefile.Flat(dir), Sink: sink}
		res, want := writeOne(t, e, spec, 11)
		lengths[i] = res.Lengths
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if len(ents) != 0 {
				t.Errorf("ceiling left %d files, want 0", len(ents))
			}
			continue
		}
		if len(ents) != 3 {
			t.Errorf("sink %d left %d files, want the data, index and checksum files", i, len(ents))
		}
		data[i], err = os.ReadFile(filepath.Join(dir, shufflefile.DataName(spec.ID)))
		if err != nil {
			t.Fatal(err)
		}
		mo, err := shufflefile.Open(vfs.Default, spec.Layout, spec.ID, spec.Checksum)
		if err != nil {
			t.Fatal(err)
		}
		if err := mo.Verify(); err != nil {
			t.Errorf("sink %d: Verify: %v", i, err)
		}
		for p := range parts {
			raw, err := mo.ReadPartition(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := codec.Decode(spec.Codec, nil, raw)
			if err != nil || !bytes.Equal(got, want[p]) {
				t.Fatalf("sink %d partition %d: %d bytes back (%v), want %d", i, p, len(got), err, len(want[p]))
			}
		}
		mo.Close()
	}
	if !bytes.Equal(data[0], data[1]) {
		t.Errorf("legacy data file differs from the writer's (%d vs %d bytes)", len(data[1]), len(data[0]))
	}
	for p := range parts {
		if lengths[0][p] != lengths[1][p] || lengths[0][p] != lengths[2][p] {
			t.Fatalf("partition %d: lengths writer/legacy/ceiling = %d/%d/%d, want equal", p, lengths[0][p], lengths[1][p], lengths[2][p])
		}
	}
	if s := e.Limiter().Stats(); s.InFlight != 0 {
		t.Errorf("limiter holds %d bytes, want 0", s.InFlight)
	}
}

// TestLegacyAbort checks that an aborted legacy map output leaves no
// partition file.
func TestLegacyAbort(t *testing.T) {
	e, err := writer.New()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	dir := t.TempDir()
	ctx := context.Background()
	w, err := e.Open(ctx, writer.Spec{ID: shufflefile.ID{Shuffle: 1, Map: 2}, NumPartitions: 50, Codec: codec.LZ4,
		Layout: shufflefile.Flat(dir), Sink: baseline.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	for p := range 50 {
		if err := w.Write(ctx, p, bytes.Repeat([]byte{byte(p)}, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%d files left after Abort, want 0", len(ents))
	}
}
