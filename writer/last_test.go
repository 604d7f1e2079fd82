package writer

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
)

// lastRunStart returns the index of the first op of the last run ops form.
func lastRunStart(ops []op) int {
	start, last := 0, -1
	for i, o := range ops {
		if len(o.data) == 0 {
			continue
		}
		if o.p < last {
			start = i
		}
		last = o.p
	}
	return start
}

// writeMarked opens spec's map output and writes ops, calling MarkLast
// before ops[mark] (never for a mark out of range); it returns the map
// output uncommitted, or aborts it on the first error.
func writeMarked(e *Engine, spec Spec, ops []op, mark int) (*MapWriter, error) {
	ctx := context.Background()
	w, err := e.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	for i, o := range ops {
		if i == mark {
			w.MarkLast()
		}
		if err := w.Write(ctx, o.p, o.data); err != nil {
			_ = w.Abort()
			return nil, err
		}
	}
	return w, nil
}

// writeAllMarked is writeAll with MarkLast called before the last run's
// first write.
func writeAllMarked(t testing.TB, e *Engine, spec Spec, ops []op) (Result, error) {
	t.Helper()
	w, err := writeMarked(e, spec, ops, lastRunStart(ops))
	if err != nil {
		return Result{}, err
	}
	return w.Commit(context.Background())
}

// dataTemps returns the sizes of the temp files of spec's data file in
// dir: the merge's, and the run files of runs not kept in memory.
func dataTemps(t *testing.T, dir string, spec Spec) []int64 {
	t.Helper()
	prefix := shufflefile.DataName(spec.ID) + "."
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, ent := range ents {
		if name := ent.Name(); strings.HasPrefix(name, prefix) && shufflefile.IsTempName(name) {
			if fi, err := ent.Info(); err == nil {
				sizes = append(sizes, fi.Size())
			}
		}
	}
	return sizes
}

// TestMarkLastMergesEarly writes the same map output of four runs twice,
// the second time with MarkLast before its last run: that one's merge
// writes the data file up to its last partition before Commit is called
// (the last partition waits for the run to end, at Commit), and both
// commit the same bytes.
func TestMarkLastMergesEarly(t *testing.T) {
	for _, c := range []struct {
		name  string
		codec codec.Kind
		limit int64
	}{
		{"memory/none", codec.None, 16 << 20},
		{"memory/lz4", codec.LZ4, 16 << 20},
		{"spills/none", codec.None, 1 << 20}, // later runs outgrow the budget
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, WithLimit(c.limit), WithRecordSize(8<<10), WithWorkers(2))
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(41, 7))
			const parts, runs = 9, 4
			ops := fullRuns(rng, runs, parts, func() int { return 1000 + rng.IntN(30000) })
			ctx := context.Background()
			plain := Spec{ID: shufflefile.ID{Shuffle: 3, Map: 0}, NumPartitions: parts, Codec: c.codec, Checksum: checksum.CRC32, Layout: shufflefile.Flat(dir)}
			resPlain, err := writeAll(t, e, plain, ops)
			if err != nil {
				t.Fatal(err)
			}
			if resPlain.EarlyMerge {
				t.Errorf("without MarkLast: EarlyMerge set")
			}

			marked := plain
			marked.ID.Map = 1
			w, err := writeMarked(e, marked, ops, lastRunStart(ops))
			if err != nil {
				t.Fatal(err)
			}
			inMemory := c.limit > 1<<20
			if inMemory {
				// Every partition but the last has all its runs' bytes, and
				// the last has three runs' of four, so the merge writes them
				// without waiting for Commit; the last run's last segment
				// waits for the run to end. Uncompressed (codec none), that
				// is exactly the last write's bytes short of the total.
				want := sum(resPlain.Lengths) - resPlain.Lengths[parts-1]
				exact := c.codec == codec.None
				if exact {
					want = sum(resPlain.Lengths) - int64(len(ops[len(ops)-1].data))
				}
				reached := func() bool {
					for _, n := range dataTemps(t, dir, marked) {
						if n == want || !exact && n > want {
							return true
						}
					}
					return false
				}
				deadline := time.Now().Add(20 * time.Second)
				for !reached() {
					if time.Now().After(deadline) {
						t.Fatalf("before Commit: temp files of %v bytes, want one of %d (exact %v): the merge up to the last run's last segment", dataTemps(t, dir, marked), want, exact)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			res, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Runs != runs {
				t.Errorf("Runs = %d, want %d", res.Runs, runs)
			}
			if inMemory && !res.EarlyMerge {
				t.Errorf("EarlyMerge not set with MarkLast and runs in memory")
			}
			if !slices.Equal(res.Lengths, resPlain.Lengths) || !slices.Equal(res.Checksums, resPlain.Checksums) {
				t.Errorf("lengths/checksums with MarkLast %v/%v, without %v/%v", res.Lengths, res.Checksums, resPlain.Lengths, resPlain.Checksums)
			}
			a, errA := os.ReadFile(filepath.Join(dir, shufflefile.DataName(plain.ID)))
			b, errB := os.ReadFile(filepath.Join(dir, shufflefile.DataName(marked.ID)))
			if errA != nil || errB != nil || !bytes.Equal(a, b) {
				t.Errorf("data files differ with MarkLast (%d and %d bytes; %v, %v)", len(a), len(b), errA, errB)
			}
			checkMerged(t, e, marked, dir, ops)
		})
	}
}

// TestMarkLastThenRun: a record that starts a run after MarkLast (the
// mark was wrong) drops the early merge; the map output commits all of
// its runs, merged at Commit, and reads back whole.
func TestMarkLastThenRun(t *testing.T) {
	for _, runsBefore := range []int{1, 2} {
		e := newEngine(t, WithLimit(16<<20), WithRecordSize(8<<10), WithWorkers(2))
		dir := t.TempDir()
		rng := rand.New(rand.NewPCG(43, uint64(runsBefore)))
		spec := Spec{ID: shufflefile.ID{Shuffle: 4, Map: int64(runsBefore)}, NumPartitions: 6, Codec: codec.LZ4, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
		ops := fullRuns(rng, runsBefore, 6, fixed(5000))
		mark := len(ops)
		// The last batch starts one run (partition 1 after 5), then
		// another one (partition 2 after 4).
		for _, p := range []int{1, 4, 2, 5} {
			ops = append(ops, op{p, payload(rng, 5000)})
		}
		w, err := writeMarked(e, spec, ops, mark)
		if err != nil {
			t.Fatalf("runs before %d: %v", runsBefore, err)
		}
		res, err := w.Commit(context.Background())
		if err != nil {
			t.Fatalf("runs before %d: Commit: %v", runsBefore, err)
		}
		if res.Runs != runsBefore+2 || res.EarlyMerge {
			t.Errorf("runs before %d: %d runs, early merge %v; want %d runs merged at Commit", runsBefore, res.Runs, res.EarlyMerge, runsBefore+2)
		}
		checkMerged(t, e, spec, dir, ops)
	}
}

// TestMarkLastAbort aborts map outputs whose early merge is under way or
// done, and cancels a Commit waiting for one: no temp file remains, no
// quota or memory is held, and the engine takes the same map output again.
func TestMarkLastAbort(t *testing.T) {
	for _, how := range []string{"abort-during", "abort-after", "commit-cancelled"} {
		t.Run(how, func(t *testing.T) {
			e := newEngine(t, WithLimit(16<<20), WithRecordSize(8<<10), WithWorkers(2))
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(47, 1))
			const parts = 7
			spec := Spec{ID: shufflefile.ID{Shuffle: 5, Map: 0}, NumPartitions: parts, Codec: codec.LZ4, Checksum: checksum.CRC32C, Layout: shufflefile.Flat(dir)}
			ops := fullRuns(rng, 3, parts, fixed(20000))
			ctx := context.Background()
			w, err := writeMarked(e, spec, ops, lastRunStart(ops))
			if err != nil {
				t.Fatal(err)
			}
			switch how {
			case "abort-during":
				if err := w.Abort(); err != nil {
					t.Fatal(err)
				}
			case "abort-after":
				// The merge stops at the last partition until the run
				// ends: wait for its temp file (the runs are in memory).
				deadline := time.Now().Add(20 * time.Second)
				for len(dataTemps(t, dir, spec)) < 1 {
					if time.Now().After(deadline) {
						t.Fatal("the early merge made no temp file")
					}
					time.Sleep(time.Millisecond)
				}
				if err := w.Abort(); err != nil {
					t.Fatal(err)
				}
			case "commit-cancelled":
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				if _, err := w.Commit(cctx); !errors.Is(err, context.Canceled) {
					t.Fatalf("Commit with a cancelled context: %v, want context.Canceled", err)
				}
			}
			noTemps(t, dir)
			checkQuiet(t, e)
			if used := e.memory.used.Load(); used != 0 {
				t.Errorf("memory budget holds %d bytes after the abort", used)
			}
			if _, err := writeAllMarked(t, e, spec, ops); err != nil {
				t.Fatalf("the same map output again: %v", err)
			}
			checkMerged(t, e, spec, dir, ops)
		})
	}
}
