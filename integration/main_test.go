package integration

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var long = flag.Bool("long", false, "run the long variants (more kill rounds, more hostile connections)")

// binDir holds the shuffled binary the tests run; it is traversable by any
// user, so a child that drops its uid can run a copy of the test binary
// from it.
var (
	binDir  string
	binPath string
)

// helperEnv, when set, makes the test binary act as a helper child (see
// runHelper) instead of running tests.
const helperEnv = "SHUFFLED_INTEGRATION_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	flag.Parse()
	code, err := buildAndRun(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func buildAndRun(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "shuffled-integration-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return 0, err
	}
	binDir, binPath = dir, filepath.Join(dir, "shuffled")
	if prebuilt := os.Getenv("SHUFFLED_BIN"); prebuilt != "" {
		// A machine without a Go toolchain runs a binary built elsewhere.
		data, err := os.ReadFile(prebuilt)
		if err != nil {
			return 0, fmt.Errorf("SHUFFLED_BIN: %w", err)
		}
		if err := os.WriteFile(binPath, data, 0o755); err != nil {
			return 0, err
		}
		return m.Run(), nil
	}
	// Without -race: the daemon is a separate process, and the race
	// detector would slow it and bloat the RSS the hostile test watches.
	// go test puts its own GOROOT/bin first on PATH.
	cmd := exec.Command("go", "build", "-o", binPath, "github.com/shuffled/shuffled/cmd/shuffled")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("go build ./cmd/shuffled: %w", err)
	}
	return m.Run(), nil
}
