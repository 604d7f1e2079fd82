package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/server"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
)

// runEngine runs cfg in process through a stream-mode writer engine and
// returns its pool (for verify) and result.
func runEngine(t *testing.T, cfg Config) (*pool, runResult) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := writer.New(writer.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	p, err := newPool(context.Background(), &cfg, poolForm{payload: cfg.Payload, batch: cfg.columnar()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	res, err := runTasks(context.Background(), &cfg, p, &engineTarget{cfg: &cfg, e: e, mode: compareModes[streamMode], dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

func TestEngineRunVerifies(t *testing.T) {
	tests := []struct {
		payload, codec, checksum, skew string
		batches                        int
		noLast                         bool // --no-last-batch
	}{
		{PayloadColumnar, "lz4", "ADLER32", "uniform", 1, false},
		{PayloadColumnar, "snappy", "CRC32C", "zipf:1.3", 3, false},
		{PayloadOpaque, "zstd", "CRC32", "uniform", 3, false},
		{PayloadOpaque, "zstd", "CRC32", "uniform", 3, true},
		{PayloadOpaque, "none", "none", "zipf:2", 1, false},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s/%s/%s/%s/batches=%d/no-last=%v", tt.payload, tt.codec, tt.checksum, tt.skew, tt.batches, tt.noLast)
		t.Run(name, func(t *testing.T) {
			cfg := smallConfig()
			cfg.Payload, cfg.Codec, cfg.Checksum, cfg.BatchesPerTask = tt.payload, tt.codec, tt.checksum, tt.batches
			cfg.NoLastBatch = tt.noLast
			var err error
			if cfg.Skew, err = ParseSkew(tt.skew); err != nil {
				t.Fatal(err)
			}
			p, res := runEngine(t, cfg)
			if len(res.tasks) != cfg.Tasks {
				t.Fatalf("%d tasks ran, want %d", len(res.tasks), cfg.Tasks)
			}
			for i, r := range res.tasks {
				if r.task != i || r.runs != tt.batches || r.out <= 0 {
					t.Errorf("task result %d = %+v, want task %d, %d runs, output bytes", i, r, i, tt.batches)
				}
			}
			st, err := verify(context.Background(), &cfg, p, res)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if want := (verifyStats{outputs: cfg.Tasks, partitions: int64(cfg.Tasks * cfg.Partitions)}); st != want {
				t.Errorf("verify compared %+v, want %+v", st, want)
			}
		})
	}
}

func TestVerifyFindsDifferences(t *testing.T) {
	cfg := smallConfig()
	cfg.Codec, cfg.Checksum = "none", "none" // only the content can tell
	p, res := runEngine(t, cfg)

	other := cfg
	other.Seed++
	op, err := newPool(context.Background(), &other, poolForm{payload: other.Payload})
	if err != nil {
		t.Fatal(err)
	}
	defer op.close()
	_, err = verify(context.Background(), &other, op, res)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "map output 0/") || !strings.Contains(err.Error(), "partition") {
		t.Errorf("verify against another seed's batches = %v, want ErrMismatch naming the map output and partition", err)
	}

	// Flip one byte in the middle of task 2's partition 5.
	id := shufflefile.ID{Shuffle: 0, Map: 2}
	m, err := shufflefile.Open(vfs.Default, shufflefile.Flat(res.tasks[2].dir), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	const q = 5
	if m.Lengths[q] == 0 {
		t.Fatalf("%v: partition %d is empty", id, q)
	}
	data, err := os.ReadFile(m.DataPath)
	if err != nil {
		t.Fatal(err)
	}
	data[m.Offsets[q]+m.Lengths[q]/2] ^= 0x40
	if err := os.WriteFile(m.DataPath, data, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = verify(context.Background(), &cfg, p, res)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "map output 0/2") || !strings.Contains(err.Error(), fmt.Sprintf("partition %d", q)) {
		t.Errorf("verify of a changed data file = %v, want ErrMismatch naming map output 0/2 and partition %d", err, q)
	}
}

// mainRun runs Main and returns its exit code, stdout and stderr.
func mainRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// small are the flags of a workload of a few hundred milliseconds.
var small = []string{"--tasks", "6", "--concurrency", "2", "--partitions", "16", "--rows", "2000", "--pool-batches", "3"}

func TestMainEmbedded(t *testing.T) {
	leakcheck.Check(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	tests := []struct {
		args   []string
		runs   float64
		marked bool // each task's last batch marked LAST (the default)
	}{
		{[]string{"--batches-per-task", "1"}, 1, true},
		{[]string{"--batches-per-task", "3", "--payload", "opaque", "--codec", "zstd"}, 3, true},
		{[]string{"--batches-per-task", "2", "--data-plane", "inline", "--skew", "zipf:1.2", "--schema", "strings"}, 2, true},
		{[]string{"--batches-per-task", "2", "--data-plane", "inline", "--payload", "opaque", "--checksum", "none"}, 2, true},
		{[]string{"--batches-per-task", "2", "--no-last-batch"}, 2, false},
		// Encrypted: verify decrypts each partition (IV, AES-CTR) before it decodes.
		{[]string{"--batches-per-task", "3", "--encrypt", "--payload", "opaque", "--codec", "snappy"}, 3, true},
		{[]string{"--batches-per-task", "2", "--encrypt", "--no-last-batch", "--checksum", "CRC32C"}, 2, false},
		{[]string{"--batches-per-task", "2", "--encrypt", "--payload", "kudo", "--codec", "zstd"}, 2, true},
	}
	for _, tt := range tests {
		args := append(append(append([]string{}, small...), "--verify", "--json"), tt.args...)
		code, out, errOut := mainRun(t, args...)
		if code != ExitOK {
			t.Errorf("Main(%q) = %d, stderr %q; want 0", args, code, errOut)
			continue
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Errorf("Main(%q) printed %q: %v", args, out, err)
			continue
		}
		for _, field := range []string{
			"tasks", "partitions", "rows", "serialized_bytes", "output_bytes", "throughput_mb_s",
			"commit_p50_ms", "commit_p95_ms", "commit_p99_ms", "commit_max_ms", "peak_bytes_in_flight",
			"compression_ratio", "tasks_per_s", "limiter_wait_ms", "runs_per_map_output", "peak_rss_bytes",
			"start_unix_ns", "end_unix_ns",
		} {
			v, ok := rep[field].(float64)
			if !ok || v < 0 || v == 0 && field != "limiter_wait_ms" {
				t.Errorf("Main(%q): JSON field %q = %v, want a positive number", args, field, rep[field])
			}
		}
		want := map[string]any{
			"tasks": 6.0, "partitions": 16.0, "rows": 6 * 2000 * tt.runs, "daemon": "embedded",
			"verified": true, "verified_map_outputs": 6.0, "verified_partitions": 96.0,
			"runs_per_map_output": tt.runs, "peak_rss_source": rssSelf, "existing_outputs": 0.0,
			"multi_run_map_outputs": 0.0, "marked_commits": 0.0, "early_merges": 0.0,
			"encrypt": slices.Contains(tt.args, "--encrypt"),
		}
		if tt.runs > 1 {
			want["multi_run_map_outputs"] = 6.0
		}
		if tt.marked {
			// Every task's runs are in memory: each merge of several
			// starts in the marked batch.
			want["marked_commits"] = 6.0
			want["early_merges"] = want["multi_run_map_outputs"]
		}
		for k, v := range want {
			if rep[k] != v {
				t.Errorf("Main(%q): JSON %q = %v, want %v", args, k, rep[k], v)
			}
		}
		for _, field := range []string{
			"loadgen_cpu_s", "daemon_cpu_s", "loadgen_setup_cpu_s", "worker_s",
			"wait_open_s", "wait_write_s", "wait_commit_s", "produce_s",
		} {
			if _, ok := rep[field].(float64); !ok {
				t.Errorf("Main(%q): JSON field %q = %v, want a number", args, field, rep[field])
			}
		}
		var r Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		checkClientSide(t, &r, cpuWorkerThreads)
		if !strings.Contains(errOut, "run: 6/6 tasks") {
			t.Errorf("Main(%q) progress %q, want a final 6/6 tasks line", args, errOut)
		}
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("the embedded daemon left %d entries in TMPDIR, e.g. %s", len(ents), ents[0].Name())
	}
}

func TestMainTable(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv("TMPDIR", t.TempDir())
	code, out, errOut := mainRun(t, append(small, "--verify")...)
	if code != ExitOK {
		t.Fatalf("Main = %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"6 map tasks × 2 batches × 2000 rows", "input (serialized)", "commit latency",
		"CPU, split", "load generator", "(its task workers' threads), embedded daemon", "generating and partitioning the batch pool",
		"workers", "waiting on the daemon", "producing", "p99", "bytes in flight", "limiter wait", "runs per map output", "peak RSS", "verify", "ok: 6 map outputs, 96 partitions"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestMainBadFlags(t *testing.T) {
	leakcheck.Check(t)
	nobody := filepath.Join(t.TempDir(), "nobody.sock")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "0"}, "shuffled-loadgen: --partitions must be >= 1, got 0\n"},
		{[]string{"--codec", "lz5"}, "shuffled-loadgen: --codec must be one of none, lz4, zstd, snappy, got \"lz5\"\n"},
		{[]string{"--rows", "-5"}, "shuffled-loadgen: --rows must be >= 1, got -5\n"},
		{[]string{"--compare", "--encrypt"}, "shuffled-loadgen: --encrypt applies to a daemon run; drop it or --compare\n"},
		{[]string{"--processes", "0"}, "shuffled-loadgen: --processes must be >= 1, got 0\n"},
		{[]string{"--processes", "2"}, "shuffled-loadgen: --processes 2 drives one daemon that is already running: give --socket PATH (shuffled serve); the embedded daemon lives in one process\n"},
		{[]string{"--processes", "2", "--daemon-bin", "/bin/shuffled"}, "shuffled-loadgen: --processes 2 drives one daemon that is already running: give --socket PATH (shuffled serve) instead of --daemon-bin /bin/shuffled\n"},
		{[]string{"--processes", "3", "--socket", nobody, "--tasks", "2"}, "shuffled-loadgen: --processes 3 shares out --tasks 2: give at least one task per process\n"},
		{[]string{"--processes", "2", "--compare"}, "shuffled-loadgen: --processes 2 drives a daemon; drop it or --compare\n"},
		{[]string{"--processes", "2", "--socket", nobody}, "shuffled-loadgen: --socket " + nobody + ": no daemon listens there (dial unix " + nobody + ": connect: no such file or directory); start one (shuffled serve --socket " + nobody + ")\n"},
		{[]string{"--socket", nobody}, "shuffled-loadgen: --socket " + nobody + ": no daemon listens there (dial unix " + nobody + ": connect: no such file or directory); start one (shuffled serve --socket " + nobody + ") or drop --socket to run an embedded daemon\n"},
	}
	for _, tt := range tests {
		code, out, errOut := mainRun(t, tt.args...)
		if code != ExitUsage || out != "" || errOut != tt.want {
			t.Errorf("Main(%q) = %d, stdout %q, stderr %q; want %d and stderr %q", tt.args, code, out, errOut, ExitUsage, tt.want)
		}
	}
	if code, _, errOut := mainRun(t, "-h"); code != ExitOK || !strings.Contains(errOut, "-batches-per-task") {
		t.Errorf("Main(-h) = %d, stderr %q; want 0 and the flags", code, errOut)
	}
}

func TestRunKeep(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv("TMPDIR", t.TempDir())
	root := t.TempDir()
	cfg, err := ParseArgs(append(small, "--root", root), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ents := outputsIn(root); len(ents) != 0 || rep.Kept != "" {
		t.Errorf("without --keep, the root holds %d entries and Kept = %q; want nothing", len(ents), rep.Kept)
	}
	cfg.Keep = true
	if rep, err = Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Kept, root+string(filepath.Separator)) {
		t.Fatalf("Kept = %q, want a directory under %s", rep.Kept, root)
	}
	for i := range cfg.Tasks {
		id := shufflefile.ID{Shuffle: 0, Map: int64(i)}
		found, _ := filepath.Glob(filepath.Join(rep.Kept, "*", shufflefile.IndexName(id)))
		if len(found) != 1 {
			t.Errorf("%v: %d index files kept under %s, want 1", id, len(found), rep.Kept)
		}
	}
}

// startServer starts a daemon in the test, as an external one.
func startServer(t *testing.T) (socket, root string) {
	t.Helper()
	dir := t.TempDir()
	socket, root = filepath.Join(dir, "d.sock"), filepath.Join(dir, "root")
	srv, err := server.New(server.Config{SocketPath: socket, Root: root}, server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := unixsock.Listen(socket, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	return socket, root
}

func TestRunExternal(t *testing.T) {
	leakcheck.Check(t)
	socket, root := startServer(t)
	cfg, err := ParseArgs(append(small, "--socket", socket, "--verify", "--batches-per-task", "3"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Daemon != "external" || !rep.Verified || rep.PeakRSSSource != rssDaemon || rep.PeakRSSBytes <= 0 ||
		rep.PeakBytesInFlight <= 0 || rep.BytesInFlightLimit <= 0 || rep.LimiterWaits < 0 || rep.RunsPerMapOutput != 3 {
		t.Errorf("report of an external run = %+v; want verified, the daemon's RSS and limiter figures, 3 runs", rep)
	}
	checkClientSide(t, rep, cpuProcess)
	// A daemon that offers removal loses the outputs; one that does not
	// keeps them, and the report says so.
	ents := outputsIn(root)
	switch {
	case rep.Kept == "" && len(ents) != 0:
		t.Errorf("the application's outputs stayed in the daemon's root: %d entries, e.g. %s", len(ents), ents[0].Name())
	case rep.Kept != "" && (len(ents) != 1 || !strings.Contains(rep.Kept, ents[0].Name())):
		t.Errorf("Kept = %q, the daemon's root holds %v; want the application named", rep.Kept, ents)
	}
}

func TestCompare(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv("TMPDIR", t.TempDir())
	cfg, err := ParseArgs(append(small, "--compare", "--reps", "1", "--batches-per-task", "2"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	c, err := Compare(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Modes) != 3 {
		t.Fatalf("%d modes, want 3", len(c.Modes))
	}
	stream, legacy, ceiling := c.Modes[0], c.Modes[1], c.Modes[2]
	if stream.Mode != "stream" || legacy.Mode != "legacy" || ceiling.Mode != "ceiling" {
		t.Errorf("modes %q %q %q, want stream, legacy, ceiling", stream.Mode, legacy.Mode, ceiling.Mode)
	}
	if stream.OutputBytes <= 0 || stream.OutputBytes != legacy.OutputBytes || ceiling.OutputBytes != stream.OutputBytes {
		t.Errorf("output bytes stream %d, legacy %d, ceiling %d; want all equal and > 0", stream.OutputBytes, legacy.OutputBytes, ceiling.OutputBytes)
	}
	if stream.RunsPerMapOutput != 2 {
		t.Errorf("stream runs per map output %v, want 2", stream.RunsPerMapOutput)
	}
	for _, m := range c.Modes {
		if m.ThroughputMBs <= 0 || len(m.RepsMBs) != 1 || m.MBPerCPUS <= 0 {
			t.Errorf("%s: %v MB/s over %d repetitions, %v MB per CPU s; want > 0 over 1, > 0", m.Mode, m.ThroughputMBs, len(m.RepsMBs), m.MBPerCPUS)
		}
	}
	if c.StreamOverLegacy <= 0 || c.StreamOverCeiling <= 0 || c.StreamOverLegacyPerCPU <= 0 || c.StreamOverCeilingPerCPU <= 0 || c.Tasks != 6 || c.SerializedBytes <= 0 {
		t.Errorf("comparison %+v: want positive ratios, 6 tasks, serialized bytes", c)
	}
	var table bytes.Buffer
	if err := c.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stream/legacy", "stream/ceiling", "legacy", "median of 1"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("compare table lacks %q:\n%s", want, table.String())
		}
	}
	for _, label := range []string{"stream 1/1", "legacy 1/1", "ceiling 1/1"} {
		if !strings.Contains(progress.String(), label) {
			t.Errorf("progress %q lacks %q", progress.String(), label)
		}
	}
}

func TestRunTasksBounds(t *testing.T) {
	cfg := smallConfig()
	cfg.Tasks, cfg.Duration = 3, time.Hour
	p, res := runEngine(t, cfg)
	if len(res.tasks) != 3 {
		t.Errorf("tasks 3 within an hour ran %d tasks, want 3", len(res.tasks))
	}
	// The in-process writer's workers are not split from it: their calls'
	// whole wall time counts as waits.
	r := newReport(&cfg, p, res, daemonStats{})
	if r.CPUAccounting != cpuNone || r.LoadgenCPUS != -1 || r.DaemonCPUS != -1 {
		t.Errorf("in-process run: cpu_accounting %q, loadgen_cpu_s %v, daemon_cpu_s %v; want none, -1, -1", r.CPUAccounting, r.LoadgenCPUS, r.DaemonCPUS)
	}
	if w := res.workers; w.wall <= 0 || w.cpu != 0 || w.write <= 0 || w.commit <= 0 || w.waits() > w.wall {
		t.Errorf("in-process run: workers %+v: want no CPU, positive write and commit waits within their wall time", w)
	}
	// A duration already over starts nothing new: at most one task per
	// slot may have started before the clock moved.
	cfg.Tasks, cfg.Duration = 0, time.Nanosecond
	if _, res := runEngine(t, cfg); len(res.tasks) > cfg.Concurrency {
		t.Errorf("a duration of 1ns ran %d tasks, want at most %d", len(res.tasks), cfg.Concurrency)
	}
}

// TestComparisonRatios checks that the ratios pair the modes within each
// repetition: a load that slows a whole repetition down leaves them be.
func TestComparisonRatios(t *testing.T) {
	cfg := smallConfig()
	cfg.Reps = 3
	p := &pool{batches: make([]*poolBatch, 1)}
	run := func(mb, seconds, cpu float64) runResult {
		return runResult{
			tasks:   []taskResult{{serialized: int64(mb * 1e6)}},
			elapsed: time.Duration(seconds * float64(time.Second)),
			cpu:     time.Duration(cpu * float64(time.Second)),
		}
	}
	// Repetition k: stream, legacy, ceiling. The second repetition ran on
	// a machine four times as busy.
	runs := [][]runResult{
		{run(100, 1, 1), run(100, 4, 1), run(100, 1, 1)},       // stream: 100, 25, 100 MB/s
		{run(100, 2, 2), run(100, 8, 2), run(100, 3, 2)},       // legacy: 50, 12.5, 33.3 MB/s
		{run(100, 0.5, 0.5), run(100, 2, 0.5), run(100, 1, 1)}, // ceiling: 200, 50, 100 MB/s
	}
	c := newComparison(&cfg, p, 2, runs)
	want := []struct {
		mode        string
		mbs, perCPU float64
	}{{"stream", 100, 100}, {"legacy", 33.3, 50}, {"ceiling", 100, 200}}
	for i, w := range want {
		if m := c.Modes[i]; m.Mode != w.mode || m.ThroughputMBs != w.mbs || m.MBPerCPUS != w.perCPU {
			t.Errorf("mode %d = %s %v MB/s %v MB per CPU s, want %s %v %v", i, m.Mode, m.ThroughputMBs, m.MBPerCPUS, w.mode, w.mbs, w.perCPU)
		}
	}
	// Per repetition stream/legacy is 2, 2, 3.003: the median is 2, where
	// the ratio of the medians (100/33.3) would say 3.
	if c.StreamOverLegacy != 2 || c.StreamOverCeiling != 0.5 || c.StreamOverLegacyPerCPU != 2 || c.StreamOverCeilingPerCPU != 0.5 {
		t.Errorf("ratios stream/legacy %v (per CPU %v), stream/ceiling %v (per CPU %v); want 2 (2), 0.5 (0.5)",
			c.StreamOverLegacy, c.StreamOverLegacyPerCPU, c.StreamOverCeiling, c.StreamOverCeilingPerCPU)
	}
}

// outputsIn lists what a daemon's root holds besides the daemon's own
// registry files (which keep the owners of removed applications a while).
func outputsIn(root string) []os.DirEntry {
	ents, _ := os.ReadDir(root)
	var out []os.DirEntry
	for _, e := range ents {
		if e.Name() != disks.RegistryName && e.Name() != disks.RegistryLogName {
			out = append(out, e)
		}
	}
	return out
}

// checkClientSide checks a report's load-generator figures: present, not
// negative, the waits within the workers' time and that within elapsed
// time × concurrency.
func checkClientSide(t *testing.T, r *Report, accounting string) {
	t.Helper()
	const slack = 0.005 // each figure is rounded to the millisecond
	if r.CPUAccounting != accounting {
		t.Errorf("cpu_accounting = %q, want %q", r.CPUAccounting, accounting)
	}
	for name, v := range map[string]float64{
		"loadgen_cpu_s": r.LoadgenCPUS, "loadgen_setup_cpu_s": r.LoadgenSetupCPUS, "wait_open_s": r.WaitOpenS,
		"wait_write_s": r.WaitWriteS, "wait_commit_s": r.WaitCommitS, "produce_s": r.ProduceS,
	} {
		if v < 0 {
			t.Errorf("%s = %v, want ≥ 0", name, v)
		}
	}
	if r.WorkerS <= 0 || r.WorkerS > r.ElapsedS*float64(r.Concurrency)+slack {
		t.Errorf("worker_s = %v, want > 0 and ≤ elapsed_s %v × concurrency %d", r.WorkerS, r.ElapsedS, r.Concurrency)
	}
	waits := r.WaitOpenS + r.WaitWriteS + r.WaitCommitS
	if waits > r.WorkerS+slack {
		t.Errorf("waits %v (open %v, write %v, commit %v) exceed worker_s %v", waits, r.WaitOpenS, r.WaitWriteS, r.WaitCommitS, r.WorkerS)
	}
	if d := waits + r.ProduceS - r.WorkerS; d > slack || d < -slack {
		t.Errorf("waits %v + produce_s %v = %v, want worker_s %v", waits, r.ProduceS, waits+r.ProduceS, r.WorkerS)
	}
	// A worker's thread runs no longer than the worker lives.
	if accounting == cpuWorkerThreads && r.LoadgenCPUS > r.WorkerS+slack {
		t.Errorf("loadgen_cpu_s %v exceeds worker_s %v", r.LoadgenCPUS, r.WorkerS)
	}
	switch accounting {
	case cpuWorkerThreads:
		if r.DaemonCPUS < 0 || r.CPUS > 0 && math.Abs(r.LoadgenCPUS+r.DaemonCPUS-r.CPUS) > slack {
			t.Errorf("loadgen_cpu_s %v + daemon_cpu_s %v, want cpu_s %v", r.LoadgenCPUS, r.DaemonCPUS, r.CPUS)
		}
	case cpuProcess:
		if r.CPUS != 0 || r.DaemonCPUS < 0 && r.DaemonCPUS != -1 {
			t.Errorf("cpu_s %v, daemon_cpu_s %v: want cpu_s omitted and daemon_cpu_s ≥ 0 or -1", r.CPUS, r.DaemonCPUS)
		}
	}
}

func TestParseProcStatCPU(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 75.
	line := []byte("4242 (shuffled (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 12345 1000 200\n")
	got, err := parseProcStatCPU(line)
	if err != nil || got != 3250*time.Millisecond {
		t.Errorf("parseProcStatCPU = %v, %v; want 3.25s", got, err)
	}
	for _, bad := range []string{"4242 shuffled S 1", "4242 (s) S 1 2 3", "4242 (s) S 1 4242 4242 0 -1 4194560 100 0 0 0 x 75 0"} {
		if _, err := parseProcStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseProcStatCPU(%q) = nil error, want one", bad)
		}
	}
	// This process's own, read from /proc.
	if c, err := processCPU(os.Getpid()); err != nil || c < 0 {
		t.Errorf("processCPU(self) = %v, %v; want a CPU time", c, err)
	}
}
