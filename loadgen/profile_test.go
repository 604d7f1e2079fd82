package loadgen

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// TestRecordings: --cpuprofile writes a CPU profile (gzip-compressed, as
// runtime/pprof writes it) and --trace an execution trace (runtime/trace's
// header) of a run, both at once; each refuses a file that exists,
// leaving it as it was, and is a usage error with --compare.
func TestRecordings(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv("TMPDIR", t.TempDir())
	dir := t.TempDir()
	prof, tr := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "run.trace")
	args := append(append([]string{}, small...), "--cpuprofile", prof, "--trace", tr)
	if code, _, errOut := mainRun(t, args...); code != ExitOK {
		t.Fatalf("Main(%q) = %d, stderr %q", args, code, errOut)
	}
	for _, f := range []struct {
		path, magic string
	}{{prof, "\x1f\x8b"}, {tr, "go 1."}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte(f.magic)) || len(b) < 100 {
			t.Errorf("%s: %d bytes, starting %q: want a recording starting %q", f.path, len(b), b[:min(len(b), 8)], f.magic)
		}
	}
	for _, flag := range []string{"--cpuprofile", "--trace"} {
		path := filepath.Join(dir, "exists"+flag)
		if err := os.WriteFile(path, []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append(append([]string{}, small...), flag, path)
		code, _, errOut := mainRun(t, args...)
		if code == ExitOK || !strings.Contains(errOut, flag+":") || !strings.Contains(errOut, "file exists") {
			t.Errorf("Main(%q) over an existing file = %d, stderr %q; want a failure naming %s", args, code, errOut, flag)
		}
		if b, _ := os.ReadFile(path); string(b) != "kept" {
			t.Errorf("%s: the existing file now holds %q, want it untouched", flag, b)
		}
		if _, err := ParseArgs([]string{flag, path, "--compare"}, io.Discard); !errors.Is(err, ErrUsage) {
			t.Errorf("ParseArgs(%s with --compare) = %v, want ErrUsage", flag, err)
		}
	}
}
