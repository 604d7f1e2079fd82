package writer

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// TestCommitPhases slows one kind of file operation down and checks that
// Result's phase of Commit that does it takes at least the delay, and
// that the phases together stay within Commit's time.
func TestCommitPhases(t *testing.T) {
	const delay = 20 * time.Millisecond
	slow := func(kind errorfs.OpKind) errorfs.Injector {
		return errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == kind {
				time.Sleep(delay)
			}
			return nil
		})
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for _, tc := range []struct {
		name string
		kind errorfs.OpKind
		runs int
		// mark: the op before which MarkLast is called (-1: never); a
		// single run marked at its start streams to its file.
		mark int
		// limit: small enough that runs go to files, which the merge
		// reads after the runs end.
		limit int64
		check func(t *testing.T, res Result)
	}{
		{"one run streamed, slow renames", errorfs.OpRename, 1, 0, 0, func(t *testing.T, res Result) {
			if res.Files < delay {
				t.Errorf("Files = %v with renames of %v each, want at least that", res.Files, delay)
			}
			if res.MergeTail != 0 {
				t.Errorf("MergeTail = %v for one run streamed to its file, want 0", res.MergeTail)
			}
		}},
		{"one run in memory, slow writes", errorfs.OpWrite, 1, -1, 0, func(t *testing.T, res Result) {
			if res.MergeTail < delay {
				t.Errorf("MergeTail = %v for one run written at Commit with writes of %v each, want at least that", res.MergeTail, delay)
			}
		}},
		{"runs in files, slow reads", errorfs.OpRead, 3, -1, 16 << 10, func(t *testing.T, res Result) {
			if res.MemoryRuns != 0 {
				t.Fatalf("%d runs merged from memory, want all from files", res.MemoryRuns)
			}
			if res.MergeTail < delay {
				t.Errorf("MergeTail = %v with reads of %v each, want at least that", res.MergeTail, delay)
			}
			if res.Files >= delay {
				t.Errorf("Files = %v, want less than a slow read's %v (no read commits)", res.Files, delay)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []Option{WithFS(errorfs.New(vfs.Default, slow(tc.kind)))}
			if tc.limit > 0 {
				opts = append(opts, WithLimit(tc.limit), WithRecordSize(2<<10))
			}
			e := newEngine(t, opts...)
			dir := t.TempDir()
			spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: 8, Codec: codec.LZ4, Checksum: checksum.CRC32,
				Layout: shufflefile.Flat(dir)}
			ops := workload(rng, spec.NumPartitions, tc.runs, 1500)
			ctx := context.Background()
			w, err := writeMarked(e, spec, ops, tc.mark)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := w.Commit(ctx)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if res.Runs != tc.runs {
				t.Fatalf("%d runs, want %d", res.Runs, tc.runs)
			}
			if res.EncodeWait < 0 || res.MergeTail < 0 || res.Files <= 0 {
				t.Errorf("phases EncodeWait %v, MergeTail %v, Files %v: want none negative and Files above 0", res.EncodeWait, res.MergeTail, res.Files)
			}
			if sum := res.EncodeWait + res.MergeTail + res.Files; sum > elapsed {
				t.Errorf("phases add up to %v, more than Commit's %v", sum, elapsed)
			}
			tc.check(t, res)
			checkMerged(t, e, spec, dir, ops)
		})
	}
}
