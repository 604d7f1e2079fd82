package loadgen

import (
	"encoding/json"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// TestRunProcesses: two load generator processes (this test binary, as
// shuffled-loadgen) drive one daemon, each its own application with its
// share of the tasks, and the report is the sum of theirs over the window
// from the first start to the last end.
func TestRunProcesses(t *testing.T) {
	leakcheck.Check(t)
	socket, root := startServer(t)
	args := append(slices.Clone(small), "--socket", socket, "--verify", "--keep", "--tasks", "7", "--processes", "2", "--json")
	code, out, errOut := mainRun(t, args...)
	if code != ExitOK {
		t.Fatalf("Main(%q) = %d, stderr %q", args, code, errOut)
	}
	var rep ProcessesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("Main(%q) printed %q: %v", args, out, err)
	}
	if rep.Processes != 2 || len(rep.PerProcess) != 2 || rep.Daemon != "external" || rep.Concurrency != 2 {
		t.Fatalf("report: %d processes, %d reports, daemon %q, concurrency %d; want 2, 2, external, 2", rep.Processes, len(rep.PerProcess), rep.Daemon, rep.Concurrency)
	}
	var (
		tasks, verified    int
		rows, in, outBytes int64
		loadgenCPU         float64
		start, end         int64 = math.MaxInt64, 0
		apps                     = map[string]bool{}
		wantTasks                = []int{4, 3}
	)
	for i, p := range rep.PerProcess {
		if p == nil {
			t.Fatalf("process %d reported nothing", i)
		}
		if p.Tasks != wantTasks[i] || !p.Verified || p.VerifiedMapOutputs != wantTasks[i] || p.Daemon != "external" {
			t.Errorf("process %d: %d tasks, verified %v (%d map outputs), daemon %q; want %d verified, external", i, p.Tasks, p.Verified, p.VerifiedMapOutputs, p.Daemon, wantTasks[i])
		}
		if p.StartUnixNs <= 0 || p.EndUnixNs <= p.StartUnixNs || math.Abs(time.Duration(p.EndUnixNs-p.StartUnixNs).Seconds()-p.ElapsedS) > 0.001 {
			t.Errorf("process %d: window %d to %d, elapsed_s %v: want an ordered window as long as elapsed_s", i, p.StartUnixNs, p.EndUnixNs, p.ElapsedS)
		}
		checkClientSide(t, p, cpuProcess)
		tasks += p.Tasks
		verified += p.VerifiedMapOutputs
		rows += p.Rows
		in += p.SerializedBytes
		outBytes += p.OutputBytes
		loadgenCPU += p.LoadgenCPUS
		start, end = min(start, p.StartUnixNs), max(end, p.EndUnixNs)
		apps[p.Kept] = true
	}
	if rep.Tasks != 7 || tasks != 7 || rep.Rows != rows || rep.SerializedBytes != in || rep.OutputBytes != outBytes || in <= 0 {
		t.Errorf("aggregate: %d tasks, %d rows, %d bytes in, %d out; want the processes' sums %d, %d, %d, %d", rep.Tasks, rep.Rows, rep.SerializedBytes, rep.OutputBytes, tasks, rows, in, outBytes)
	}
	if !rep.Verified || rep.VerifiedMapOutputs != verified || verified != 7 {
		t.Errorf("aggregate verified %v (%d map outputs); want true and the processes' %d", rep.Verified, rep.VerifiedMapOutputs, verified)
	}
	if rep.StartUnixNs != start || rep.EndUnixNs != end {
		t.Errorf("aggregate window %d to %d, want the first start %d to the last end %d", rep.StartUnixNs, rep.EndUnixNs, start, end)
	}
	s := time.Duration(end - start).Seconds()
	if math.Abs(rep.ElapsedS-s) > 0.001 || math.Abs(rep.ThroughputMBs-float64(in)/s/1e6) > 0.06 {
		t.Errorf("aggregate elapsed_s %v, throughput %v MB/s; want %v and %v", rep.ElapsedS, rep.ThroughputMBs, s, float64(in)/s/1e6)
	}
	if math.Abs(rep.LoadgenCPUS-loadgenCPU) > 0.0015 || rep.LoadgenCPUS <= 0 {
		t.Errorf("aggregate loadgen_cpu_s %v, want the processes' sum %v", rep.LoadgenCPUS, loadgenCPU)
	}
	// The daemon runs in this test's process, which the run can read.
	if rep.DaemonCPUS < 0 || rep.MarkedCommits != 7 || rep.PeakRSSSource != rssDaemon {
		t.Errorf("aggregate daemon_cpu_s %v, marked_commits %d, peak RSS source %q; want the daemon's CPU, 7, daemon", rep.DaemonCPUS, rep.MarkedCommits, rep.PeakRSSSource)
	}
	// Two applications, kept: each holds its own process's map outputs.
	if len(apps) != 2 {
		t.Errorf("kept %v, want two applications", apps)
	}
	ents := outputsIn(root)
	if len(ents) != 2 {
		t.Fatalf("the daemon's root holds %d entries, want the two applications", len(ents))
	}
	counts := []int{}
	for _, e := range ents {
		n := 0
		for i := range 4 {
			found, _ := filepath.Glob(filepath.Join(root, e.Name(), "*", shufflefile.IndexName(shufflefile.ID{Shuffle: 0, Map: int64(i)})))
			n += len(found)
		}
		counts = append(counts, n)
	}
	slices.Sort(counts)
	if !slices.Equal(counts, []int{3, 4}) {
		t.Errorf("the applications hold %v index files, want 3 and 4", counts)
	}
	for _, want := range []string{"process 0: shuffled-loadgen: run: 4/4 tasks", "process 1: shuffled-loadgen: run: 3/3 tasks"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("progress %q lacks %q", errOut, want)
		}
	}
}

// TestRunProcessesFails: a process that fails makes the run fail, naming
// it and quoting its log, without waiting forever at a barrier.
func TestRunProcessesFails(t *testing.T) {
	leakcheck.Check(t)
	socket, _ := startServer(t)
	prof := filepath.Join(t.TempDir(), "no-such-dir", "cpu.pprof")
	code, out, errOut := mainRun(t, append(slices.Clone(small), "--socket", socket, "--processes", "2", "--cpuprofile", prof)...)
	if code != ExitError || out != "" || !strings.Contains(errOut, "process 0 ended before it said done") || !strings.Contains(errOut, prof+".0") {
		t.Errorf("Main with processes that cannot write their profiles = %d, stdout %q, stderr %q; want %d naming process 0 and its profile", code, out, errOut, ExitError)
	}
}

// TestMemberArgs: a process of a --processes run parses back the run's
// workload, with its share of the tasks and files of its own.
func TestMemberArgs(t *testing.T) {
	cfg, err := ParseArgs([]string{"--socket", "/run/d.sock", "--processes", "3", "--tasks", "10", "--concurrency", "5",
		"--skew", "zipf:1.5", "--nulls", "0.25", "--payload", "kudo", "--codec", "zstd", "--checksum", "crc32c", "--encrypt",
		"--verify", "--keep", "--no-last-batch", "--seed", "7", "--data-plane", "inline", "--cpuprofile", "p", "--trace", "tr", "--json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, want := range []int{4, 3, 3} {
		got, err := ParseArgs(cfg.memberArgs(i), io.Discard)
		if err != nil {
			t.Fatalf("member %d: %q: %v", i, cfg.memberArgs(i), err)
		}
		total += got.Tasks
		exp := cfg
		exp.Tasks, exp.Processes = want, 1
		exp.CPUProfile, exp.Trace = "p."+strconv.Itoa(i), "tr."+strconv.Itoa(i)
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("member %d parses to\n%+v\nwant\n%+v", i, got, exp)
		}
	}
	if total != cfg.Tasks {
		t.Errorf("members run %d tasks, want %d", total, cfg.Tasks)
	}
	if _, err := memberFromEnv(nil, nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv(processEnv, "x")
	if _, err := memberFromEnv(nil, nil); err == nil || !strings.Contains(err.Error(), `got "x"`) {
		t.Errorf("memberFromEnv with %s=x = %v, want an error naming the value", processEnv, err)
	}
}
