package writer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// failNth fails the n-th file operation other than Remove (cleanup removes
// are best effort; a leftover temp file is what the startup sweep is for).
type failNth struct {
	n, seen atomic.Int64
	short   bool
}

func (f *failNth) MaybeError(op errorfs.Op) error {
	if op.Kind == errorfs.OpRemove {
		return nil
	}
	if f.seen.Add(1)-1 == f.n.Load() {
		if f.short && (op.Kind == errorfs.OpWrite || op.Kind == errorfs.OpCopyRange) {
			return errorfs.ShortWrite(errorfs.OnIndex(op.Index)).MaybeError(op)
		}
		return fmt.Errorf("fail op %d: %w", f.n.Load(), errorfs.ErrInjected)
	}
	return nil
}

// TestErrorSweep fails the i-th file operation of a whole map output
// (runs, merge, commit) for i = 0, 1, 2, … until a run passes untouched.
// Every failure must surface as an error, leave nothing committed and no
// temp file, hold no quota, and leak no goroutine.
func TestErrorSweep(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name  string
		limit int64
		runs  int
		short bool
		last  bool // MarkLast before the last run: the merge starts there
	}{
		// An 8 KiB limit keeps every run in a file; 1 MiB lets later runs
		// stay in memory until the merge.
		{"files/runs=1", 8 << 10, 1, false, false},
		{"files/runs=3", 8 << 10, 3, false, false},
		{"files/runs=3/short", 8 << 10, 3, true, false},
		{"memory/runs=1", 1 << 20, 1, false, false},
		{"memory/runs=3", 1 << 20, 3, false, false},
		{"memory/runs=3/short", 1 << 20, 3, true, false},
		{"files/runs=3/last", 8 << 10, 3, false, true},
		{"memory/runs=3/last", 1 << 20, 3, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(tc.runs)))
			ops := workload(rng, 12, tc.runs, 3000)
			want := expect(ops, 12)
			for i := int64(0); ; i++ {
				if i > 10000 {
					t.Fatal("sweep did not converge")
				}
				dir := t.TempDir()
				inj := &failNth{short: tc.short}
				inj.n.Store(i)
				fsys := errorfs.New(vfs.Default, inj)
				e := newEngine(t, WithFS(fsys), WithLimit(tc.limit), WithRecordSize(2<<10), WithWorkers(2), WithSync(true))
				spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: i}, NumPartitions: 12, Codec: codec.LZ4, Checksum: checksum.CRC32C,
					Layout: shufflefile.Flat(dir)}
				write := writeAll
				if tc.last {
					write = writeAllMarked
				}
				_, err := write(t, e, spec, ops)
				checkQuiet(t, e)
				if cerr := e.Close(); cerr != nil {
					t.Fatalf("op %d: Close: %v", i, cerr)
				}
				noTemps(t, dir)
				if fsys.Injected() == 0 {
					if err != nil {
						t.Fatalf("op %d: no failure injected, but write failed: %v", i, err)
					}
					checkPartitions(t, readBack(t, vfs.Default, spec), want)
					t.Logf("%d failure points swept", i)
					return
				}
				if err == nil {
					t.Fatalf("op %d failed but the map output committed without error", i)
				}
				if !errors.Is(err, errorfs.ErrInjected) {
					t.Fatalf("op %d: error %v does not wrap the injected failure", i, err)
				}
				if _, statErr := os.Stat(shufflefile.Path(spec.Layout, shufflefile.IndexName(spec.ID))); statErr == nil {
					t.Fatalf("op %d: failed write left a committed index (error %v)", i, err)
				}
			}
		})
	}
}
