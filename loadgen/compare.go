package loadgen

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/shuffled/shuffled/writer"
	"github.com/shuffled/shuffled/writer/baseline"
)

// compareLimit is the bytes-in-flight limit of the compare mode's engine:
// the daemon's default.
const compareLimit = writer.DefaultLimit

// compareMode is one way the compare mode writes its map outputs: the
// writer's own runs (stream) or a baseline's sink.
type compareMode struct {
	name string
	sink func(writer.SinkSpec) (writer.Sink, error)
	// writes: the mode leaves committed files (the ceiling writes none).
	writes bool
}

func (m compareMode) String() string { return m.name }

// compareModes are the modes the compare mode runs, in the order of its
// first repetition.
var compareModes = []compareMode{
	{"stream", nil, true},
	{"legacy", baseline.Legacy, true},
	{"ceiling", baseline.Ceiling, false},
}

// Indexes of the modes in compareModes.
const (
	streamMode = iota
	legacyMode
	ceilingMode
)

// ModeResult is what the compare mode measured for one writer mode.
type ModeResult struct {
	Mode string `json:"mode"`
	// ThroughputMBs is the median over the repetitions of serialized
	// (input) MB per second; RepsMBs are the repetitions, in order.
	ThroughputMBs float64   `json:"throughput_mb_s"`
	RepsMBs       []float64 `json:"reps_mb_s"`
	// MBPerCPUS is the median over the repetitions of serialized MB per
	// CPU second of this process (user and system): what the mode costs,
	// whatever else runs on the machine.
	MBPerCPUS float64 `json:"mb_per_cpu_s"`
	// The median repetition's figures. OutputBytes is the compressed size;
	// the ceiling computes it and writes nothing.
	OutputBytes      int64   `json:"output_bytes"`
	CommitP50Ms      float64 `json:"commit_p50_ms"`
	CommitP99Ms      float64 `json:"commit_p99_ms"`
	RunsPerMapOutput float64 `json:"runs_per_map_output"`
}

// Comparison is what the compare mode measured. Its JSON field names are
// stable (docs/benchmarks.md).
type Comparison struct {
	Workload
	Tasks           int   `json:"tasks"`
	Partitions      int   `json:"partitions"`
	Rows            int64 `json:"rows"`
	SerializedBytes int64 `json:"serialized_bytes"`
	// Workers is the engine's encoding pool size; Reps the repetitions of
	// each mode, interleaved.
	Workers int          `json:"workers"`
	Reps    int          `json:"reps"`
	Modes   []ModeResult `json:"modes"`
	// StreamOverLegacy and StreamOverCeiling are the medians over the
	// repetitions of the throughput ratios within each repetition, whose
	// modes ran back to back; the ...PerCPU ratios compare MB per CPU
	// second likewise.
	StreamOverLegacy        float64 `json:"stream_over_legacy"`
	StreamOverCeiling       float64 `json:"stream_over_ceiling"`
	StreamOverLegacyPerCPU  float64 `json:"stream_over_legacy_per_cpu"`
	StreamOverCeilingPerCPU float64 `json:"stream_over_ceiling_per_cpu"`
	// Noise is what the repetitions say of how far the ratios can be
	// trusted.
	Noise CompareNoise `json:"noise"`
}

// CompareNoise judges the ratios of a comparison by what cannot be and by
// how much they moved from one repetition to the next.
type CompareNoise struct {
	// Impossible names the ratios (their JSON names) whose median is
	// above 1 although the ceiling bounds them: it encodes the same
	// records on the same pool and writes nothing, so the stream writer,
	// which writes them too, cannot be faster, in wall time or per CPU
	// second. Only noise (other work on the machine taking cores from
	// some repetitions and not others) puts one there.
	Impossible []string `json:"impossible_ratios"`
	// SpreadPct is the largest coefficient of variation, in percent, of
	// the four ratios over the repetitions; -1 with fewer than 3.
	SpreadPct float64 `json:"ratio_spread_pct"`
	// RepsForStable is the repetitions after which every ratio's median
	// would be within ±5% of its true value (95% confidence) at that
	// spread, at least 3; 0 with fewer than 3 repetitions, whose spread
	// says nothing.
	RepsForStable int `json:"reps_for_stable"`
}

// stableWithin is the relative error RepsForStable aims at.
const stableWithin = 0.05

// judgeNoise fills c.Noise from the per-repetition ratios, by their JSON
// names.
func (c *Comparison) judgeNoise(perRep map[string][]float64) {
	c.Noise = CompareNoise{Impossible: []string{}, SpreadPct: -1}
	for _, r := range []struct {
		name   string
		median float64
	}{{"stream_over_ceiling", c.StreamOverCeiling}, {"stream_over_ceiling_per_cpu", c.StreamOverCeilingPerCPU}} {
		if r.median > 1 {
			c.Noise.Impossible = append(c.Noise.Impossible, r.name)
		}
	}
	worst := -1.0
	for _, rs := range perRep {
		if len(rs) < 3 {
			continue
		}
		var mean, sq float64
		for _, v := range rs {
			mean += v
		}
		mean /= float64(len(rs))
		for _, v := range rs {
			sq += (v - mean) * (v - mean)
		}
		if mean > 0 {
			worst = max(worst, math.Sqrt(sq/float64(len(rs)-1))/mean)
		}
	}
	if worst < 0 {
		return
	}
	c.Noise.SpreadPct = round(100*worst, 1)
	// The median's standard error is about 1.25 sigma over the root of the
	// count; 1.96 of them within stableWithin.
	n := math.Ceil(math.Pow(1.96*1.2533*worst/stableWithin, 2))
	c.Noise.RepsForStable = int(max(n, 3))
}

// Compare runs cfg's workload in process through one writer engine (pool
// size GOMAXPROCS, the daemon's default limit) in the stream, legacy and
// ceiling modes, cfg.Reps times each, the modes' order rotating from one
// repetition to the next, and reports the median throughputs and their
// ratios. No daemon and no socket are involved: it measures the writer.
func Compare(ctx context.Context, cfg Config, progress io.Writer) (*Comparison, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "shuffled-compare-")
	if err != nil {
		return nil, fmt.Errorf("loadgen: compare: %w", err)
	}
	defer os.RemoveAll(tmp)
	workers := runtime.GOMAXPROCS(0)
	e, err := writer.New(writer.WithWorkers(workers), writer.WithLimit(compareLimit))
	if err != nil {
		return nil, fmt.Errorf("loadgen: compare: %w", err)
	}
	defer e.Close()
	p, err := newPool(ctx, &cfg, poolForm{payload: cfg.Payload, batch: cfg.columnar()})
	if err != nil {
		return nil, err
	}
	defer p.close()

	runs := make([][]runResult, len(compareModes))
	for rep := range cfg.Reps {
		for k := range compareModes {
			m := (rep + k) % len(compareModes)
			mode := compareModes[m]
			dir := filepath.Join(tmp, fmt.Sprintf("%v-%d", mode, rep))
			if err := os.Mkdir(dir, 0o750); err != nil {
				return nil, fmt.Errorf("loadgen: compare: %w", err)
			}
			runtime.GC() // the previous mode's garbage is not this one's
			label := fmt.Sprintf("%v %d/%d", mode, rep+1, cfg.Reps)
			prog := startProgress(progress, label, cfg.Tasks, cfg.Duration)
			res, err := runTasks(ctx, &cfg, p, &engineTarget{cfg: &cfg, e: e, mode: mode, dir: dir}, prog)
			prog.finish()
			if err != nil {
				return nil, fmt.Errorf("loadgen: compare: %v mode: %w", mode, err)
			}
			if err := os.RemoveAll(dir); err != nil {
				return nil, fmt.Errorf("loadgen: compare: %w", err)
			}
			runs[m] = append(runs[m], res)
		}
	}
	return newComparison(&cfg, p, workers, runs), nil
}

func newComparison(cfg *Config, p *pool, workers int, runs [][]runResult) *Comparison {
	c := &Comparison{Workload: workloadOf(cfg, p), Partitions: cfg.Partitions, Workers: workers, Reps: cfg.Reps}
	reports := make([][]*Report, len(compareModes))
	for m, mode := range compareModes {
		mr := ModeResult{Mode: mode.String()}
		var perCPU []float64
		for _, r := range runs[m] {
			rep := newReport(cfg, p, r, daemonStats{})
			reports[m] = append(reports[m], rep)
			mr.RepsMBs = append(mr.RepsMBs, rep.ThroughputMBs)
			perCPU = append(perCPU, rep.MBPerCPUS)
		}
		mr.MBPerCPUS = median(perCPU)
		sorted := slices.Clone(reports[m])
		slices.SortFunc(sorted, func(a, b *Report) int { return cmp.Compare(a.ThroughputMBs, b.ThroughputMBs) })
		med := sorted[(len(sorted)-1)/2]
		mr.ThroughputMBs = med.ThroughputMBs
		mr.OutputBytes, mr.CommitP50Ms, mr.CommitP99Ms, mr.RunsPerMapOutput = med.OutputBytes, med.CommitP50Ms, med.CommitP99Ms, med.RunsPerMapOutput
		if m == 0 {
			c.Tasks, c.Rows, c.SerializedBytes = med.Tasks, med.Rows, med.SerializedBytes
		}
		c.Modes = append(c.Modes, mr)
	}
	// Ratios within each repetition, where the modes ran back to back.
	perRep := map[string][]float64{}
	ratio := func(name string, a, b int, f func(*Report) float64) float64 {
		var rs []float64
		for k := range reports[a] {
			if den := f(reports[b][k]); den > 0 {
				rs = append(rs, f(reports[a][k])/den)
			}
		}
		perRep[name] = slices.Clone(rs)
		return round(median(rs), 3)
	}
	wall := func(r *Report) float64 { return r.ThroughputMBs }
	perCPU := func(r *Report) float64 { return r.MBPerCPUS }
	stream, legacy, ceiling := streamMode, legacyMode, ceilingMode
	c.StreamOverLegacy = ratio("stream_over_legacy", stream, legacy, wall)
	c.StreamOverCeiling = ratio("stream_over_ceiling", stream, ceiling, wall)
	c.StreamOverLegacyPerCPU = ratio("stream_over_legacy_per_cpu", stream, legacy, perCPU)
	c.StreamOverCeilingPerCPU = ratio("stream_over_ceiling_per_cpu", stream, ceiling, perCPU)
	c.judgeNoise(perRep)
	return c
}

// median returns the median of vs (the lower middle of an even count), 0
// for none. It sorts vs.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	return vs[(len(vs)-1)/2]
}

// WriteJSON writes c as indented JSON.
func (c *Comparison) WriteJSON(w io.Writer) error {
	return writeJSON(w, c)
}

// WriteTable writes c for people.
func (c *Comparison) WriteTable(w io.Writer) error {
	keys := "uniform keys"
	if c.Skew != "uniform" {
		keys = c.Skew + " keys"
	}
	fmt.Fprintf(w, "compare: %d map tasks × %d batches × %d rows (%s, %s), %d partitions, %s/%s, %s, concurrency %d; in process, %d workers; median of %d\n",
		c.Tasks, c.BatchesPerTask, c.RowsPerBatch, c.Schema, keys, c.Partitions, c.Codec, c.Checksum,
		c.Payload, c.Concurrency, c.Workers, c.Reps)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  mode\tMB/s (input)\trepetitions\tMB per CPU s\toutput\tcommit p50\tcommit p99\truns/output\t")
	for _, m := range c.Modes {
		reps := make([]string, len(m.RepsMBs))
		for i, v := range m.RepsMBs {
			reps[i] = fmt.Sprintf("%.1f", v)
		}
		runs := "-" // legacy and ceiling have one sink whatever the batches
		if m.Mode == compareModes[streamMode].name {
			runs = fmt.Sprintf("%.2f", m.RunsPerMapOutput)
		}
		fmt.Fprintf(tw, "  %s\t%.1f\t%s\t%.1f\t%s\t%.1f ms\t%.1f ms\t%s\t\n", m.Mode, m.ThroughputMBs, strings.Join(reps, " "), m.MBPerCPUS, size(m.OutputBytes), m.CommitP50Ms, m.CommitP99Ms, runs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "  stream/legacy %.2f× (per CPU second %.2f×), stream/ceiling %.2f× (per CPU second %.2f×)\n",
		c.StreamOverLegacy, c.StreamOverLegacyPerCPU, c.StreamOverCeiling, c.StreamOverCeilingPerCPU)
	if len(c.Noise.Impossible) > 0 {
		fmt.Fprintf(w, "  noise: %s above 1 cannot be: the ceiling encodes the same records and writes nothing, so the stream writer cannot beat it; other work on the machine moved the repetitions\n",
			strings.ReplaceAll(strings.Join(c.Noise.Impossible, ", "), "_over_", "/"))
	}
	var err error
	switch {
	case c.Noise.RepsForStable == 0:
		_, err = fmt.Fprintf(w, "  noise: %d repetitions cannot show how much the ratios move; run --reps 5 or more\n", c.Reps)
	case c.Noise.RepsForStable > c.Reps:
		_, err = fmt.Fprintf(w, "  noise: the ratios moved %.1f%% (coefficient of variation) over %d repetitions: medians within ±5%% need about %d (--reps %d), or a quieter machine\n",
			c.Noise.SpreadPct, c.Reps, c.Noise.RepsForStable, c.Noise.RepsForStable)
	default:
		_, err = fmt.Fprintf(w, "  the ratios moved %.1f%% (coefficient of variation) over %d repetitions: their medians are within ±5%% (%d would do)\n",
			c.Noise.SpreadPct, c.Reps, c.Noise.RepsForStable)
	}
	return err
}
