package loadgen

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/gpu"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args  []string
		check func(c Config) bool
		what  string
	}{
		{nil, func(c Config) bool { return c == DefaultConfig() }, "the defaults"},
		{[]string{"--duration", "5s"}, func(c Config) bool { return c.Tasks == 0 && c.Duration == 5*time.Second }, "unbounded tasks"},
		{[]string{"--duration", "5s", "--tasks", "7"}, func(c Config) bool { return c.Tasks == 7 }, "both bounds"},
		{[]string{"--compare"}, func(c Config) bool { return c.Compare && c.Tasks == DefaultCompareTasks }, "compare's default tasks"},
		{[]string{"--compare", "--tasks", "3"}, func(c Config) bool { return c.Tasks == 3 }, "compare's tasks given"},
		{[]string{"--skew", "zipf:1.1"}, func(c Config) bool { return c.Skew == 1.1 && c.SkewString() == "zipf:1.1" }, "zipf skew"},
		{[]string{"--codec", "ZSTD", "--checksum", "crc32c"}, func(c Config) bool { return c.Codec == "zstd" && c.Checksum == "CRC32C" }, "canonical names"},
		{[]string{"--checksum", "none"}, func(c Config) bool { return c.Checksum == "none" }, "no checksum"},
		{[]string{"--root", "rel", "--keep"}, func(c Config) bool { return strings.HasPrefix(c.Root, "/") && c.Keep }, "absolute root"},
		{[]string{"--payload", "opaque", "--data-plane", "inline"}, func(c Config) bool { return c.Payload == PayloadOpaque && c.DataPlane == PlaneInline }, "opaque inline"},
	}
	for _, tt := range tests {
		c, err := ParseArgs(tt.args, io.Discard)
		if err != nil {
			t.Errorf("ParseArgs(%q) = %v, want %s", tt.args, err, tt.what)
			continue
		}
		if !tt.check(c) {
			t.Errorf("ParseArgs(%q) = %+v, want %s", tt.args, c, tt.what)
		}
	}
}

func TestParseArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "0"}, "--partitions must be >= 1, got 0"},
		{[]string{"--partitions", "1048577"}, "--partitions must be <= 1048576, got 1048577"},
		{[]string{"--rows", "-1"}, "--rows must be >= 1, got -1"},
		{[]string{"--tasks", "0"}, "--tasks must be >= 1 (or give --duration), got 0"},
		{[]string{"--concurrency", "0"}, "--concurrency must be >= 1, got 0"},
		{[]string{"--batches-per-task", "0"}, "--batches-per-task must be >= 1, got 0"},
		{[]string{"--codec", "lz5"}, `--codec must be one of none, lz4, zstd, snappy, got "lz5"`},
		{[]string{"--checksum", "md5"}, `--checksum must be one of none, ADLER32, CRC32, CRC32C, got "md5"`},
		{[]string{"--schema", "orders"}, `--schema must be one of lineitem, ints, strings, wide, types, got "orders"`},
		{[]string{"--nulls", "1"}, `--nulls must be in [0, 1), got 1`},
		{[]string{"--nulls", "-0.5"}, `--nulls must be in [0, 1), got -0.5`},
		{[]string{"--skew", "zipf:0.5"}, `--skew must be uniform or zipf:S with 1 < S <= 10 (e.g. zipf:1.1), got "zipf:0.5"`},
		{[]string{"--skew", "pareto"}, `--skew must be uniform or zipf:S with 1 < S <= 10 (e.g. zipf:1.1), got "pareto"`},
		{[]string{"--payload", "rows"}, `--payload must be columnar, kudo or opaque, got "rows"`},
		{[]string{"--data-plane", "rdma"}, `--data-plane must be inline, memfd or cuda-ipc, got "rdma"`},
		{[]string{"--data-plane", "cuda-ipc"}, "--data-plane cuda-ipc needs --gpu (the batches must be in GPU memory)"},
		{[]string{"--cpu-compress"}, "--cpu-compress compresses device batches: it needs --gpu"},
		{[]string{"--keep"}, "--keep needs --root DIR: the temporary root of an embedded or --daemon-bin daemon is always removed"},
		{[]string{"--daemon-bin", "/d", "--keep"}, "--keep needs --root DIR: the temporary root of an embedded or --daemon-bin daemon is always removed"},
		{[]string{"--daemon-bin", "/d", "--socket", "/s"}, "--daemon-bin starts a daemon of its own; drop --socket /s or --daemon-bin"},
		{[]string{"--compare", "--daemon-bin", "/d"}, "--compare runs the writer in process; drop --daemon-bin /d"},
		{[]string{"--socket", "/s", "--root", "/r"}, "--root applies to the embedded daemon; with --socket /s the daemon decides where outputs go: drop one of them"},
		{[]string{"--compare", "--verify"}, "--verify checks a daemon run; drop it or --compare"},
		{[]string{"--compare", "--socket", "/s"}, "--compare runs the writer in process; drop --socket /s"},
		{[]string{"--reps", "0"}, "--reps must be >= 1, got 0"},
		{[]string{"--partitions", "many"}, `invalid value "many" for flag -partitions: parse error (run shuffled-loadgen -h for the flags)`},
		{[]string{"--fast"}, "flag provided but not defined: -fast (run shuffled-loadgen -h for the flags)"},
		{[]string{"extra"}, `unexpected argument "extra": every setting is a flag (run shuffled-loadgen -h)`},
	}
	for _, tt := range tests {
		_, err := ParseArgs(tt.args, io.Discard)
		if err == nil || err.Error() != tt.want || !errors.Is(err, ErrUsage) {
			t.Errorf("ParseArgs(%q) = %v, want %q (ErrUsage)", tt.args, err, tt.want)
		}
	}
}

func TestParseArgsHelp(t *testing.T) {
	var help strings.Builder
	if _, err := ParseArgs([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("ParseArgs(-h) = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"-tasks", "-partitions", "-verify", "-compare", "-data-plane", "-gpu", "-daemon-bin"} {
		if !strings.Contains(help.String(), name) {
			t.Errorf("help does not mention %s:\n%s", name, help.String())
		}
	}
}

func TestParseSkew(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"uniform", 0, true},
		{"zipf:1.1", 1.1, true},
		{"zipf:10", 10, true},
		{"zipf:1", 0, false},
		{"zipf:11", 0, false},
		{"zipf:", 0, false},
		{"zipf:NaN", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSkew(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSkew(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestParseArgsGPU: without the cuda tag --gpu is one line that says what
// build it needs; with it, --gpu defaults the data plane to cuda-ipc and
// wants a daemon in another process.
func TestParseArgsGPU(t *testing.T) {
	if !gpu.Supported {
		for _, args := range [][]string{{"--gpu"}, {"--gpu", "--socket", "/s"}, {"--gpu", "--daemon-bin", "/d", "--verify"}} {
			_, err := ParseArgs(args, io.Discard)
			const want = "--gpu needs a cuda build (make cuda): this shuffled-loadgen was built without the cuda tag"
			if err == nil || err.Error() != want || !errors.Is(err, ErrUsage) {
				t.Errorf("ParseArgs(%q) = %v, want %q (ErrUsage)", args, err, want)
			}
		}
		return
	}
	c, err := ParseArgs([]string{"--gpu", "--socket", "/s"}, io.Discard)
	if err != nil || c.DataPlane != PlaneCUDAIPC || !c.GPU {
		t.Errorf("ParseArgs(--gpu --socket /s) = %+v, %v; want GPU over cuda-ipc", c, err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpu"}, "--gpu needs a daemon in another process"},
		{[]string{"--gpu", "--socket", "/s", "--data-plane", "memfd"}, "--gpu hands batches over by CUDA IPC; drop --data-plane memfd"},
		{[]string{"--gpu", "--socket", "/s", "--payload", "opaque"}, "--gpu sends columnar batches that the GPU partitions; drop --payload opaque"},
	} {
		if _, err := ParseArgs(tt.args, io.Discard); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("ParseArgs(%q) = %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestDumpInputFlagChecks(t *testing.T) {
	for _, args := range [][]string{
		{"--dump-input", "/tmp/x"},                                            // columnar payload
		{"--dump-input", "/tmp/x", "--payload", "opaque", "--compare"},        // compare mode
		{"--dump-input", "/tmp/x", "--payload", "opaque", "--duration", "1s"}, // no task order
	} {
		if _, err := ParseArgs(args, io.Discard); !errors.Is(err, ErrUsage) {
			t.Errorf("ParseArgs(%q) = %v, want ErrUsage", args, err)
		}
	}
}
