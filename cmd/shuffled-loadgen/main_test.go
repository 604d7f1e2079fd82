package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/internal/buildinfo"
)

// The test binary doubles as the command: with this variable set it runs
// main, so the tests below run the real command, exit codes included,
// without building it.
const asMain = "SHUFFLED_LOADGEN_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// runCommand runs the command with args and returns its exit code, stdout and
// stderr.
func runCommand(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1", "TMPDIR="+t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	}
	t.Fatalf("run %q: %v", args, err)
	return 0, "", ""
}

var small = []string{"--tasks", "8", "--concurrency", "2", "--partitions", "32", "--rows", "4000", "--pool-batches", "3"}

func TestVerifiedJSON(t *testing.T) {
	for _, batches := range []int{1, 3} {
		args := append(append([]string{}, small...), "--verify", "--json", "--batches-per-task", strconv.Itoa(batches))
		code, out, errOut := runCommand(t, args...)
		if code != 0 {
			t.Fatalf("shuffled-loadgen %q exited %d: %s", args, code, errOut)
		}
		var rep struct {
			Tasks              *int     `json:"tasks"`
			Partitions         *int     `json:"partitions"`
			Rows               *int64   `json:"rows"`
			SerializedBytes    *int64   `json:"serialized_bytes"`
			OutputBytes        *int64   `json:"output_bytes"`
			ThroughputMBs      *float64 `json:"throughput_mb_s"`
			CommitP50Ms        *float64 `json:"commit_p50_ms"`
			CommitP99Ms        *float64 `json:"commit_p99_ms"`
			PeakBytesInFlight  *int64   `json:"peak_bytes_in_flight"`
			RunsPerMapOutput   *float64 `json:"runs_per_map_output"`
			Verified           bool     `json:"verified"`
			VerifiedPartitions int64    `json:"verified_partitions"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("shuffled-loadgen %q printed %q: %v", args, out, err)
		}
		switch {
		case rep.Tasks == nil || *rep.Tasks != 8, rep.Partitions == nil || *rep.Partitions != 32:
			t.Errorf("%q: tasks %v, partitions %v; want 8 and 32", args, rep.Tasks, rep.Partitions)
		case rep.Rows == nil || *rep.Rows != int64(8*batches*4000):
			t.Errorf("%q: rows %v, want 8 tasks × %d batches × 4000", args, rep.Rows, batches)
		case rep.SerializedBytes == nil || rep.OutputBytes == nil || *rep.OutputBytes <= 0 || *rep.SerializedBytes <= *rep.OutputBytes:
			t.Errorf("%q: serialized %v, output %v bytes; want both, output smaller", args, rep.SerializedBytes, rep.OutputBytes)
		case rep.ThroughputMBs == nil || *rep.ThroughputMBs <= 0 || rep.CommitP50Ms == nil || rep.CommitP99Ms == nil || *rep.CommitP99Ms < *rep.CommitP50Ms:
			t.Errorf("%q: throughput %v, commit p50 %v p99 %v", args, rep.ThroughputMBs, rep.CommitP50Ms, rep.CommitP99Ms)
		case rep.PeakBytesInFlight == nil || *rep.PeakBytesInFlight <= 0:
			t.Errorf("%q: peak bytes in flight %v, want > 0", args, rep.PeakBytesInFlight)
		case rep.RunsPerMapOutput == nil || *rep.RunsPerMapOutput != float64(batches):
			t.Errorf("%q: runs per map output %v", args, rep.RunsPerMapOutput)
		case !rep.Verified || rep.VerifiedPartitions != 8*32:
			t.Errorf("%q: verified %v, %d partitions; want true, %d", args, rep.Verified, rep.VerifiedPartitions, 8*32)
		}
	}
}

func TestBadFlags(t *testing.T) {
	nobody := filepath.Join(t.TempDir(), "nobody.sock")
	tests := []struct {
		args []string
		want string // the one line on stderr starts so
	}{
		{[]string{"--partitions", "0"}, "shuffled-loadgen: --partitions must be >= 1, got 0"},
		{[]string{"--codec", "brotli"}, `shuffled-loadgen: --codec must be one of none, lz4, zstd, snappy, got "brotli"`},
		{[]string{"--rows", "-1"}, "shuffled-loadgen: --rows must be >= 1, got -1"},
		{[]string{"--socket", nobody}, "shuffled-loadgen: --socket " + nobody + ": no daemon listens there"},
	}
	for _, tt := range tests {
		code, out, errOut := runCommand(t, tt.args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("shuffled-loadgen %q = exit %d, stdout %q, stderr %q; want exit 2 and one line starting %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

// --version prints the build on stdout, as `shuffled version` does, and
// exits 0 without running anything.
func TestVersion(t *testing.T) {
	code, out, errOut := runCommand(t, "--version")
	if code != 0 {
		t.Fatalf("shuffled-loadgen --version exited %d: %s", code, errOut)
	}
	if want := "shuffled-loadgen " + buildinfo.Get().String() + "\n"; out != want {
		t.Errorf("shuffled-loadgen --version printed %q, want %q", out, want)
	}
	if errOut != "" {
		t.Errorf("shuffled-loadgen --version wrote %q on stderr, want nothing", errOut)
	}
	if code, _, _ := runCommand(t, "--version", "extra"); code != 2 {
		t.Errorf("shuffled-loadgen --version extra exited %d, want 2 (usage)", code)
	}
}
