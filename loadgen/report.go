package loadgen

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"
)

// Workload echoes the configuration a report measured. Its JSON field
// names are stable (docs/benchmarks.md).
type Workload struct {
	Schema         string  `json:"schema"`
	Skew           string  `json:"skew"`
	Nulls          float64 `json:"nulls"`
	Codec          string  `json:"codec"`
	Checksum       string  `json:"checksum"`
	Encrypt        bool    `json:"encrypt"`
	Payload        string  `json:"payload"`
	DataPlane      string  `json:"data_plane"`
	Seed           int64   `json:"seed"`
	Concurrency    int     `json:"concurrency"`
	BatchesPerTask int     `json:"batches_per_task"`
	RowsPerBatch   int     `json:"rows_per_batch"`
	PoolBatches    int     `json:"pool_batches"`
	// PoolBytes is the payload bytes of the batch pool the load generator
	// holds (in Go memory, or in sealed memfds with --data-plane memfd).
	PoolBytes int64 `json:"pool_bytes"`
}

func workloadOf(cfg *Config, p *pool) Workload {
	return Workload{
		Schema: cfg.Schema, Skew: cfg.SkewString(), Nulls: cfg.Nulls, Codec: cfg.Codec, Checksum: cfg.Checksum, Encrypt: cfg.Encrypt,
		Payload: cfg.Payload, DataPlane: cfg.DataPlane, Seed: cfg.Seed, Concurrency: cfg.Concurrency,
		BatchesPerTask: cfg.BatchesPerTask, RowsPerBatch: cfg.Rows,
		PoolBatches: len(p.batches), PoolBytes: p.bytes,
	}
}

// Volume is what a run's tasks moved and how fast, part of Report and of
// ProcessesReport.
type Volume struct {
	Tasks      int   `json:"tasks"`
	Partitions int   `json:"partitions"`
	Rows       int64 `json:"rows"`
	Batches    int64 `json:"batches"`
	// SerializedBytes is the uncompressed input: the partition blocks the
	// daemon compresses. OutputBytes is what the committed data files hold.
	SerializedBytes  int64   `json:"serialized_bytes"`
	OutputBytes      int64   `json:"output_bytes"`
	CompressionRatio float64 `json:"compression_ratio"`
	ElapsedS         float64 `json:"elapsed_s"`
	// StartUnixNs and EndUnixNs are when the tasks started and ended, in
	// nanoseconds since the Unix epoch: several processes' windows
	// (--processes) line up exactly.
	StartUnixNs int64 `json:"start_unix_ns"`
	EndUnixNs   int64 `json:"end_unix_ns"`
	// ThroughputMBs is serialized (input) MB per second of wall time.
	ThroughputMBs float64 `json:"throughput_mb_s"`
	OutputMBs     float64 `json:"output_mb_s"`
	TasksPerS     float64 `json:"tasks_per_s"`
}

// setRates derives the compression ratio and, over s seconds, the rates.
func (v *Volume) setRates(s float64) {
	if v.OutputBytes > 0 {
		v.CompressionRatio = round(float64(v.SerializedBytes)/float64(v.OutputBytes), 3)
	}
	if s > 0 {
		v.ThroughputMBs = round(float64(v.SerializedBytes)/s/1e6, 1)
		v.OutputMBs = round(float64(v.OutputBytes)/s/1e6, 1)
		v.TasksPerS = round(float64(v.Tasks)/s, 2)
	}
}

// ClientCost is the load generator's side of a run, part of Report and of
// ProcessesReport.
type ClientCost struct {
	// LoadgenCPUS is the client side's CPU during the tasks (framing,
	// sending, waiting calls' own work): with a daemon in another process,
	// this whole process's; embedded, the task workers' threads' alone
	// (CPUAccounting says which). DaemonCPUS is the daemon's: embedded,
	// the rest of this process (the connections' readers and the Go
	// runtime's GC workers included); otherwise the daemon process's from
	// /proc, -1 if this process cannot read it. LoadgenSetupCPUS is the
	// CPU generating and partitioning the pool's batches, before the
	// tasks (not in either).
	LoadgenCPUS      float64 `json:"loadgen_cpu_s"`
	DaemonCPUS       float64 `json:"daemon_cpu_s"`
	CPUAccounting    string  `json:"cpu_accounting"`
	LoadgenSetupCPUS float64 `json:"loadgen_setup_cpu_s"`
	// The task workers' time, summed over the workers (at most elapsed
	// time × concurrency): WorkerS in all, the waits on the daemon (each
	// call's wall time less the worker's CPU during it: the answer to
	// Open, to each batch write, to Commit), and ProduceS, the rest.
	WorkerS     float64 `json:"worker_s"`
	WaitOpenS   float64 `json:"wait_open_s"`
	WaitWriteS  float64 `json:"wait_write_s"`
	WaitCommitS float64 `json:"wait_commit_s"`
	ProduceS    float64 `json:"produce_s"`
}

// add sums o's client-side times into c (not the daemon's CPU or the
// accounting, which are the run's).
func (c *ClientCost) add(o ClientCost) {
	c.LoadgenCPUS += o.LoadgenCPUS
	c.LoadgenSetupCPUS += o.LoadgenSetupCPUS
	c.WorkerS += o.WorkerS
	c.WaitOpenS += o.WaitOpenS
	c.WaitWriteS += o.WaitWriteS
	c.WaitCommitS += o.WaitCommitS
	c.ProduceS += o.ProduceS
}

// Report is what a daemon run measured. Its JSON field names are stable
// (docs/benchmarks.md); sizes are bytes, rates use MB = 10^6 bytes.
type Report struct {
	// Daemon is "embedded", "child" (--daemon-bin) or "external".
	Daemon string `json:"daemon"`
	// DaemonReadyMs is a child daemon's time from exec to its READY
	// notification.
	DaemonReadyMs float64 `json:"daemon_ready_ms,omitempty"`
	Workload

	Volume
	// CPUS is the CPU time, user and system, this process used during the
	// run, and MBPerCPUS serialized MB per CPU second: with the embedded
	// daemon, what the daemon and the load generator cost together, a
	// figure that other load on the machine disturbs less than wall time.
	// Both are omitted for an external daemon.
	CPUS      float64 `json:"cpu_s,omitempty"`
	MBPerCPUS float64 `json:"mb_per_cpu_s,omitempty"`
	// Cores is the CPUs this process may run on (nproc); CoresUsed the
	// cores the run had on average, its CPU seconds (this process's and a
	// child or external daemon's, where readable) over its wall seconds, 0
	// when unknown. Well under Cores, the machine was busy with other work
	// or the workload could not keep every core busy, and the MB/s figures
	// read low against a run that had them all: MB per CPU second is the
	// figure to compare then.
	Cores     int     `json:"cores"`
	CoresUsed float64 `json:"cores_used,omitempty"`

	// ClientCost is the load generator's own cost, beside the daemon's,
	// so that a run shows whether it measured the daemon or its client.
	ClientCost

	// Commit latency: from the Commit call to its result.
	CommitP50Ms float64 `json:"commit_p50_ms"`
	CommitP95Ms float64 `json:"commit_p95_ms"`
	CommitP99Ms float64 `json:"commit_p99_ms"`
	CommitMaxMs float64 `json:"commit_max_ms"`
	// Task latency: from Open to the commit result.
	TaskP50Ms float64 `json:"task_p50_ms"`
	TaskP99Ms float64 `json:"task_p99_ms"`
	// FirstBatchMs is the latency of the run's first batch write, from the
	// call to the daemon's acceptance: with a GPU daemon, what its set-up
	// on first use (a context, staging buffers) costs.
	FirstBatchMs float64 `json:"first_batch_ms"`

	// With --gpu: the device, and the rate of the partition kernels over
	// the pool's batches (each Partition call whole: kernels, scratch,
	// offsets back); with --verify also the host partitioner's rate on the
	// same batches, single-threaded, and the rows whose partition the two
	// agreed on, row for row.
	GPUDevice               string  `json:"gpu_device,omitempty"`
	GPUCompress             bool    `json:"gpu_compress,omitempty"`
	GPUPartitionRowsPerS    float64 `json:"gpu_partition_rows_per_s,omitempty"`
	CPUPartitionRowsPerS    float64 `json:"cpu_partition_rows_per_s,omitempty"`
	GPUPartitionCheckedRows int64   `json:"gpu_partition_checked_rows,omitempty"`

	// Limiter figures; -1 when an external daemon does not report them.
	PeakBytesInFlight  int64   `json:"peak_bytes_in_flight"`
	BytesInFlightLimit int64   `json:"bytes_in_flight_limit"`
	LimiterWaitMs      float64 `json:"limiter_wait_ms"`
	LimiterWaits       int64   `json:"limiter_waits"`
	LimiterAcquires    int64   `json:"limiter_acquires"`

	RunsPerMapOutput float64 `json:"runs_per_map_output"`
	MaxRuns          int     `json:"max_runs_per_map_output"`
	// MultiRunOutputs: map outputs of several runs. MarkedCommits: map
	// outputs committed with their last batch marked LAST; EarlyMerges:
	// those of several runs whose merge started in that batch (the
	// daemon's Stats before and after the tasks; -1 if it reports
	// neither).
	MultiRunOutputs int   `json:"multi_run_map_outputs"`
	MarkedCommits   int64 `json:"marked_commits"`
	EarlyMerges     int64 `json:"early_merges"`
	// ExistingOutputs counts commits that found the map output already
	// committed (Spark's first-commit-wins); 0 in a clean run.
	ExistingOutputs int `json:"existing_outputs"`

	// PeakRSSBytes is the daemon's peak resident set. For the embedded
	// daemon it is getrusage(RUSAGE_SELF) ru_maxrss of this process, load
	// generator included (PeakRSSSource "loadgen-process"); for an external
	// daemon its peak_rss_bytes figure ("daemon"), omitted if it has none.
	PeakRSSBytes  int64  `json:"peak_rss_bytes,omitempty"`
	PeakRSSSource string `json:"peak_rss_source,omitempty"`
	// DaemonPeak* are the peaks, while the tasks ran, of a daemon in a
	// process of its own (a child, or an external one whose /proc this
	// process may read), sampled from /proc/PID/status every 10 ms: VmRSS,
	// and of it RssShmem (the memfd pages it maps) and RssAnon. Omitted
	// for the embedded daemon.
	DaemonPeakVmRSSBytes    int64 `json:"daemon_peak_vmrss_bytes,omitempty"`
	DaemonPeakRssShmemBytes int64 `json:"daemon_peak_rss_shmem_bytes,omitempty"`
	DaemonPeakRssAnonBytes  int64 `json:"daemon_peak_rss_anon_bytes,omitempty"`

	// Verified is set when the run was verified; VerifiedPartitions counts
	// the partitions compared.
	Verified           bool  `json:"verified"`
	VerifiedMapOutputs int   `json:"verified_map_outputs"`
	VerifiedPartitions int64 `json:"verified_partitions"`

	// Kept names where the committed outputs were left, with --keep.
	Kept string `json:"kept,omitempty"`
}

// daemonStats are the daemon-side figures of a run.
type daemonStats struct {
	peak, limit          int64
	wait                 time.Duration
	waits, acquires      int64
	peakRSS              int64
	rssSource            string
	hasLimiter, hasWaits bool
	marked, early        int64 // commits marked LAST, early merges, during the tasks
	hasMarks             bool
}

func newReport(cfg *Config, p *pool, r runResult, ds daemonStats) *Report {
	rep := &Report{
		Workload: workloadOf(cfg, p),
		Volume:   Volume{Tasks: len(r.tasks), Partitions: cfg.Partitions, ElapsedS: r.elapsed.Seconds()},
	}
	if !r.start.IsZero() {
		rep.StartUnixNs, rep.EndUnixNs = r.start.UnixNano(), r.start.Add(r.elapsed).UnixNano()
	}
	commits := make([]time.Duration, len(r.tasks))
	elapsed := make([]time.Duration, len(r.tasks))
	for i, t := range r.tasks {
		rep.Rows += t.rows
		rep.SerializedBytes += t.serialized
		rep.OutputBytes += t.out
		rep.RunsPerMapOutput += float64(t.runs)
		rep.MaxRuns = max(rep.MaxRuns, t.runs)
		if t.runs >= 2 {
			rep.MultiRunOutputs++
		}
		if t.existing {
			rep.ExistingOutputs++
		}
		commits[i], elapsed[i] = t.commit, t.elapsed
	}
	rep.Batches = int64(len(r.tasks)) * int64(cfg.BatchesPerTask)
	if rep.Tasks > 0 {
		rep.RunsPerMapOutput /= float64(rep.Tasks)
	}
	rep.setRates(rep.ElapsedS)
	if c := r.cpu.Seconds(); c > 0 {
		rep.CPUS = round(c, 3)
		rep.MBPerCPUS = round(float64(rep.SerializedBytes)/c/1e6, 1)
	}
	rep.clientSide(r)
	rep.Cores = runtime.NumCPU()
	rep.CoresUsed = coresUsed(rep)
	rep.ElapsedS = round(rep.ElapsedS, 3)
	rep.CommitP50Ms = ms(percentile(commits, 50))
	rep.CommitP95Ms = ms(percentile(commits, 95))
	rep.CommitP99Ms = ms(percentile(commits, 99))
	rep.CommitMaxMs = ms(percentile(commits, 100))
	rep.TaskP50Ms = ms(percentile(elapsed, 50))
	rep.TaskP99Ms = ms(percentile(elapsed, 99))
	rep.FirstBatchMs = ms(r.firstBatch)
	if dp := p.dev; dp != nil {
		rep.GPUDevice = dp.dev.Name()
		rep.GPUCompress = p.cfg.GPU && !p.cfg.CPUCompress && p.cfg.Codec == "lz4"
		if dp.gpuTime > 0 {
			rep.GPUPartitionRowsPerS = round(float64(dp.rows)/dp.gpuTime.Seconds(), 0)
		}
		if dp.cpuTime > 0 {
			rep.CPUPartitionRowsPerS = round(float64(dp.checkedRows)/dp.cpuTime.Seconds(), 0)
		}
		rep.GPUPartitionCheckedRows = dp.checkedRows
	}

	rep.PeakBytesInFlight, rep.BytesInFlightLimit = -1, -1
	rep.LimiterWaitMs, rep.LimiterWaits, rep.LimiterAcquires = -1, -1, -1
	if ds.hasLimiter {
		rep.PeakBytesInFlight, rep.BytesInFlightLimit = ds.peak, ds.limit
	}
	rep.MarkedCommits, rep.EarlyMerges = -1, -1
	if ds.hasMarks {
		rep.MarkedCommits, rep.EarlyMerges = ds.marked, ds.early
	}
	if ds.hasWaits {
		rep.LimiterWaitMs, rep.LimiterWaits, rep.LimiterAcquires = ms(ds.wait), ds.waits, ds.acquires
	}
	rep.PeakRSSBytes, rep.PeakRSSSource = ds.peakRSS, ds.rssSource
	return rep
}

// coresUsed returns the cores a run had on average: its CPU seconds over
// its wall seconds, 0 when its CPU is unknown.
func coresUsed(r *Report) float64 {
	cpu := r.CPUS
	if cpu <= 0 && r.CPUAccounting == cpuProcess && r.DaemonCPUS >= 0 {
		cpu = r.LoadgenCPUS + r.DaemonCPUS // a daemon of its own
	}
	if cpu <= 0 || r.ElapsedS <= 0 {
		return 0
	}
	return round(cpu/r.ElapsedS, 2)
}

// fewCores is the share of the machine's cores under which a report says
// that the run had fewer than the machine's: the default workload had
// 1.4 to 2 of the reference machine's 2 cores.
const fewCores = 0.6

// fewerCores reports whether the run had well under the machine's cores.
func (r *Report) fewerCores() bool {
	return r.CoresUsed > 0 && r.Cores > 0 && r.CoresUsed < fewCores*float64(r.Cores)
}

// CPU accountings of a Report.
const (
	// cpuWorkerThreads: the load generator's CPU is its task workers'
	// threads', the daemon's the rest of the process.
	cpuWorkerThreads = "worker-threads"
	// cpuProcess: the load generator is a process of its own.
	cpuProcess = "process"
	// cpuNone: not split (the in-process writer of --compare).
	cpuNone = "none"
)

// clientSide sets the load generator's CPU and its workers' waits.
func (rep *Report) clientSide(r runResult) {
	w := r.workers
	rep.LoadgenSetupCPUS = round(r.setupCPU.Seconds(), 3)
	switch {
	case r.apart:
		rep.CPUAccounting = cpuProcess
		rep.LoadgenCPUS = round(r.selfOnly.Seconds(), 3)
		rep.DaemonCPUS = -1
		if r.daemonCPU >= 0 {
			rep.DaemonCPUS = round(r.daemonCPU.Seconds(), 3)
		}
	case r.split:
		rep.CPUAccounting = cpuWorkerThreads
		rep.LoadgenCPUS = round(w.cpu.Seconds(), 3)
		rep.DaemonCPUS = round(max(r.cpu-w.cpu, 0).Seconds(), 3)
	default:
		// The in-process writer: one process, not split; the waits are
		// the calls' whole wall time.
		rep.CPUAccounting = cpuNone
		rep.LoadgenCPUS, rep.DaemonCPUS = -1, -1
	}
	rep.WorkerS = round(w.wall.Seconds(), 3)
	rep.WaitOpenS = round(w.open.Seconds(), 3)
	rep.WaitWriteS = round(w.write.Seconds(), 3)
	rep.WaitCommitS = round(w.commit.Seconds(), 3)
	rep.ProduceS = round(max(w.wall-w.waits(), 0).Seconds(), 3)
}

// percentile returns the q-th percentile (nearest rank) of ds, sorting ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.SortFunc(ds, cmp.Compare)
	rank := int(math.Ceil(q / 100 * float64(len(ds))))
	return ds[min(max(rank, 1), len(ds))-1]
}

func ms(d time.Duration) float64 { return round(d.Seconds()*1e3, 3) }

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteTable writes r for people.
func (r *Report) WriteTable(w io.Writer) error {
	keys := "uniform keys"
	if r.Skew != "uniform" {
		keys = r.Skew + " keys"
	}
	fmt.Fprintf(w, "%d map tasks × %d batches × %d rows (%s, %s), %d partitions, %s/%s, %s over %s, concurrency %d, %s daemon\n",
		r.Tasks, r.BatchesPerTask, r.RowsPerBatch, r.Schema, keys, r.Partitions, r.Codec, r.Checksum,
		r.Payload, r.DataPlane, r.Concurrency, r.Daemon)
	if r.Encrypt {
		fmt.Fprintf(w, "  IO-encrypted (AES-128-CTR, as spark.io.encryption.enabled)\n")
	}
	if r.GPUDevice != "" && r.GPUCompress {
		fmt.Fprintf(w, "  batches partitioned on %s, and compressed there by the daemon\n", r.GPUDevice)
	} else if r.GPUDevice != "" {
		fmt.Fprintf(w, "  batches partitioned on %s\n", r.GPUDevice)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(label, format string, args ...any) {
		fmt.Fprintf(tw, "  %s\t"+format+"\n", append([]any{label}, args...)...)
	}
	row("input (serialized)", "%s  %.1f MB/s  %d rows", size(r.SerializedBytes), r.ThroughputMBs, r.Rows)
	row("output (on disk)", "%s  %.1f MB/s  compression ratio %.2f", size(r.OutputBytes), r.OutputMBs, r.CompressionRatio)
	row("tasks", "%d in %.2f s  %.1f tasks/s  task latency p50 %.1f ms, p99 %.1f ms", r.Tasks, r.ElapsedS, r.TasksPerS, r.TaskP50Ms, r.TaskP99Ms)
	if r.CPUS > 0 {
		row("CPU", "%.2f s  %.1f MB per CPU second  (this process: load generator and embedded daemon)", r.CPUS, r.MBPerCPUS)
	}
	switch {
	case r.CPUAccounting == cpuNone:
	case r.CPUAccounting == cpuWorkerThreads:
		row("CPU, split", "load generator %.2f s (its task workers' threads), embedded daemon %.2f s (the rest of the process)", r.LoadgenCPUS, r.DaemonCPUS)
	case r.DaemonCPUS >= 0:
		row("CPU, split", "load generator %.2f s (this process), daemon %.2f s (its process, from /proc)", r.LoadgenCPUS, r.DaemonCPUS)
	default:
		row("CPU, split", "load generator %.2f s (this process); the daemon's not readable here", r.LoadgenCPUS)
	}
	if r.CPUAccounting != cpuNone {
		row("", "and %.2f s generating and partitioning the batch pool, before the tasks", r.LoadgenSetupCPUS)
	}
	if r.CoresUsed > 0 {
		row("cores", "%.2f of this machine's %d busy on average (CPU seconds over wall seconds)", r.CoresUsed, r.Cores)
		if r.fewerCores() {
			row("", "fewer than the machine has: other work on it, or a workload that cannot keep them busy;")
			row("", "the MB/s above then read low: compare MB per CPU second (%.1f), which that moves less", r.MBPerCPUS)
		}
	}
	if r.WorkerS > 0 {
		waits := r.WaitOpenS + r.WaitWriteS + r.WaitCommitS
		row("workers", "%.2f s: waiting on the daemon %.2f s (%.0f%%: batch writes %.2f s, commits %.2f s, opens %.2f s), producing %.2f s",
			r.WorkerS, waits, 100*waits/r.WorkerS, r.WaitWriteS, r.WaitCommitS, r.WaitOpenS, r.ProduceS)
	}
	row("commit latency", "p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms", r.CommitP50Ms, r.CommitP95Ms, r.CommitP99Ms, r.CommitMaxMs)
	row("first batch", "%.1f ms", r.FirstBatchMs)
	if r.DaemonReadyMs > 0 {
		row("daemon start", "%.1f ms from exec to READY", r.DaemonReadyMs)
	}
	if r.GPUPartitionRowsPerS > 0 {
		if r.CPUPartitionRowsPerS > 0 {
			row("GPU partitioning", "%.1f Mrows/s  (host partitioner on the same batches: %.1f Mrows/s)", r.GPUPartitionRowsPerS/1e6, r.CPUPartitionRowsPerS/1e6)
		} else {
			row("GPU partitioning", "%.1f Mrows/s", r.GPUPartitionRowsPerS/1e6)
		}
	}
	if r.PeakBytesInFlight >= 0 {
		row("bytes in flight", "peak %s of a %s limit", size(r.PeakBytesInFlight), size(r.BytesInFlightLimit))
	} else {
		row("bytes in flight", "not reported by the daemon")
	}
	switch {
	case r.LimiterWaits < 0:
		row("limiter wait", "not reported by the daemon")
	case r.LimiterAcquires < 0:
		row("limiter wait", "%.1f ms in all, %d admissions waited", r.LimiterWaitMs, r.LimiterWaits)
	default:
		row("limiter wait", "%.1f ms in all, %d of %d admissions waited", r.LimiterWaitMs, r.LimiterWaits, r.LimiterAcquires)
	}
	row("runs per map output", "%.2f  max %d", r.RunsPerMapOutput, r.MaxRuns)
	if r.MarkedCommits >= 0 {
		row("last batch marked", "%d of %d map outputs; %d of the %d of several runs merged from it", r.MarkedCommits, r.Tasks, r.EarlyMerges, r.MultiRunOutputs)
	}
	switch r.PeakRSSSource {
	case "":
		row("peak RSS", "not reported by the daemon")
	case rssSelf:
		row("peak RSS", "%s  (this process: load generator and embedded daemon)", size(r.PeakRSSBytes))
	default:
		row("peak RSS", "%s  (the daemon)", size(r.PeakRSSBytes))
	}
	if r.DaemonPeakVmRSSBytes > 0 {
		row("daemon memory", "peak VmRSS %s, RssShmem %s, RssAnon %s  (its /proc status, every 10 ms)",
			size(r.DaemonPeakVmRSSBytes), size(r.DaemonPeakRssShmemBytes), size(r.DaemonPeakRssAnonBytes))
	}
	if r.ExistingOutputs > 0 {
		row("already committed", "%d map outputs: an earlier attempt's files were kept", r.ExistingOutputs)
	}
	if r.Verified {
		row("verify", "ok: %d map outputs, %d partitions: rows and contents match", r.VerifiedMapOutputs, r.VerifiedPartitions)
		if r.GPUPartitionCheckedRows > 0 {
			row("", "GPU partitioning matches the host partitioner row for row (%d rows)", r.GPUPartitionCheckedRows)
		}
	}
	if r.Kept != "" {
		row("kept in", "%s", r.Kept)
	}
	row("in context", "%s", r.inContext())
	return tw.Flush()
}

// The reference machine's figures on the default workload, as
// docs/benchmarks.md ("The default run") gives them with the command that
// measured them; a test keeps the two the same.
const (
	refMBsLow, refMBsHigh = 430, 640 // wall-clock MB/s, four runs the same hour
	refMBPerCPUS          = 306      // MB per CPU second
)

// inContext is the report's last line: the run's figure against the
// reference machine's on the same workload, or why there is none.
func (r *Report) inContext() string {
	if !r.defaultWorkload() {
		return "no reference figure for this workload; the reference 2-core machine's are for the default one (go run ./cmd/shuffled-loadgen), in docs/benchmarks.md"
	}
	ref := fmt.Sprintf("the reference 2-core machine ran this default workload at %d MB per CPU second, %d-%d MB/s (docs/benchmarks.md, \"The default run\")",
		refMBPerCPUS, refMBsLow, refMBsHigh)
	if r.MBPerCPUS <= 0 {
		return ref
	}
	line := fmt.Sprintf("%.2fx the reference's MB per CPU second: %s", r.MBPerCPUS/refMBPerCPUS, ref)
	if r.fewerCores() {
		line = fmt.Sprintf("this run had %.2f of %d cores, so its MB/s is not the machine's: %s", r.CoresUsed, r.Cores, line)
	}
	return line
}

// defaultWorkload reports whether r ran DefaultConfig's workload on an
// embedded daemon, the one the reference figures are of.
func (r *Report) defaultWorkload() bool {
	d := DefaultConfig()
	return r.Tasks == d.Tasks && r.BatchesPerTask == d.BatchesPerTask && r.RowsPerBatch == d.Rows &&
		r.Partitions == d.Partitions && r.Concurrency == d.Concurrency && r.Schema == d.Schema &&
		r.Skew == d.SkewString() && r.Nulls == d.Nulls && r.Codec == d.Codec && r.Checksum == d.Checksum &&
		r.Payload == d.Payload && r.DataPlane == d.DataPlane && r.Daemon == "embedded" && r.GPUDevice == ""
}

// size formats a byte count with binary units.
func size(n int64) string {
	const unit = 1 << 10
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), -1
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTP"[i])
}
