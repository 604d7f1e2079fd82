package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// attempt is one map output a worker tried to write before the kill.
type attempt struct {
	o   *mapOutput
	res *protocol.CommitResult // what Commit returned; nil when it did not
}

// TestKillRestart kills the daemon with SIGKILL while clients write map
// outputs (inline and memfd, single and multi-run, daemon root and Spark
// local dirs), restarts it on the same root, and checks the crash
// invariant: every map output whose index exists is complete and holds
// exactly what its client sent; every output whose commit the client saw is
// there; no temp file survives the restart (the daemon sweeps its root at
// start and a local dir at its first registration); and the outputs the
// kill interrupted can be written again under the same ids.
func TestKillRestart(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	dir := t.TempDir()
	spark := filepath.Join(dir, "spark")
	if err := os.Mkdir(spark, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config{
		socket: filepath.Join(dir, "shuffled.sock"),
		root:   filepath.Join(dir, "root"),
		args:   []string{"--allowed-roots", spark, "--limit", "4MiB"},
	}
	rounds := 3
	if *long {
		rounds = 25
	}
	const workers = 4
	var totals struct{ seen, unseen, aborted, leftovers, temps int }
	for round := range rounds {
		d := startDaemon(t, cfg)
		var (
			mu       sync.Mutex
			attempts []*attempt
			commits  atomic.Int64
			enough   = make(chan struct{})
			wg       sync.WaitGroup
		)
		// Kill after a few commits; the count varies by round so that the
		// kill lands in different phases of the writes.
		threshold := int64(4 + 3*round%11)
		local := make([][]string, workers)
		for w := range workers {
			app := fmt.Sprintf("app-%d", w)
			if w%2 == 1 {
				local[w] = makeLocalDirs(t, spark, app, 2)
			}
			cl, reg := d.dial(t, app, local[w])
			layout := layoutOf(reg, local[w])
			wg.Go(func() {
				for i := 0; ; i++ {
					a := &attempt{o: plan(w+workers*i+round, app, layout, shufflefile.ID{Shuffle: int32(round), Map: int64(w*100000 + i)})}
					mu.Lock()
					attempts = append(attempts, a)
					mu.Unlock()
					res, err := a.o.write(ctx, cl)
					if err != nil {
						return // the daemon is gone
					}
					mu.Lock()
					a.res = &res
					mu.Unlock()
					if commits.Add(1) == threshold {
						close(enough)
					}
				}
			})
		}
		select {
		case <-enough:
		case <-time.After(waitTimeout):
			t.Fatalf("round %d: %d commits within %v, want %d", round, commits.Load(), waitTimeout, threshold)
		}
		d.kill()
		wg.Wait()
		totals.temps += len(tempFiles(t, cfg.root, spark))

		d = startDaemon(t, cfg)
		// Registering a local dir sweeps it; the daemon's root was swept
		// before the socket listened.
		for w := range workers {
			d.dial(t, fmt.Sprintf("app-%d", w), local[w])
		}
		if tmp := tempFiles(t, cfg.root, spark); len(tmp) > 0 {
			t.Errorf("round %d: temp files after the restart: %q", round, tmp)
		}
		var redo []*mapOutput
		for _, a := range attempts {
			switch {
			case a.o.committed():
				if err := a.o.verify(a.res); err != nil {
					t.Errorf("round %d: committed before the kill, but: %v", round, err)
				}
				if a.res != nil {
					totals.seen++
				} else {
					totals.unseen++
				}
			case a.res != nil:
				t.Errorf("round %d: %v: Commit succeeded before the kill, but there is no index", round, a.o)
			default:
				totals.aborted++
				totals.leftovers += len(a.o.files(t, cfg.root, spark))
				redo = append(redo, a.o)
			}
		}

		// New writes work, also of the ids the kill interrupted, whose
		// leftover data files (renamed, never indexed) they replace.
		for w := range workers {
			cl, _ := d.dial(t, fmt.Sprintf("app-%d", w), local[w])
			for _, o := range redo {
				if o.app != fmt.Sprintf("app-%d", w) {
					continue
				}
				res, err := o.write(ctx, cl)
				if err != nil {
					t.Errorf("round %d: rewriting after the restart: %v", round, err)
					continue
				}
				if res.Existing {
					t.Errorf("round %d: %v: rewrite found an existing commit, but there was no index", round, o)
				}
				if err := o.verify(&res); err != nil {
					t.Errorf("round %d: rewritten after the restart: %v", round, err)
				}
			}
			// A committed output stays: a second attempt gets its figures.
			i := slices.IndexFunc(attempts, func(a *attempt) bool { return a.res != nil && a.o.app == fmt.Sprintf("app-%d", w) })
			if i < 0 {
				continue
			}
			a := attempts[i]
			res, err := a.o.write(ctx, cl)
			switch {
			case err != nil:
				t.Errorf("round %d: second attempt of %v: %v", round, a.o, err)
			case !res.Existing || !slices.Equal(res.Lengths, a.res.Lengths):
				t.Errorf("round %d: second attempt of %v: existing %v lengths %v, want existing true lengths %v", round, a.o, res.Existing, res.Lengths, a.res.Lengths)
			}
		}
		d.stop()
	}
	t.Logf("%d rounds: %d outputs committed and acknowledged, %d committed unacknowledged, %d not committed; %d temp files swept, %d leftover files rewritten",
		rounds, totals.seen, totals.unseen, totals.aborted, totals.temps, totals.leftovers)
}
