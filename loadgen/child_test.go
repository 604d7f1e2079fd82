package loadgen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/cmd/shuffled/command"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// daemonEnv makes the test binary a shuffled binary (its commands, serve
// among them): the child that --daemon-bin starts in these tests.
const daemonEnv = "SHUFFLED_LOADGEN_TEST_DAEMON"

func TestMain(m *testing.M) {
	// A process of a --processes run that a test started: the load
	// generator itself.
	if os.Getenv(processEnv) != "" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(daemonEnv) != "" {
		if err := command.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "shuffled: %v\n", err)
			os.Exit(command.ExitCode(err))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childConfig is the small workload against this test binary as the
// --daemon-bin daemon.
func childConfig(t *testing.T) Config {
	t.Helper()
	t.Setenv(daemonEnv, "1")
	cfg, err := ParseArgs(append(small, "--daemon-bin", os.Args[0], "--verify"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRunDaemonBin: a run starts the daemon as a child, times it to READY,
// verifies what it committed, stops it and leaves nothing behind.
func TestRunDaemonBin(t *testing.T) {
	leakcheck.Check(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	rep, err := Run(context.Background(), childConfig(t), nil)
	if err != nil {
		t.Fatalf("Run with --daemon-bin: %v", err)
	}
	if rep.Daemon != "child" || rep.DaemonReadyMs <= 0 || rep.FirstBatchMs <= 0 {
		t.Errorf("report daemon %q, ready %v ms, first batch %v ms; want child and positive times", rep.Daemon, rep.DaemonReadyMs, rep.FirstBatchMs)
	}
	// A daemon process of its own: its CPU read from /proc, apart from
	// the load generator's.
	checkClientSide(t, rep, cpuProcess)
	if rep.DaemonCPUS < 0 {
		t.Errorf("daemon_cpu_s = %v of a child daemon, want its CPU from /proc", rep.DaemonCPUS)
	}
	if !rep.Verified || rep.VerifiedMapOutputs != 6 || rep.Kept != "" {
		t.Errorf("report verified %v (%d map outputs), kept %q; want 6 verified, nothing kept", rep.Verified, rep.VerifiedMapOutputs, rep.Kept)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("the child daemon left %d entries in TMPDIR, e.g. %s", len(ents), ents[0].Name())
	}
}

// TestRunDaemonBinFails: a child that exits before READY fails the run
// with what it logged; a binary that cannot start is a usage error.
func TestRunDaemonBinFails(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv("TMPDIR", t.TempDir())
	cfg := childConfig(t)
	t.Setenv("SHUFFLED_LIMIT", "-5")
	_, err := Run(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "SHUFFLED_LIMIT") {
		t.Errorf("Run with a child refusing its config = %v, want an error quoting its SHUFFLED_LIMIT complaint", err)
	}
	cfg.DaemonBin = filepath.Join(t.TempDir(), "no-such-shuffled")
	if _, err := Run(context.Background(), cfg, nil); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--daemon-bin "+cfg.DaemonBin) {
		t.Errorf("Run with a missing --daemon-bin = %v, want a usage error naming it", err)
	}
}
