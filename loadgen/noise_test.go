package loadgen

import (
	"bytes"
	"strings"
	"testing"
)

// A run that had well under the machine's cores says so, and points at MB
// per CPU second; one that had them does not.
func TestFewerCores(t *testing.T) {
	d := DefaultConfig()
	base := Report{
		Daemon: "embedded",
		Workload: Workload{Schema: d.Schema, Skew: d.SkewString(), Nulls: d.Nulls, Codec: d.Codec, Checksum: d.Checksum,
			Payload: d.Payload, DataPlane: d.DataPlane, Concurrency: d.Concurrency, BatchesPerTask: d.BatchesPerTask, RowsPerBatch: d.Rows},
		Volume:            Volume{Tasks: d.Tasks, Partitions: d.Partitions, ElapsedS: 63},
		PeakRSSSource:     rssSelf,
		PeakBytesInFlight: -1,
		LimiterWaits:      -1,
		MarkedCommits:     -1,
	}
	for _, tt := range []struct {
		cpu   float64
		cores int
		few   bool
	}{
		{27, 2, true},   // the busy machine of the issue: 0.43 of 2 cores
		{120, 2, false}, // 1.9 of 2
		{100, 8, true},  // 1.6 of 8
		{0, 2, false},   // CPU unknown (an external daemon): nothing said
	} {
		r := base
		r.CPUAccounting = cpuWorkerThreads
		r.CPUS = tt.cpu
		r.SerializedBytes = 8_190_000_000
		if tt.cpu > 0 {
			r.MBPerCPUS = round(float64(r.SerializedBytes)/tt.cpu/1e6, 1)
		}
		r.Cores = tt.cores
		r.CoresUsed = coresUsed(&r)
		if want := round(tt.cpu/63, 2); r.CoresUsed != want {
			t.Errorf("cpu %v over 63 s: cores used %v, want %v", tt.cpu, r.CoresUsed, want)
		}
		var out bytes.Buffer
		if err := r.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		table := out.String()
		said := strings.Contains(table, "fewer than the machine has") &&
			strings.Contains(table, "compare MB per CPU second") &&
			strings.Contains(r.inContext(), "so its MB/s is not the machine's")
		if said != tt.few {
			t.Errorf("cpu %v s over 63 s on %d cores: said fewer cores %v, want %v:\n%s", tt.cpu, tt.cores, said, tt.few, table)
		}
		if tt.cpu > 0 && !strings.Contains(table, "busy on average") {
			t.Errorf("cpu %v s: no cores line:\n%s", tt.cpu, table)
		}
	}
}

// The compare mode flags a median ratio above the ceiling's bound, and
// says how many repetitions its spread asks for.
func TestJudgeNoise(t *testing.T) {
	judge := func(reps int, overCeiling float64, spread []float64) *Comparison {
		c := &Comparison{Reps: reps, StreamOverLegacy: 1.2, StreamOverCeiling: overCeiling, StreamOverLegacyPerCPU: 1.1, StreamOverCeilingPerCPU: 0.8}
		c.judgeNoise(map[string][]float64{"stream_over_legacy": spread, "stream_over_ceiling_per_cpu": []float64{0.8, 0.8, 0.8}[:min(reps, 3)]})
		return c
	}
	table := func(c *Comparison) string {
		var b bytes.Buffer
		if err := c.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}

	busy := judge(3, 1.38, []float64{1.0, 1.4, 0.7})
	if len(busy.Noise.Impossible) != 1 || busy.Noise.Impossible[0] != "stream_over_ceiling" {
		t.Errorf("stream/ceiling 1.38: impossible %v, want [stream_over_ceiling]", busy.Noise.Impossible)
	}
	if busy.Noise.RepsForStable <= 3 || busy.Noise.SpreadPct < 30 {
		t.Errorf("ratios 1.0, 1.4, 0.7: spread %v%%, reps for stable %d; want over 30%% and more than 3", busy.Noise.SpreadPct, busy.Noise.RepsForStable)
	}
	if s := table(busy); !strings.Contains(s, "stream/ceiling above 1 cannot be") || !strings.Contains(s, "--reps ") {
		t.Errorf("busy comparison's table lacks the impossible ratio or the repetitions it needs:\n%s", s)
	}

	calmer := judge(3, 0.9, []float64{1.0, 1.1, 0.95})
	if len(calmer.Noise.Impossible) != 0 || calmer.Noise.RepsForStable >= busy.Noise.RepsForStable {
		t.Errorf("calmer ratios: impossible %v, reps %d; want none, and fewer than the busy run's %d", calmer.Noise.Impossible, calmer.Noise.RepsForStable, busy.Noise.RepsForStable)
	}

	quiet := judge(5, 0.9, []float64{1.0, 1.001, 0.999, 1.0, 1.0})
	if quiet.Noise.RepsForStable != 3 {
		t.Errorf("ratios within 0.1%%: reps for stable %d, want the floor, 3", quiet.Noise.RepsForStable)
	}
	if s := table(quiet); !strings.Contains(s, "within ±5%") || strings.Contains(s, "noise:") {
		t.Errorf("quiet comparison's table:\n%s", s)
	}

	one := judge(1, 0.9, []float64{1.0})
	if one.Noise.RepsForStable != 0 || one.Noise.SpreadPct != -1 {
		t.Errorf("one repetition: spread %v, reps %d; want -1 and 0 (unknown)", one.Noise.SpreadPct, one.Noise.RepsForStable)
	}
	if s := table(one); !strings.Contains(s, "run --reps 5 or more") {
		t.Errorf("one repetition's table:\n%s", s)
	}
}
