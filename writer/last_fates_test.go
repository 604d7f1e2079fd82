package writer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// TestMarkLastConcurrentFates runs many marked map outputs at once on an
// engine whose budget makes runs spill while their early merge reads them,
// each with a fate: committed; aborted from another goroutine at a random
// point (the early merge waiting for a run, or reading it); committed with
// a context cancelled at a random point; or a wrong mark (a run after it:
// the merge is dropped). Whatever wins, a committed output reads back
// whole, an aborted one leaves no file, and the engine ends holding no
// quota, no memory, no temp file and no goroutine.
func TestMarkLastConcurrentFates(t *testing.T) {
	for _, limit := range []int64{2 << 20, 24 << 20} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) { markLastFates(t, limit) })
	}
}

func markLastFates(t *testing.T, limit int64) {
	before := runtime.NumGoroutine()
	e, err := New(WithLimit(limit), WithRecordSize(4<<10), WithWorkers(3))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const outputs, parts = 16, 23
	var wg sync.WaitGroup
	var statsMu sync.Mutex
	var early, committed, spilled int
	for m := range outputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(m), 99))
			fate := m % 4
			spec := Spec{ID: shufflefile.ID{Shuffle: 9, Map: int64(m)}, NumPartitions: parts, Codec: codec.LZ4, Checksum: checksum.CRC32C, Layout: shufflefile.Flat(dir)}
			ops := workload(rng, parts, 2+rng.IntN(3), 30000)
			mark := lastRunStart(ops)
			if fate == 3 { // a wrong mark: runs after it
				ops = append(ops, workload(rng, parts, 2, 20000)...)
			}
			ctx := context.Background()
			w, err := e.Open(ctx, spec)
			if err != nil {
				t.Error(err)
				return
			}
			var aborted chan error
			if fate == 1 {
				aborted = make(chan error, 1)
				delay := time.Duration(rng.IntN(30000)) * time.Microsecond
				go func() { time.Sleep(delay); aborted <- w.Abort() }()
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for i, o := range ops {
				if i == mark {
					w.MarkLast()
				}
				if err := w.Write(ctx, o.p, o.data); err != nil {
					if fate != 1 || !errors.Is(err, ErrAborted) {
						t.Errorf("map %d (fate %d): write %d: %v", m, fate, i, err)
					}
					break
				}
			}
			if fate == 2 {
				d := time.Duration(rng.IntN(20000)) * time.Microsecond
				time.AfterFunc(d, cancel)
			}
			res, err := w.Commit(cctx)
			if fate == 1 {
				if aerr := <-aborted; err == nil && !errors.Is(aerr, ErrCommitted) {
					t.Errorf("map %d: Commit succeeded and Abort said %v", m, aerr)
				}
			}
			data := filepath.Join(dir, shufflefile.DataName(spec.ID))
			switch {
			case err == nil:
				statsMu.Lock()
				committed++
				if res.EarlyMerge {
					early++
				}
				if res.Runs > 1 && res.MemoryRuns < res.Runs {
					spilled++
				}
				statsMu.Unlock()
				got := readBack(t, vfs.Default, spec)
				want := expect(ops, parts)
				for p := range parts {
					if string(got[p]) != string(want[p]) {
						t.Errorf("map %d (fate %d, early %v, runs %d): partition %d: %d bytes, want %d", m, fate, res.EarlyMerge, res.Runs, p, len(got[p]), len(want[p]))
					}
				}
			case fate == 1 && errors.Is(err, ErrAborted), fate == 2 && errors.Is(err, context.Canceled):
				if _, serr := os.Stat(data); serr == nil {
					t.Errorf("map %d: data file after a failed Commit", m)
				}
			default:
				t.Errorf("map %d (fate %d): Commit: %v", m, fate, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of %d committed, %d merged early, %d with a run from its file", committed, outputs, early, spilled)
	noTemps(t, dir)
	checkQuiet(t, e)
	if used := e.memory.used.Load(); used != 0 {
		t.Errorf("memory budget holds %d bytes after every map output ended", used)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMarkLastNoLastWrite: MarkLast followed by no write, by empty writes
// only, or by empty writes then a record that starts a run: the output of
// several runs commits whole, merged at Commit or early by the one run the
// mark allows, and holds nothing afterwards.
func TestMarkLastNoLastWrite(t *testing.T) {
	for _, after := range []string{"none", "empty", "empty-then-run", "empty-then-two-runs"} {
		t.Run(after, func(t *testing.T) {
			e := newEngine(t, WithLimit(16<<20), WithRecordSize(8<<10), WithWorkers(2))
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(5, 5))
			const parts = 5
			spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: parts, Codec: codec.LZ4, Checksum: checksum.CRC32, Layout: shufflefile.Flat(dir)}
			ctx := context.Background()
			w, err := e.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			ops := fullRuns(rng, 2, parts, fixed(3000))
			write := func(o op) {
				if err := w.Write(ctx, o.p, o.data); err != nil {
					t.Fatal(err)
				}
			}
			for _, o := range ops {
				write(o)
			}
			w.MarkLast()
			if after != "none" {
				write(op{0, nil})
				if err := w.WriteOpaque(ctx, nil, make([]int64, parts+1), nil); err != nil {
					t.Fatal(err)
				}
			}
			switch after {
			case "empty-then-run":
				ops = append(ops, op{1, payload(rng, 3000)}, op{3, payload(rng, 3000)})
			case "empty-then-two-runs":
				ops = append(ops, op{1, payload(rng, 3000)}, op{3, payload(rng, 3000)}, op{2, payload(rng, 3000)})
			}
			for _, o := range ops[2*parts:] {
				write(o)
			}
			res, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if wantEarly := after == "empty-then-run"; res.EarlyMerge != wantEarly {
				t.Errorf("EarlyMerge %v, want %v (%d runs)", res.EarlyMerge, wantEarly, res.Runs)
			}
			checkMerged(t, e, spec, dir, ops)
		})
	}
}

// TestMarkLastEarlyMergeFailureStopsWrites: the early merge fails (its
// Space refuses the data file's bytes) while the last batch is written.
// Without MarkLast the same refusal fails the map output at Commit; with
// it, the map output is already doomed, yet its writes keep being
// admitted, encoded and kept until Commit reports the error.
func TestMarkLastEarlyMergeFailureStopsWrites(t *testing.T) {
	e := newEngine(t, WithLimit(16<<20), WithRecordSize(8<<10), WithWorkers(2))
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(8, 8))
	const parts = 8
	space := &quota{left: 1 << 40}
	spec := Spec{ID: shufflefile.ID{Shuffle: 2, Map: 0}, NumPartitions: parts, Codec: codec.None, Layout: shufflefile.Flat(dir), Space: space}
	ctx := context.Background()
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for p := range parts {
			if err := w.Write(ctx, p, payload(rng, 4000)); err != nil {
				t.Fatal(err)
			}
		}
	}
	space.mu.Lock()
	space.left = 0 // the disk fills up
	space.mu.Unlock()
	w.MarkLast()
	if err := w.Write(ctx, 0, payload(rng, 4000)); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	m := w.early
	w.mu.Unlock()
	if m == nil {
		t.Fatal("no early merge")
	}
	<-m.done
	if !errors.Is(m.err, errNoSpace) {
		t.Fatalf("early merge: %v, want the Space's refusal", m.err)
	}
	err = w.Write(ctx, 5, payload(rng, 4000))
	if err == nil {
		t.Errorf("a Write after the early merge failed for good is admitted (the map output fails only at Commit)")
	}
	if _, err := w.Commit(ctx); !errors.Is(err, errNoSpace) {
		t.Errorf("Commit: %v, want the Space's refusal", err)
	}
	noTemps(t, dir)
	checkQuiet(t, e)
}

// TestMarkLastDroppedMergeSpace: a wrong mark drops an early merge that
// had written part of the data file; the Space admitted those bytes, and
// nothing gives them back, so the map output is charged for its merged
// bytes more than once (a disk near its watermark refuses it sooner).
func TestMarkLastDroppedMergeSpace(t *testing.T) {
	e := newEngine(t, WithLimit(16<<20), WithRecordSize(8<<10), WithWorkers(2))
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 9))
	const parts = 6
	ops := fullRuns(rng, 2, parts, fixed(6000))
	last := []op{{1, payload(rng, 6000)}, {4, payload(rng, 6000)}, {2, payload(rng, 6000)}}
	grown := func(marked bool, m int64) {
		space := &quota{left: 1 << 40}
		spec := Spec{ID: shufflefile.ID{Shuffle: 6, Map: m}, NumPartitions: parts, Codec: codec.None, Layout: shufflefile.Flat(dir), Space: space}
		ctx := context.Background()
		w, err := writeMarked(e, spec, ops, -1)
		if err != nil {
			t.Fatal(err)
		}
		used := func() int64 {
			space.mu.Lock()
			defer space.mu.Unlock()
			return 1<<40 - space.left
		}
		runFiles := used() // run 0's file, no longer written once run 1 began
		if marked {
			w.MarkLast()
		}
		for i, o := range last {
			if marked && i == 2 { // wait for the early merge to write part of the data file
				deadline := time.Now().Add(10 * time.Second)
				for used() == runFiles {
					if time.Now().After(deadline) {
						t.Fatalf("the early merge wrote nothing: temps %v", dataTemps(t, dir, spec))
					}
					time.Sleep(time.Millisecond)
				}
			}
			if err := w.Write(ctx, o.p, o.data); err != nil {
				t.Fatal(err)
			}
		}
		res, err := w.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if merged := used() - runFiles; merged != res.BytesOut {
			t.Errorf("marked %v: Space grown by %d bytes after run 0's file, for a data file of %d", marked, merged, res.BytesOut)
		}
	}
	grown(false, 0)
	grown(true, 1)
}
