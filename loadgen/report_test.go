package loadgen

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 50, 3 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 100, 5 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 0, 1 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 95, 10 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
	}
	for _, tt := range tests {
		in := append([]time.Duration(nil), tt.in...)
		if got := percentile(in, tt.q); got != tt.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tt.in, tt.q, got, tt.want)
		}
	}
}

func TestSize(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{3 << 29, "1.5 GiB"},
		{512 << 20, "512.0 MiB"},
	}
	for _, tt := range tests {
		if got := size(tt.n); got != tt.want {
			t.Errorf("size(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestProgressLine(t *testing.T) {
	start := time.Unix(1000, 0)
	tests := []struct {
		tty   bool
		total int
		dur   time.Duration
		tasks int64
		bytes int64
		at    time.Duration
		want  string
	}{
		{false, 100, 0, 25, 500e6, 5 * time.Second, "run: 25/100 tasks, 100.0 MB/s, ETA 15s"},
		{false, 100, 0, 0, 0, time.Second, "run: 0/100 tasks, 0.0 MB/s, ETA ?"},
		{false, 0, 20 * time.Second, 7, 10e6, 5 * time.Second, "run: 7 tasks, 2.0 MB/s, ETA 15s"},
		{false, 0, 20 * time.Second, 9, 10e6, 25 * time.Second, "run: 9 tasks, 0.4 MB/s, ETA 0s"},
		{true, 100, 0, 50, 100e6, 10 * time.Second, "[############............] run: 50/100 tasks, 10.0 MB/s, ETA 10s"},
		{true, 4, 0, 4, 1e6, time.Second, "[########################] run: 4/4 tasks, 1.0 MB/s, ETA 0s"},
	}
	for _, tt := range tests {
		p := &progress{tty: tt.tty, label: "run", total: tt.total, dur: tt.dur, start: start}
		p.tasks.Store(tt.tasks)
		p.bytes.Store(tt.bytes)
		if got := p.line(start.Add(tt.at)); got != tt.want {
			t.Errorf("line(tty %v, %d/%d tasks, %d bytes, at %v) = %q, want %q", tt.tty, tt.tasks, tt.total, tt.bytes, tt.at, got, tt.want)
		}
	}
}

func TestProgressPlain(t *testing.T) {
	var out strings.Builder
	p := startProgress(&out, "run", 3, 0)
	for range 3 {
		p.addBytes(10)
		p.taskDone()
	}
	p.finish()
	// A slow machine may add periodic lines; the last one is the total.
	got := out.String()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "shuffled-loadgen: run: 3/3 tasks") || strings.Contains(got, "\r") {
		t.Errorf("plain progress wrote %q, want lines ending with one of 3/3 tasks, no carriage returns", got)
	}
	var nilProgress *progress
	nilProgress.addBytes(1)
	nilProgress.taskDone()
	nilProgress.finish()
}

func TestInContext(t *testing.T) {
	cfg := DefaultConfig()
	r := newReport(&cfg, &pool{}, runResult{}, daemonStats{})
	r.Daemon, r.Tasks = "embedded", cfg.Tasks
	r.MBPerCPUS = refMBPerCPUS / 2
	if got, want := r.inContext(), "0.50x the reference's MB per CPU second: the reference 2-core machine ran this default workload at 306 MB per CPU second, 430-640 MB/s"; !strings.HasPrefix(got, want) {
		t.Errorf("inContext() = %q, want prefix %q", got, want)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "in context") || !strings.Contains(last, "reference 2-core machine") {
		t.Errorf("the report's last line is %q, want the in-context line", last)
	}
	for _, mutate := range []func(*Report){
		func(r *Report) { r.Partitions = 1000 },
		func(r *Report) { r.Daemon = "external" },
		func(r *Report) { r.Codec = "zstd" },
		func(r *Report) { r.Tasks = 10 },
	} {
		other := *r
		mutate(&other)
		if got := other.inContext(); !strings.HasPrefix(got, "no reference figure for this workload") {
			t.Errorf("inContext() of %+v = %q, want no reference figure", other, got)
		}
	}
}

// TestReferenceFiguresDocumented keeps the figures the report quotes and
// docs/benchmarks.md's "The default run" the same.
func TestReferenceFiguresDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, sec, ok := strings.Cut(doc, "### The default run")
	if !ok {
		t.Fatal(`docs/benchmarks.md has no "### The default run"`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	for _, want := range []string{
		fmt.Sprintf("%d-%d MB/s", refMBsLow, refMBsHigh),
		fmt.Sprintf("%d MB per CPU second", refMBPerCPUS),
		"go run ./cmd/shuffled-loadgen",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("docs/benchmarks.md \"The default run\" lacks %q, which the report quotes", want)
		}
	}
}
