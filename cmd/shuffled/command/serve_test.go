package command

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/testkit"
)

// --cpu-profile (or its variable SHUFFLED_CPU_PROFILE) writes a profile of
// the run that ends at the drain, and refuses a file that exists (it never
// overwrites one).
func TestServeCPUProfile(t *testing.T) {
	t.Run("flag", func(t *testing.T) { testServeCPUProfile(t, false) })
	t.Run("env", func(t *testing.T) { testServeCPUProfile(t, true) })
}

func testServeCPUProfile(t *testing.T, env bool) {
	dir, err := os.MkdirTemp("", "serve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prof := filepath.Join(dir, "cpu.prof")
	args := []string{"--socket", filepath.Join(dir, "s.sock"), "--root", filepath.Join(dir, "root")}
	if env {
		t.Setenv(cpuProfileEnv, prof)
	} else {
		args = append(args, "--cpu-profile", prof)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs testkit.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- serve(ctx, args, io.Discard, &logs) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "shuffled ready") {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile of %d bytes does not start as gzip (pprof's format): % x", len(b), b[:min(len(b), 4)])
	}

	err = serve(context.Background(), args, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--cpu-profile") || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("serve with an existing profile file: %v, want an error naming --cpu-profile and that the file exists", err)
	}
}

// TestServeFlagsHaveVariables walks every flag `shuffled serve -h` lists,
// whatever registered it (server.Config or serve itself), and checks that
// its usage names its variable, SHUFFLED_ and the flag's name in upper case
// with '-' as '_' (the README: "Every flag has an environment variable").
// server.Config's flags take theirs through ApplyEnv (its tests); serve's
// own, --cpu-profile, is checked working by TestServeCPUProfile.
func TestServeFlagsHaveVariables(t *testing.T) {
	var help strings.Builder
	if err := serve(context.Background(), []string{"-h"}, io.Discard, &help); err != nil {
		t.Fatalf("serve -h: %v", err)
	}
	usage := map[string]string{} // flag name -> its usage lines
	var name string
	for line := range strings.Lines(help.String()) {
		switch {
		case strings.HasPrefix(line, "  -"):
			name, _, _ = strings.Cut(strings.TrimSpace(line[3:]), " ")
			usage[name] = ""
		case strings.HasPrefix(line, "    \t") && name != "":
			usage[name] += line
		}
	}
	if len(usage) < 30 || usage["limit"] == "" || usage["cpu-profile"] == "" {
		t.Fatalf("serve -h listed %d flags (want every flag, --limit and --cpu-profile among them):\n%s", len(usage), help.String())
	}
	for name, text := range usage {
		env := "SHUFFLED_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if !strings.Contains(text, "(env "+env+")") {
			t.Errorf("--%s has no environment variable: its usage does not name (env %s): %q", name, env, text)
		}
	}
}
