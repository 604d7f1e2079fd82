package loadgen

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// taskResult is what one committed map task measured.
type taskResult struct {
	task       int
	elapsed    time.Duration // open to commit result
	commit     time.Duration // the commit call alone
	serialized int64
	rows       int64
	out        int64 // committed bytes
	runs       int
	existing   bool
	dir        string
}

// runResult is a whole run's tasks, in task order.
type runResult struct {
	tasks []taskResult
	// start is when the first task started, elapsed the time to the end
	// of the last.
	start   time.Time
	elapsed time.Duration
	// cpu is the CPU time this process used during the run: the writer's,
	// in process or embedded, and the load generator's.
	cpu time.Duration
	// firstBatch is the latency of the run's first batch write, from the
	// call to the daemon's acceptance: what setting up on first use (a GPU
	// context, staging buffers) costs the first executor.
	firstBatch time.Duration
	// workers is the task workers' time, all of them together.
	workers workerTimes
	// setupCPU is this process's CPU time generating and partitioning the
	// pool's batches, before the tasks. With the daemon in another process
	// (apart), selfOnly is cpu (then cleared: it is not the daemon's) and
	// daemonCPU that process's CPU during the tasks, -1 if not known.
	setupCPU, selfOnly, daemonCPU time.Duration
	apart                         bool
	// split: the workers ran locked to threads of their own, so their CPU
	// is known (not with the in-process writer).
	split bool
}

// workerTimes is where task workers spent their time. Each worker runs
// locked to an OS thread of its own, so that thread's CPU clock is the
// worker's CPU: the load generator's client side (framing, sending), and
// nothing of a daemon in the same process. Each connection's reader
// goroutine (decoding the answers) and the Go runtime's own work (GC
// workers) run on other threads and are not counted here.
type workerTimes struct {
	// wall is the workers' wall time, start to end, summed.
	wall time.Duration
	// cpu is the CPU time of the workers' threads.
	cpu time.Duration
	// The waits on the daemon: each call's wall time less the CPU its
	// worker used during it (building and sending the request), so what
	// is left is waiting for the answer, or for a CPU to run on.
	open, write, commit time.Duration
	// clock is the worker's CPU clock: its thread's, or none (always 0)
	// where the worker is not locked to a thread.
	clock func() time.Duration
}

func (w *workerTimes) add(o workerTimes) {
	w.wall += o.wall
	w.cpu += o.cpu
	w.open += o.open
	w.write += o.write
	w.commit += o.commit
}

// waits returns the workers' time waiting on the daemon.
func (w *workerTimes) waits() time.Duration { return w.open + w.write + w.commit }

// waited adds to dst the time since wall0 that the worker did not spend
// on a CPU since its clock read cpu0.
func (w *workerTimes) waited(dst *time.Duration, wall0 time.Time, cpu0 time.Duration) {
	*dst += max(time.Since(wall0)-(w.clock()-cpu0), 0)
}

// noClock is the CPU clock of a worker not locked to a thread.
func noClock() time.Duration { return 0 }

// firstWrite lets the first batch write of a run claim its latency.
type firstWrite struct {
	claimed atomic.Bool
	d       time.Duration // set by the claimer before its task returns
}

// runTasks runs cfg's tasks against t, cfg.Concurrency at a time, until
// cfg.Tasks are done or cfg.Duration has passed. The first failure cancels
// the rest: tasks in flight are aborted, and the error names the task.
func runTasks(ctx context.Context, cfg *Config, p *pool, t target, prog *progress) (_ runResult, err error) {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		results  []taskResult
		workers  workerTimes
		deadline time.Time
		first    firstWrite
	)
	for _, o := range []struct {
		path  string
		start func(string) (func() error, error)
	}{{cfg.CPUProfile, startCPUProfile}, {cfg.Trace, startTrace}} {
		if o.path == "" {
			continue
		}
		stop, serr := o.start(o.path)
		if serr != nil {
			return runResult{}, serr
		}
		defer func() {
			if serr := stop(); serr != nil && err == nil {
				err = serr
			}
		}()
	}
	// The in-process writer (--compare) does part of its work on the
	// workers' goroutines, blocking them often: its workers keep the
	// scheduler's threads, and their time is not split.
	_, inProcess := t.(*engineTarget)
	start, cpu0 := time.Now(), selfCPU()
	if cfg.Duration > 0 {
		deadline = start.Add(cfg.Duration)
	}
	g, ctx := errgroup.WithContext(ctx)
	for slot := range cfg.Concurrency {
		g.Go(func() error {
			var (
				mine []taskResult
				wt   = workerTimes{clock: noClock}
			)
			if !inProcess {
				// A thread of its own, so that its CPU clock is this worker's.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				wt.clock = threadCPU
			}
			wall0, cpu0 := time.Now(), wt.clock()
			defer func() {
				wt.wall, wt.cpu = time.Since(wall0), wt.clock()-cpu0
				mu.Lock()
				results = append(results, mine...)
				workers.add(wt)
				mu.Unlock()
			}()
			for {
				i := int(next.Add(1) - 1)
				if cfg.Tasks > 0 && i >= cfg.Tasks || !deadline.IsZero() && time.Now().After(deadline) {
					return nil
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				r, err := runTask(ctx, cfg, p, t, slot, i, prog, &first, &wt)
				if err != nil {
					return err
				}
				mine = append(mine, r)
				prog.taskDone()
			}
		})
	}
	err = g.Wait()
	elapsed, cpu := time.Since(start), selfCPU()-cpu0
	sortByTask(results)
	return runResult{tasks: results, start: start, elapsed: elapsed, cpu: cpu, firstBatch: first.d, workers: workers, split: !inProcess}, err
}

// runTask writes task i's batches and commits its map output; the first
// batch write of the run records its latency in first. It adds its waits
// on the daemon to wt.
func runTask(ctx context.Context, cfg *Config, p *pool, t target, slot, i int, prog *progress, first *firstWrite, wt *workerTimes) (taskResult, error) {
	start := time.Now()
	r := taskResult{task: i}
	r.serialized, r.rows = p.task(i)
	o0, oc0 := time.Now(), wt.clock()
	o, err := t.open(ctx, slot, i)
	wt.waited(&wt.open, o0, oc0)
	if err != nil {
		return r, fmt.Errorf("task %d: open map output %d/%d: %w", i, shuffleID, i, err)
	}
	for b := range cfg.BatchesPerTask {
		if b == cfg.BatchesPerTask-1 && !cfg.NoLastBatch {
			o.markLast()
		}
		pb := p.at(i, b)
		mine := b == 0 && first.claimed.CompareAndSwap(false, true)
		w0, wc0 := time.Now(), wt.clock()
		err := o.write(ctx, pb)
		if mine {
			first.d = time.Since(w0)
		}
		wt.waited(&wt.write, w0, wc0)
		if err != nil {
			o.abort()
			return r, fmt.Errorf("task %d: map output %d/%d: batch %d (pool batch %d): %w", i, shuffleID, i, b, pb.index, err)
		}
		prog.addBytes(pb.serialized)
	}
	c0, cc0 := time.Now(), wt.clock()
	c, err := o.commit(ctx)
	wt.waited(&wt.commit, c0, cc0)
	if err != nil {
		return r, fmt.Errorf("task %d: commit map output %d/%d: %w", i, shuffleID, i, err)
	}
	now := time.Now()
	r.commit, r.elapsed = now.Sub(c0), now.Sub(start)
	for _, n := range c.lengths {
		r.out += n
	}
	r.runs, r.existing, r.dir = c.runs, c.existing, c.dir
	return r, nil
}

func sortByTask(rs []taskResult) {
	slices.SortFunc(rs, func(a, b taskResult) int { return cmp.Compare(a.task, b.task) })
}
