package integration

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/inspect"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
)

var (
	crashIterations = flag.Int("crashloop-iterations", 5, "SIGKILL-and-restart iterations of TestCrashLoop (the long run: 200)")
	crashSeed       = flag.Uint64("crashloop-seed", 0, "seed of TestCrashLoop's kill moments; 0 picks one and logs it")
)

const (
	// crashWorkers is the number of Go clients writing map outputs in each
	// iteration, half of them into Spark local dirs.
	crashWorkers = 4
	// crashMaxKill bounds the random moment of the kill after the load
	// starts: long enough to reach commits, merges and the load
	// generator's tasks, short enough for a bounded iteration.
	crashMaxKill = 700 * time.Millisecond
	// crashChecksum is the load generator's checksum algorithm.
	crashChecksum = checksum.CRC32C
)

// crashAttempt is one map output a Go client tried to write.
type crashAttempt struct {
	o   *mapOutput
	res *protocol.CommitResult // what Commit returned; nil when it did not return
}

// crashTally holds the figures of a crash loop.
type crashTally struct {
	iterations   int
	acked        int // outputs whose Commit returned success, all verified after a restart
	unacked      int // committed (index on disk) but the client never saw the answer
	interrupted  int // no index: the kill interrupted them
	lgChecked    int // committed load generator outputs compared byte for byte
	lgExit       map[int]int
	tempsKilled  int // temp files a kill left, before the restart swept them
	lost         int // acknowledged outputs missing or wrong after a restart (goal 0)
	partial      int // index files that do not verify or differ from what was sent (goal 0)
	leftover     int // temp files after a restart (goal 0)
	kills        []time.Duration
	lgDuringKill int // iterations where the load generator had committed before the kill
}

// TestCrashLoop kills the daemon with SIGKILL at a random moment while Go
// clients and the load generator binary write map outputs, restarts it on
// the same root, and checks after each restart that:
//
//   - every map output whose Commit returned success exists, verifies and
//     decodes to exactly what its client sent (lost committed outputs: 0);
//   - every index file on disk belongs to a whole output: the Go clients'
//     verify against what they sent, the load generator's are byte for
//     byte those of a reference run of the same seed (partial outputs: 0);
//   - no temp file survives the restart (leftover temp files: 0);
//   - the restarted daemon serves: the reference run is a load generator
//     run with --verify, which must succeed.
//
// At the end every acknowledged output of every iteration is verified once
// more: later kills and sweeps must not have touched it. The default is a
// few iterations; -crashloop-iterations 200 is the long run.
func TestCrashLoop(t *testing.T) {
	leakcheck.Check(t)
	if *crashIterations < 1 {
		t.Fatalf("-crashloop-iterations %d: want at least 1", *crashIterations)
	}
	loadgen := relLoadgenBinary(t)
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash loop seed %d (-crashloop-seed %d repeats the kill moments)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	ctx := context.Background()
	dir := t.TempDir()
	spark := filepath.Join(dir, "spark")
	if err := os.Mkdir(spark, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config{
		socket: filepath.Join(dir, "shuffled.sock"),
		root:   filepath.Join(dir, "root"),
		args:   []string{"--allowed-roots", spark, "--limit", "4MiB", "--log-level", "info"},
	}
	local := make([][]string, crashWorkers)
	for w := 1; w < crashWorkers; w += 2 {
		local[w] = makeLocalDirs(t, spark, crashApp(w), 2)
	}

	tally := crashTally{lgExit: map[int]int{}}
	var all []*crashAttempt
	start := time.Now()
	d := startDaemon(t, cfg)
	for it := range *crashIterations {
		attempts, lg := crashLoad(ctx, t, d, loadgen, it, local)

		delay := time.Duration(rng.Int64N(int64(crashMaxKill)))
		tally.kills = append(tally.kills, delay)
		time.Sleep(delay) // the random moment; nothing is polled
		attempts.killed.Store(true)
		d.kill()
		lg.wait(t)
		tally.lgExit[lg.code]++
		attempts.wg.Wait()
		tally.tempsKilled += len(tempFiles(t, cfg.root, spark))

		d = startDaemon(t, cfg)
		// Registering a local dir sweeps it; the root was swept before
		// the socket listened.
		for w := range crashWorkers {
			c, _, err := relDial(ctx, d.socket, crashApp(w), local[w])
			if err != nil {
				t.Fatalf("iteration %d: register after the restart: %v", it, err)
			}
			c.Close()
		}
		if tmp := tempFiles(t, cfg.root, spark); len(tmp) > 0 {
			tally.leftover += len(tmp)
			t.Errorf("iteration %d: temp files after the restart: %q", it, tmp)
		}
		for _, a := range attempts.list {
			switch err := a.check(); {
			case a.res != nil && err != nil:
				tally.lost++
				t.Errorf("iteration %d (kill at %v): Commit succeeded before the kill, but after the restart: %v", it, delay, err)
			case a.res != nil:
				tally.acked++
				all = append(all, a)
			case a.o.committed() && err != nil:
				tally.partial++
				t.Errorf("iteration %d (kill at %v): index on disk, but: %v", it, delay, err)
			case a.o.committed():
				tally.unacked++
			default:
				tally.interrupted++
			}
		}
		n, partial := crashCheckLoadgen(ctx, t, d, loadgen, lg, it)
		tally.lgChecked += n
		tally.partial += partial
		if n > 0 {
			tally.lgDuringKill++
		}
		tally.iterations++
	}
	d.stop()

	// Once more, after every later kill and restart.
	for _, a := range all {
		if err := a.check(); err != nil {
			tally.lost++
			t.Errorf("at the end: %v", err)
		}
	}
	if tmp := tempFiles(t, cfg.root, spark); len(tmp) > 0 {
		tally.leftover += len(tmp)
		t.Errorf("temp files at the end: %q", tmp)
	}
	t.Logf("crash loop: %d iterations in %v (kill after %v..%v of load); "+
		"Go clients: %d acknowledged outputs verified after restart and again at the end, %d committed unacknowledged, %d interrupted; "+
		"load generator: %d committed outputs identical to a reference run, in %d iterations, exits %v; "+
		"%d temp files left by kills, all swept; lost %d, partial %d, leftover %d",
		tally.iterations, time.Since(start).Round(time.Millisecond), slices.Min(tally.kills).Round(time.Millisecond), slices.Max(tally.kills).Round(time.Millisecond),
		tally.acked, tally.unacked, tally.interrupted,
		tally.lgChecked, tally.lgDuringKill, tally.lgExit,
		tally.tempsKilled, tally.lost, tally.partial, tally.leftover)
}

func crashApp(w int) string { return fmt.Sprintf("crash-app-%d", w) }

// crashAttempts are the map outputs of one iteration's Go clients.
type crashAttempts struct {
	wg     sync.WaitGroup
	killed atomic.Bool // set just before the kill: a failure before it is a bug
	mu     sync.Mutex
	list   []*crashAttempt
}

// crashLoad starts the load of iteration it: crashWorkers Go clients each
// writing map outputs one after another until the daemon dies, and a load
// generator process.
func crashLoad(ctx context.Context, t *testing.T, d *daemon, loadgen string, it int, local [][]string) (*crashAttempts, *crashLoadgen) {
	t.Helper()
	as := &crashAttempts{}
	for w := range crashWorkers {
		c, layout, err := relDial(ctx, d.socket, crashApp(w), local[w])
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		as.wg.Go(func() {
			defer c.Close()
			for i := 0; ; i++ {
				a := &crashAttempt{o: plan(it*7+w*3+i, crashApp(w), layout, shufflefile.ID{Shuffle: int32(it), Map: int64(w*1_000_000 + i)})}
				as.mu.Lock()
				as.list = append(as.list, a)
				as.mu.Unlock()
				res, err := a.o.write(ctx, c)
				if err != nil {
					if !as.killed.Load() {
						t.Errorf("iteration %d: %v failed before the kill: %v", it, a.o, err)
					}
					return // the daemon is gone
				}
				as.mu.Lock()
				a.res = &res
				as.mu.Unlock()
			}
		})
	}
	before := crashLoadgenApps(t, d.root)
	return as, startCrashLoadgen(t, loadgen, d.socket, it, before, "--duration", "1m")
}

// check verifies the attempt's output on disk; with an acknowledged
// commit, also against the lengths and checksums Commit returned.
func (a *crashAttempt) check() error { return a.o.verify(a.res) }

// crashLoadgen is one run of the load generator binary.
type crashLoadgen struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	before map[string]bool // load generator applications in the root before it started
	code   int
}

// crashLoadgenArgs is the load generator's workload: small tasks of three
// batches (three runs and a merge each), a fixed seed per iteration.
func crashLoadgenArgs(socket string, it int) []string {
	return []string{
		"--socket", socket, "--keep", "--concurrency", "2", "--partitions", "48",
		"--rows", "3000", "--batches-per-task", "3", "--pool-batches", "3",
		"--codec", "lz4", "--checksum", crashChecksum.String(), "--seed", strconv.Itoa(it + 1),
	}
}

func startCrashLoadgen(t *testing.T, bin, socket string, it int, before map[string]bool, extra ...string) *crashLoadgen {
	t.Helper()
	lg := &crashLoadgen{before: before}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	lg.cmd = exec.CommandContext(ctx, bin, append(crashLoadgenArgs(socket, it), extra...)...)
	lg.cmd.Stdout, lg.cmd.Stderr = &lg.out, &lg.out
	lg.cmd.Cancel = func() error { cancel(); return lg.cmd.Process.Kill() }
	if err := lg.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(cancel)
	return lg
}

// wait waits for the load generator whose daemon was killed: it must exit
// with an error it states on one line, not crash or hang.
func (lg *crashLoadgen) wait(t *testing.T) {
	t.Helper()
	_ = lg.cmd.Wait()
	lg.code = lg.cmd.ProcessState.ExitCode()
	out := lg.out.String()
	switch {
	case lg.code != 1 && lg.code != 2, strings.Contains(out, "panic"), !strings.Contains(out, "shuffled-loadgen: "):
		t.Errorf("load generator after the kill: exit %d, want 1 or 2 with its error stated:\n%s", lg.code, out)
	}
}

// crashLoadgenApps returns the load generator applications under root.
func crashLoadgenApps(t *testing.T, root string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	apps := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "loadgen-") {
			apps[e.Name()] = true
		}
	}
	return apps
}

// newApp returns the one load generator application that appeared under
// root since before, or "" if none did.
func newApp(t *testing.T, root string, before map[string]bool) string {
	t.Helper()
	var found []string
	for app := range crashLoadgenApps(t, root) {
		if !before[app] {
			found = append(found, app)
		}
	}
	if len(found) > 1 {
		t.Fatalf("load generator applications %q appeared, want at most one", found)
	}
	if len(found) == 0 {
		return ""
	}
	return found[0]
}

// crashCheckLoadgen checks the outputs the killed load generator run lg
// committed: each must open, verify, and hold byte for byte what a
// reference run of the same workload commits for the same task. The
// reference run, against the restarted daemon, must itself pass --verify.
// It returns the outputs checked and how many failed. Both runs' outputs
// are removed afterwards.
func crashCheckLoadgen(ctx context.Context, t *testing.T, d *daemon, loadgen string, lg *crashLoadgen, it int) (checked, partial int) {
	t.Helper()
	killed := newApp(t, d.root, lg.before)
	var indexes []string
	tasks := 2
	if killed != "" {
		indexes = relIndexes(t, filepath.Join(d.root, killed))
		for _, idx := range indexes {
			id, err := inspect.ParseName(idx)
			if err != nil {
				t.Fatalf("iteration %d: %v", it, err)
			}
			tasks = max(tasks, int(id.Map)+1)
		}
	}
	before := crashLoadgenApps(t, d.root)
	ref := startCrashLoadgen(t, loadgen, d.socket, it, before, "--verify", "--tasks", strconv.Itoa(tasks))
	if err := ref.cmd.Wait(); err != nil {
		t.Fatalf("iteration %d: reference load generator run after the restart: %v\n%s", it, err, ref.out.String())
	}
	refApp := newApp(t, d.root, before)
	if refApp == "" {
		t.Fatalf("iteration %d: the reference run left no application under %s", it, d.root)
	}
	refDirs := map[string]string{} // index file name → directory
	for _, idx := range relIndexes(t, filepath.Join(d.root, refApp)) {
		refDirs[filepath.Base(idx)] = filepath.Dir(idx)
	}
	for _, idx := range indexes {
		checked++
		if err := crashCheckIndex(idx, refDirs); err != nil {
			partial++
			t.Errorf("iteration %d: load generator output: %v", it, err)
		}
	}
	for _, app := range []string{killed, refApp} {
		if app != "" {
			if err := os.RemoveAll(filepath.Join(d.root, app)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return checked, partial
}

// crashCheckIndex opens and verifies the load generator output of index
// and compares its files with the reference run's.
func crashCheckIndex(index string, refDirs map[string]string) error {
	id, err := inspect.ParseName(index)
	if err != nil {
		return err
	}
	m, err := shufflefile.Open(vfs.Default, shufflefile.Flat(filepath.Dir(index)), id, crashChecksum)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Verify(); err != nil {
		return err
	}
	ref, ok := refDirs[filepath.Base(index)]
	if !ok {
		return fmt.Errorf("%s: the reference run committed no output of that name", index)
	}
	if err := relSameFiles(index, ref, crashChecksum.String()); err != nil {
		return fmt.Errorf("%s: %w", index, err)
	}
	return nil
}
