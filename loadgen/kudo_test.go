package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
)

// TestMainKudoVerifies runs `--payload kudo --verify` through the
// embedded daemon for every codec, one run and several, on a schema with
// a column of every type: each partition must decode to the rows sent.
func TestMainKudoVerifies(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv("TMPDIR", t.TempDir())
	for _, codec := range []string{"lz4", "zstd", "snappy", "none"} {
		for _, batches := range []int{1, 3} {
			args := append(append([]string{}, small...), "--verify", "--json", "--payload", "kudo", "--schema", "types",
				"--nulls", "0.1", "--codec", codec, "--batches-per-task", fmt.Sprint(batches))
			code, out, errOut := mainRun(t, args...)
			if code != ExitOK {
				t.Fatalf("Main(%q) = %d, stderr %q", args, code, errOut)
			}
			var rep map[string]any
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep["verified"] != true || rep["payload"] != "kudo" || rep["verified_partitions"] != 96.0 || rep["runs_per_map_output"] != float64(batches) {
				t.Fatalf("Main(%q) report: verified %v payload %v partitions %v runs %v", args, rep["verified"], rep["payload"], rep["verified_partitions"], rep["runs_per_map_output"])
			}
		}
	}
}

// TestEngineKudoVerifies: the in-process writer writes kudo tables that
// verify, and verify notices a kudo output read as the wrong payload.
func TestEngineKudoVerifies(t *testing.T) {
	cfg := smallConfig()
	cfg.Payload, cfg.Schema, cfg.Codec = PayloadKudo, "types", "zstd"
	p, res := runEngine(t, cfg)
	if _, err := verify(context.Background(), &cfg, p, res); err != nil {
		t.Fatalf("verify: %v", err)
	}
	m, err := shufflefile.Open(vfs.Default, shufflefile.Flat(res.tasks[0].dir), shufflefile.ID{Map: 0}, cfg.checksumAlg())
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	raw, err := os.ReadFile(m.DataPath)
	if err != nil || len(raw) == 0 {
		t.Fatalf("data file: %d bytes, %v", len(raw), err)
	}
	other := cfg
	other.Payload = PayloadColumnar
	if _, err := verify(context.Background(), &other, p, res); err == nil {
		t.Fatal("verify of kudo tables as blocks succeeded")
	}
	if b, _ := p.source(0); b != nil && partition.KudoSize(b, 0, b.Rows) <= 0 {
		t.Fatal("no kudo table for the pool's first batch")
	}
}
