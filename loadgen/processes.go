package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/shuffled/shuffled/client"
)

// A run of several load generator processes (--processes N) is this
// program executed N times with the same workload, each process a member
// told its index by processEnv. The members talk to the run on their
// stdin and stdout, one line at a time: each says "ready" once it has
// connected and built its batch pool, and waits for "go"; it then runs its
// tasks, says "done" and waits for "go" again, so that every member's
// tasks overlap and none verifies or removes its outputs while others'
// tasks still run; then it prints its report as JSON and exits.

// processEnv holds a member's index (0 to N-1).
const processEnv = "SHUFFLED_LOADGEN_PROCESS"

// The lines of the members' barriers.
const (
	lineReady = "ready"
	lineDone  = "done"
	lineGo    = "go"
)

// memberLogLines is how much of a member's log an error quotes.
const memberLogLines = 4

// member is this process's part in a --processes run.
type member struct {
	index int
	in    *bufio.Reader // the run's "go" lines
	out   io.Writer     // the barrier lines, then the report
}

// memberFromEnv returns this process's part in a --processes run if
// processEnv says it is a member, or nil.
func memberFromEnv(stdin io.Reader, stdout io.Writer) (*member, error) {
	v, ok := os.LookupEnv(processEnv)
	if !ok {
		return nil, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return nil, usagef("%s must be a process index >= 0, got %q", processEnv, v)
	}
	return &member{index: i, in: bufio.NewReader(stdin), out: stdout}, nil
}

// await says line to the run and waits for its go.
func (m *member) await(line string) error {
	if _, err := fmt.Fprintln(m.out, line); err != nil {
		return fmt.Errorf("loadgen: process %d: %s: %w", m.index, line, err)
	}
	got, err := m.in.ReadString('\n')
	if err != nil {
		return fmt.Errorf("loadgen: process %d: no go after %s from the run: %w", m.index, line, err)
	}
	if got = strings.TrimSpace(got); got != lineGo {
		return fmt.Errorf("loadgen: process %d: after %s the run said %q, want %q", m.index, line, got, lineGo)
	}
	return nil
}

// memberArgs are the flags of member i: cfg's workload with its share of
// the tasks, a profile or trace file of its own, and a JSON report.
func (c *Config) memberArgs(i int) []string {
	tasks := c.Tasks / c.Processes
	if i < c.Tasks%c.Processes {
		tasks++
	}
	flagBool := func(name string, v bool) string { return "--" + name + "=" + strconv.FormatBool(v) }
	a := []string{
		"--tasks", strconv.Itoa(tasks),
		"--duration", c.Duration.String(),
		"--concurrency", strconv.Itoa(c.Concurrency),
		"--partitions", strconv.Itoa(c.Partitions),
		"--rows", strconv.Itoa(c.Rows),
		"--batches-per-task", strconv.Itoa(c.BatchesPerTask),
		flagBool("no-last-batch", c.NoLastBatch),
		"--schema", c.Schema,
		"--skew", c.SkewString(),
		"--nulls", strconv.FormatFloat(c.Nulls, 'g', -1, 64),
		"--codec", c.Codec,
		"--checksum", c.Checksum,
		"--payload", c.Payload,
		"--data-plane", c.DataPlane,
		flagBool("gpu", c.GPU),
		flagBool("cpu-compress", c.CPUCompress),
		"--seed", strconv.FormatInt(c.Seed, 10),
		"--pool-batches", strconv.Itoa(c.PoolBatches),
		"--socket", c.Socket,
		flagBool("keep", c.Keep),
		flagBool("verify", c.Verify),
		flagBool("encrypt", c.Encrypt),
		"--json",
	}
	if c.CPUProfile != "" {
		a = append(a, "--cpuprofile", c.CPUProfile+"."+strconv.Itoa(i))
	}
	if c.Trace != "" {
		a = append(a, "--trace", c.Trace+"."+strconv.Itoa(i))
	}
	return a
}

// ProcessesReport is what a run of several load generator processes
// measured: their aggregate, over the window from the first process's
// start to the last one's end, and each one's own report. Its JSON field
// names are stable (docs/benchmarks.md); the fields named as Report's
// mean what they do there, summed over the processes unless said.
type ProcessesReport struct {
	// Daemon is "external": the processes drive one daemon at --socket.
	Daemon    string `json:"daemon"`
	Processes int    `json:"processes"`
	// Workload is each process's (concurrency included).
	Workload

	// Volume: ElapsedS is from the first process's start to the last
	// one's end, and the rates are over it.
	Volume
	// ClientCost: the processes' CPU and waits summed; DaemonCPUS is the
	// daemon process's over the whole window (from /proc, -1 if not
	// readable), read once by the run.
	ClientCost

	// The daemon's figures, read by the run before and after every
	// process's tasks, as Report's for an external daemon.
	PeakBytesInFlight  int64   `json:"peak_bytes_in_flight"`
	BytesInFlightLimit int64   `json:"bytes_in_flight_limit"`
	LimiterWaitMs      float64 `json:"limiter_wait_ms"`
	LimiterWaits       int64   `json:"limiter_waits"`
	LimiterAcquires    int64   `json:"limiter_acquires"`
	MultiRunOutputs    int     `json:"multi_run_map_outputs"`
	MarkedCommits      int64   `json:"marked_commits"`
	EarlyMerges        int64   `json:"early_merges"`
	ExistingOutputs    int     `json:"existing_outputs"`
	PeakRSSBytes       int64   `json:"peak_rss_bytes,omitempty"`
	PeakRSSSource      string  `json:"peak_rss_source,omitempty"`

	// Verified: every process verified its outputs, and they passed.
	Verified           bool  `json:"verified"`
	VerifiedMapOutputs int   `json:"verified_map_outputs"`
	VerifiedPartitions int64 `json:"verified_partitions"`

	// PerProcess is each process's own report, in process order; nil
	// where a process reported nothing.
	PerProcess []*Report `json:"per_process"`
}

// memberProc is one member process, seen from the run.
type memberProc struct {
	index  int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	logged chan struct{} // closed once its stderr has ended

	mu   sync.Mutex
	tail []string // the last lines of its stderr
}

// logTail is the last lines of the member's stderr, on one line.
func (m *memberProc) logTail() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.tail) == 0 {
		return "it logged nothing"
	}
	return "its log ends: " + strings.Join(m.tail, " | ")
}

// copyLog copies the member's stderr to w, each line prefixed with the
// process, keeping the last lines.
func (m *memberProc) copyLog(r io.Reader, w io.Writer, wmu *sync.Mutex) {
	defer close(m.logged)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m.mu.Lock()
		m.tail = append(m.tail, line)
		if len(m.tail) > memberLogLines {
			m.tail = m.tail[1:]
		}
		m.mu.Unlock()
		if w != nil {
			wmu.Lock()
			fmt.Fprintf(w, "process %d: %s\n", m.index, line)
			wmu.Unlock()
		}
	}
	io.Copy(io.Discard, r)
}

// expect reads the member's next line and checks that it is want.
func (m *memberProc) expect(want string) error {
	got, err := m.stdout.ReadString('\n')
	if err != nil {
		return fmt.Errorf("loadgen: process %d ended before it said %s", m.index, want)
	}
	if got = strings.TrimSpace(got); got != want {
		return fmt.Errorf("loadgen: process %d said %q, want %q", m.index, got, want)
	}
	return nil
}

// RunProcesses runs cfg's workload from cfg.Processes load generator
// processes at once against the daemon at cfg.Socket: this program, the
// executable at self, started once per process. Their logs go to
// progress, each line prefixed with its process. It returns the aggregate
// report; a process that failed makes an error naming it, beside the
// report of those that did not.
func RunProcesses(ctx context.Context, cfg Config, self string, progress io.Writer) (_ *ProcessesReport, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Socket == "" {
		return nil, usagef("--processes %d drives one daemon that is already running: give --socket PATH", cfg.Processes)
	}
	// A connection of the run's own, for the daemon's figures.
	c, err := client.Dial(ctx, cfg.Socket, client.WithName("shuffled-loadgen"))
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, usagef("--socket %s: no daemon listens there (%v); start one (shuffled serve --socket %s)", cfg.Socket, errors.Unwrap(err), cfg.Socket)
		}
		return nil, fmt.Errorf("loadgen: --socket %s: %w", cfg.Socket, err)
	}
	defer c.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		procs []*memberProc
		logMu sync.Mutex
	)
	// However the run ends, every member is told (its stdin closes: one
	// still waiting at a barrier fails) and reaped.
	defer func() {
		for _, m := range procs {
			m.stdin.Close()
		}
		if err != nil {
			cancel() // kills those still running
		}
		for _, m := range procs {
			<-m.logged
			m.cmd.Wait()
		}
	}()
	for i := range cfg.Processes {
		m := &memberProc{index: i, logged: make(chan struct{})}
		m.cmd = exec.CommandContext(ctx, self, cfg.memberArgs(i)...)
		m.cmd.Env = append(os.Environ(), processEnv+"="+strconv.Itoa(i))
		if m.stdin, err = m.cmd.StdinPipe(); err != nil {
			return nil, err
		}
		out, err := m.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		m.stdout = bufio.NewReader(out)
		logs, err := m.cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		if err := m.cmd.Start(); err != nil {
			return nil, fmt.Errorf("loadgen: --processes: start %s: %w", self, err)
		}
		procs = append(procs, m)
		go m.copyLog(logs, progress, &logMu)
	}
	// failed is a member's failure before its report: its exit and log.
	failed := func(m *memberProc, cause error) error {
		m.stdin.Close()
		<-m.logged
		werr := m.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(werr, &ee) && ee.ExitCode() == ExitUsage {
			m.mu.Lock()
			var last string
			if len(m.tail) > 0 {
				last = m.tail[len(m.tail)-1]
			}
			m.mu.Unlock()
			if last != "" {
				return usagef("process %d: %s", m.index, strings.TrimPrefix(last, "shuffled-loadgen: "))
			}
		}
		return fmt.Errorf("%w (%v): %s", cause, werr, m.logTail())
	}
	release := func() {
		for _, m := range procs {
			fmt.Fprintln(m.stdin, lineGo) // a member that ended is found by expect
		}
	}

	for _, m := range procs {
		if err := m.expect(lineReady); err != nil {
			return nil, failed(m, err)
		}
	}
	before, err := daemonFigures(ctx, c)
	if err != nil {
		return nil, err
	}
	var dcpu *daemonCPU
	if pid, err := peerPID(cfg.Socket); err == nil {
		dcpu = newDaemonCPU(pid)
	}
	release()
	var errs []error
	for _, m := range procs {
		if err := m.expect(lineDone); err != nil {
			errs = append(errs, failed(m, err))
		}
	}
	daemonCPU := time.Duration(-1)
	if dcpu != nil {
		daemonCPU = dcpu.since()
	}
	after, ferr := daemonFigures(ctx, c)
	release()

	reps := make([]*Report, len(procs))
	for i, m := range procs {
		if m.cmd.ProcessState != nil {
			continue // failed above
		}
		var r Report
		derr := json.NewDecoder(m.stdout).Decode(&r)
		io.Copy(io.Discard, m.stdout)
		<-m.logged
		werr := m.cmd.Wait()
		if derr == nil {
			reps[i] = &r
		}
		switch {
		case werr != nil:
			errs = append(errs, fmt.Errorf("loadgen: process %d: %v: %s", m.index, werr, m.logTail()))
		case derr != nil:
			errs = append(errs, fmt.Errorf("loadgen: process %d: its report: %w", m.index, derr))
		}
	}
	if ferr != nil {
		errs = append(errs, ferr)
	}
	return aggregate(&cfg, reps, daemonCPU, before, after), errors.Join(errs...)
}

// aggregate sums the processes' reports (nil where one has none) over the
// window from the first one's start to the last one's end; nil if none
// reported. daemonCPU is the daemon's over the window, -1 if unknown;
// before and after its figures around it.
func aggregate(cfg *Config, reps []*Report, daemonCPU time.Duration, before, after map[string]int64) *ProcessesReport {
	rep := &ProcessesReport{Daemon: "external", Processes: len(reps), Volume: Volume{Partitions: cfg.Partitions},
		ClientCost: ClientCost{CPUAccounting: cpuProcess}, Verified: true, PerProcess: reps}
	some := false
	for _, r := range reps {
		if r == nil {
			rep.Verified = false
			continue
		}
		if !some {
			rep.Workload, rep.StartUnixNs, rep.EndUnixNs = r.Workload, r.StartUnixNs, r.EndUnixNs
			some = true
		}
		rep.StartUnixNs, rep.EndUnixNs = min(rep.StartUnixNs, r.StartUnixNs), max(rep.EndUnixNs, r.EndUnixNs)
		rep.Tasks += r.Tasks
		rep.Rows += r.Rows
		rep.Batches += r.Batches
		rep.SerializedBytes += r.SerializedBytes
		rep.OutputBytes += r.OutputBytes
		rep.add(r.ClientCost)
		rep.MultiRunOutputs += r.MultiRunOutputs
		rep.ExistingOutputs += r.ExistingOutputs
		rep.Verified = rep.Verified && r.Verified
		rep.VerifiedMapOutputs += r.VerifiedMapOutputs
		rep.VerifiedPartitions += r.VerifiedPartitions
	}
	if !some {
		return nil
	}
	s := time.Duration(rep.EndUnixNs - rep.StartUnixNs).Seconds()
	rep.setRates(s)
	if s > 0 {
		rep.ElapsedS = round(s, 3)
	}
	for _, f := range []*float64{&rep.LoadgenCPUS, &rep.LoadgenSetupCPUS, &rep.WorkerS, &rep.WaitOpenS, &rep.WaitWriteS, &rep.WaitCommitS, &rep.ProduceS} {
		*f = round(*f, 3)
	}
	rep.DaemonCPUS = -1
	if daemonCPU >= 0 {
		rep.DaemonCPUS = round(daemonCPU.Seconds(), 3)
	}
	ds := externalStats(after)
	ds.marks(before, after)
	rep.PeakBytesInFlight, rep.BytesInFlightLimit = -1, -1
	rep.LimiterWaitMs, rep.LimiterWaits, rep.LimiterAcquires = -1, -1, -1
	rep.MarkedCommits, rep.EarlyMerges = -1, -1
	if ds.hasLimiter {
		rep.PeakBytesInFlight, rep.BytesInFlightLimit = ds.peak, ds.limit
	}
	if ds.hasWaits {
		rep.LimiterWaitMs, rep.LimiterWaits, rep.LimiterAcquires = ms(ds.wait), ds.waits, ds.acquires
	}
	if ds.hasMarks {
		rep.MarkedCommits, rep.EarlyMerges = ds.marked, ds.early
	}
	rep.PeakRSSBytes, rep.PeakRSSSource = ds.peakRSS, ds.rssSource
	if !cfg.Verify {
		rep.Verified = false
	}
	return rep
}

// WriteJSON writes r as indented JSON.
func (r *ProcessesReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable writes r for people: the aggregate, then a line per process.
func (r *ProcessesReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "%d processes × concurrency %d: %d map tasks × %d batches × %d rows (%s), %d partitions, %s/%s, %s over %s, %s daemon\n",
		r.Processes, r.Concurrency, r.Tasks, r.BatchesPerTask, r.RowsPerBatch, r.Schema, r.Partitions, r.Codec, r.Checksum,
		r.Payload, r.DataPlane, r.Daemon)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(label, format string, args ...any) {
		fmt.Fprintf(tw, "  %s\t"+format+"\n", append([]any{label}, args...)...)
	}
	row("input (serialized)", "%s  %.1f MB/s  %d rows  (first start to last end)", size(r.SerializedBytes), r.ThroughputMBs, r.Rows)
	row("output (on disk)", "%s  %.1f MB/s  compression ratio %.2f", size(r.OutputBytes), r.OutputMBs, r.CompressionRatio)
	row("tasks", "%d in %.2f s  %.1f tasks/s", r.Tasks, r.ElapsedS, r.TasksPerS)
	if r.DaemonCPUS >= 0 {
		row("CPU, split", "load generators %.2f s (their processes, summed), daemon %.2f s (its process, from /proc, over the window)", r.LoadgenCPUS, r.DaemonCPUS)
	} else {
		row("CPU, split", "load generators %.2f s (their processes, summed); the daemon's not readable here", r.LoadgenCPUS)
	}
	row("", "and %.2f s generating and partitioning the batch pools, before the tasks", r.LoadgenSetupCPUS)
	if r.WorkerS > 0 {
		waits := r.WaitOpenS + r.WaitWriteS + r.WaitCommitS
		row("workers", "%.2f s: waiting on the daemon %.2f s (%.0f%%), producing %.2f s", r.WorkerS, waits, 100*waits/r.WorkerS, r.ProduceS)
	}
	for i, p := range r.PerProcess {
		if p == nil {
			row(fmt.Sprintf("process %d", i), "no report")
			continue
		}
		row(fmt.Sprintf("process %d", i), "%.1f MB/s  %d tasks in %.2f s (from %+.3f s)  load generator CPU %.2f s  commit p50 %.1f ms, p99 %.1f ms",
			p.ThroughputMBs, p.Tasks, p.ElapsedS, time.Duration(p.StartUnixNs-r.StartUnixNs).Seconds(), p.LoadgenCPUS, p.CommitP50Ms, p.CommitP99Ms)
	}
	if r.Verified {
		row("verify", "ok: %d map outputs, %d partitions: rows and contents match", r.VerifiedMapOutputs, r.VerifiedPartitions)
	}
	return tw.Flush()
}
