// Package metrics defines the daemon's Prometheus metrics and serves them.
//
// All metrics live on a private registry (never the global one), so two
// daemons embedded in one process, as in tests and the load generator, never
// collide. Invariant: the metrics endpoint is reachable from this host only
// unless the operator asked otherwise: Listen refuses an address that is not
// loopback without allowRemote (--metrics-allow-remote). docs/operations.md
// lists every metric; a test checks the list against New's registry.
package metrics

import (
	"net/http"
	"sync/atomic"

	"github.com/shuffled/shuffled/internal/buildinfo"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric the daemon defines.
const Namespace = "shuffled"

// CommitBuckets are the upper bounds, in seconds, of the commit latency
// histogram: 1 ms to 10 s.
var CommitBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Commit phases, the values of the "phase" label of CommitPhaseSeconds
// (see writer.Result): waiting for the map output's records to be encoded,
// the part of the merge of its runs left after that, and committing its
// files.
const (
	PhaseEncodeWait = "encode_wait"
	PhaseMergeTail  = "merge_tail"
	PhaseFiles      = "files"
)

// PhaseBuckets are the upper bounds, in seconds, of the commit phase
// histogram: 100 µs to 10 s (a phase is often under a millisecond).
var PhaseBuckets = append([]float64{.0001, .00025, .0005}, CommitBuckets...)

// RunBuckets are the upper bounds of the runs-per-map-output histogram. One
// run is the single-batch case; many runs mean many merges.
var RunBuckets = []float64{1, 2, 3, 4, 6, 8, 16, 32, 64, 128}

// Removal kinds, the values of the "kind" label of Removals.
const (
	RemovalShuffle     = "shuffle"
	RemovalApplication = "application"
	RemovalExpired     = "expired"
)

// Metrics holds every metric of the daemon. The fields are safe for
// concurrent use; the daemon's packages update them directly.
type Metrics struct {
	// Data path.
	BytesIn  prometheus.Counter     // uncompressed record bytes received
	BytesOut prometheus.Counter     // compressed bytes written to disk
	Records  prometheus.Counter     // records taken
	Commits  prometheus.Counter     // map outputs committed
	Aborts   prometheus.Counter     // map outputs aborted
	Errors   *prometheus.CounterVec // error responses by wire code, label "code"
	// RequestsRefused counts refused connections, registrations and
	// Opens (the refusals that send a Spark executor or task to Spark's
	// own writer), labels "request" (Request*) and "code".
	RequestsRefused *prometheus.CounterVec

	// Limiter.
	LimiterWaitSeconds prometheus.Counter // time spent waiting for admission
	LimiterWaits       prometheus.Counter // admissions that had to wait
	LimiterLimitBytes  prometheus.Gauge   // the configured limit

	// Map outputs and sessions.
	OpenMapOutputs   prometheus.Gauge
	RunsPerMapOutput prometheus.Histogram // observed at commit
	MergeBytes       prometheus.Counter   // bytes copied by merges of runs
	MarkedCommits    prometheus.Counter   // commits of map outputs whose last batch was marked LAST
	EarlyMerges      prometheus.Counter   // commits whose merge started in the marked last batch
	CommitSeconds    prometheus.Histogram // commit latency
	// CommitPhaseSeconds splits commit latency by phase, label "phase"
	// (Phase*).
	CommitPhaseSeconds *prometheus.HistogramVec
	Sessions           prometheus.Gauge // connected clients

	// Lifecycle and disks.
	DiskBytes          *prometheus.GaugeVec   // bytes of shuffle files in the root dir per disk, label "disk"
	DiskFreeBytes      *prometheus.GaugeVec   // free bytes of each root dir's file system, label "disk"
	DiskSizeBytes      *prometheus.GaugeVec   // size of each root dir's file system, label "disk"
	Applications       prometheus.Gauge       // registered applications
	Shuffles           prometheus.Gauge       // shuffles with outputs on disk
	Removals           *prometheus.CounterVec // removals by kind, label "kind" (Removal*)
	DiskFullRefusals   prometheus.Counter     // map outputs refused for lack of space
	DisksOutOfRotation prometheus.Gauge       // disks taken out of rotation after errors

	// Serving is the block server's (--serve-addr), registered whether it
	// runs or not.
	Serving *Serving

	registry *prometheus.Registry
	limiter  atomic.Pointer[func() (inFlight, peak int64)]
	health   atomic.Pointer[probes]
}

// Values of the "request" label of RequestsRefused.
const (
	RequestConnection = "connection" // a connection refused before its Hello
	RequestRegister   = "RegisterExecutor"
	RequestOpen       = "OpenMapOutput"
)

// counter returns a counter of the daemon's namespace, registered nowhere.
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
}

// gauge returns a gauge of the daemon's namespace, registered nowhere.
func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
}

// New returns the daemon's metrics registered on a fresh private registry,
// with the Go runtime and process collectors beside them.
func New() *Metrics {
	m := &Metrics{
		BytesIn:  counter("input_bytes_total", "Uncompressed record bytes received from clients."),
		BytesOut: counter("output_bytes_total", "Compressed bytes written to shuffle files on disk."),
		Records:  counter("records_total", "Records (one partition's slice of one batch) taken."),
		Commits:  counter("commits_total", "Map outputs committed."),
		Aborts:   counter("aborts_total", "Map outputs aborted."),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "errors_total", Help: "Error responses sent, by wire error code.",
		}, []string{"code"}),
		RequestsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "requests_refused_total",
			Help: "Connections, registrations (RegisterExecutor) and OpenMapOutputs refused, by request and wire error code: each sends a Spark executor or task to Spark's own writer.",
		}, []string{"request", "code"}),

		LimiterWaitSeconds: counter("limiter_wait_seconds_total", "Seconds records waited for the bytes-in-flight limiter."),
		LimiterWaits:       counter("limiter_waits_total", "Limiter admissions that had to wait."),
		LimiterLimitBytes:  gauge("limiter_limit_bytes", "Configured bytes-in-flight limit."),

		OpenMapOutputs: gauge("open_map_outputs", "Map outputs open (neither committed nor aborted)."),
		RunsPerMapOutput: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "map_output_runs", Help: "Runs per committed map output.",
			Buckets: RunBuckets,
		}),
		MergeBytes:    counter("merge_bytes_total", "Bytes copied by merging the runs of map outputs."),
		MarkedCommits: counter("marked_commits_total", "Map outputs committed whose last batch was marked LAST."),
		EarlyMerges:   counter("early_merges_total", "Map outputs committed whose runs were merged from their LAST batch on rather than from commit."),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "commit_duration_seconds", Help: "Latency of map output commits.",
			Buckets: CommitBuckets,
		}),
		CommitPhaseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "commit_phase_duration_seconds",
			Help:    "Time of map output commits by phase: encode_wait (records still being encoded and handed to their runs), merge_tail (merging runs after that), files (committing the files); commits that found the map output already committed are not observed.",
			Buckets: PhaseBuckets,
		}, []string{"phase"}),
		Sessions: gauge("sessions", "Connected client sessions."),

		DiskBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "disk_bytes",
			Help: "Bytes of shuffle files in the daemon's root dir, by root dir (disk); files in registered Spark local dirs are not counted. Read every 30 s.",
		}, []string{"disk"}),
		DiskFreeBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "disk_free_bytes",
			Help: "Bytes free to unprivileged users on the file system of each root dir (disk). Read every 30 s.",
		}, []string{"disk"}),
		DiskSizeBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "disk_size_bytes",
			Help: "Size in bytes of the file system of each root dir (disk). Read every 30 s.",
		}, []string{"disk"}),
		Applications: gauge("applications", "Registered applications."),
		Shuffles:     gauge("shuffles", "Shuffles with outputs on disk."),
		Removals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "removals_total", Help: "Removals of shuffle outputs, by kind (shuffle, application, expired).",
		}, []string{"kind"}),
		DiskFullRefusals:   counter("disk_full_refusals_total", "Map outputs refused because no disk had room."),
		DisksOutOfRotation: gauge("disks_out_of_rotation", "Disks taken out of rotation after errors."),

		Serving:  NewServing(),
		registry: prometheus.NewRegistry(),
	}
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "limiter_in_flight_bytes", Help: "Bytes held by records admitted by the limiter.",
	}, func() float64 { n, _ := m.limiterStats(); return float64(n) })
	peak := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "limiter_peak_bytes", Help: "Most bytes the limiter has held at once.",
	}, func() float64 { _, n := m.limiterStats(); return float64(n) })

	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1; the labels name the daemon's build: version, commit, go_version.",
	}, []string{"version", "commit", "go_version"})
	bi := buildinfo.Get()
	build.WithLabelValues(bi.Version, bi.Commit, bi.GoVersion).Set(1)

	m.registry.MustRegister(
		build,
		m.BytesIn, m.BytesOut, m.Records, m.Commits, m.Aborts, m.Errors, m.RequestsRefused,
		m.LimiterWaitSeconds, m.LimiterWaits, m.LimiterLimitBytes, inFlight, peak,
		m.OpenMapOutputs, m.RunsPerMapOutput, m.MergeBytes, m.MarkedCommits, m.EarlyMerges, m.CommitSeconds, m.CommitPhaseSeconds, m.Sessions,
		m.DiskBytes, m.DiskFreeBytes, m.DiskSizeBytes, m.Applications, m.Shuffles, m.Removals, m.DiskFullRefusals, m.DisksOutOfRotation,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.registry.MustRegister(m.Serving.collectors()...)
	for _, kind := range []string{RemovalShuffle, RemovalApplication, RemovalExpired} {
		m.Removals.WithLabelValues(kind) // export zeros, so rates work from the start
	}
	for _, phase := range []string{PhaseEncodeWait, PhaseMergeTail, PhaseFiles} {
		m.CommitPhaseSeconds.WithLabelValues(phase)
	}
	return m
}

// ExportCodes exports errors_total and requests_refused_total at 0 for
// every wire error code in codes (protocol.Codes, which this package does
// not import: the server passes them) and, for requests_refused_total,
// every request (Request*), so that a series exists, and a rate or an
// increase works, before its first event, as Prometheus asks of labels
// whose values are known. Calling it again adds nothing twice.
func (m *Metrics) ExportCodes(codes []string) {
	for _, code := range codes {
		m.Errors.WithLabelValues(code)
		for _, request := range []string{RequestConnection, RequestRegister, RequestOpen} {
			m.RequestsRefused.WithLabelValues(request, code)
		}
	}
}

// WatchLimiter makes every scrape read the limiter's bytes in flight and
// its peak from stats, which must be safe to call from any goroutine. Until
// it is called both read 0. A later call replaces the earlier source.
func (m *Metrics) WatchLimiter(stats func() (inFlight, peak int64)) {
	m.limiter.Store(&stats)
}

func (m *Metrics) limiterStats() (inFlight, peak int64) {
	if f := m.limiter.Load(); f != nil {
		return (*f)()
	}
	return 0, 0
}

// Registry returns the private registry, for collectors the daemon adds.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the metrics in the Prometheus exposition formats. A
// collector that fails is reported in the response and does not hide the
// others.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	})
}
