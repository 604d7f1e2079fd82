package server_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"io/fs"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/server"
)

func defaults() server.Config {
	var c server.Config
	c.EnsureDefaults()
	return c
}

func TestEnsureDefaults(t *testing.T) {
	got := defaults()
	want := server.Config{
		SocketPath:           "/run/shuffled/shuffled.sock",
		Root:                 "/var/lib/shuffled",
		DiskLowWatermark:     "256MiB",
		LimitBytes:           512 << 20,
		PoolSize:             runtime.GOMAXPROCS(0),
		PartitionStateLimit:  256 << 20,
		MaxConnections:       4096,
		MaxConnectionsPerUID: 1024,
		HelloTimeout:         10 * time.Second,
		MemfdIdleGrace:       2 * time.Second,
		FrameMemory:          256 << 20,
		MaxOpenOutputs:       65536,
		DefaultCodec:         "lz4",
		DefaultChecksum:      "ADLER32",
		BlockSize:            32 << 10,
		DrainTimeout:         30 * time.Second,
		FileMode:             0o644,
		SocketMode:           0o660,
		MaxFrame:             64 << 20,
		LogLevel:             slog.LevelInfo,
		LogFormat:            "text",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EnsureDefaults() on a zero Config = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Validate() of the defaults = %v, want nil", err)
	}
}

func TestEnsureDefaultsKeepsSetFields(t *testing.T) {
	c := server.Config{LimitBytes: 1 << 20, PoolSize: 3, DefaultCodec: "ZSTD", DefaultChecksum: "crc32c", LogFormat: "JSON", Sync: true}
	c.EnsureDefaults()
	if c.LimitBytes != 1<<20 || c.PoolSize != 3 || !c.Sync {
		t.Errorf("EnsureDefaults() changed set fields: %+v", c)
	}
	if c.DefaultCodec != "zstd" || c.DefaultChecksum != "CRC32C" || c.LogFormat != "json" {
		t.Errorf("EnsureDefaults() names = %q, %q, %q, want %q, %q, %q",
			c.DefaultCodec, c.DefaultChecksum, c.LogFormat, "zstd", "CRC32C", "json")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		change func(*server.Config)
		want   string // "" means valid
	}{
		{func(c *server.Config) { c.LimitBytes = -5 }, "--limit: must be > 0, got -5"},
		{func(c *server.Config) { c.PoolSize = -1 }, "--pool: must be > 0, got -1"},
		{func(c *server.Config) { c.SocketPath = "shuffled.sock" }, `--socket: must be an absolute path, got "shuffled.sock"`},
		{func(c *server.Config) { c.SocketPath = "/" + strings.Repeat("s", 107) }, "--socket: must be at most 107 bytes"},
		{func(c *server.Config) { c.SocketPath = "/" + strings.Repeat("s", 106) }, ""},
		{func(c *server.Config) { c.Root = "var/lib" }, `--root: must be absolute paths, got "var/lib"`},
		{func(c *server.Config) { c.AllowedRoots = []string{"/data", "spark"} }, `--allowed-roots: must be absolute paths, got "spark"`},
		{func(c *server.Config) { c.AllowedRoots = []string{"/"} }, `--allowed-roots: "/" would allow every directory`},
		{func(c *server.Config) { c.AllowedRoots = []string{"/data1", "/data2"} }, ""},
		{func(c *server.Config) { c.DefaultCodec = "gzip" }, `--codec: must be one of none, lz4, zstd, snappy, got "gzip"`},
		{func(c *server.Config) { c.DefaultCodec = "none" }, ""},
		{func(c *server.Config) { c.DefaultChecksum = "MD5" }, `--checksum: must be one of none, ADLER32, CRC32, CRC32C, got "MD5"`},
		{func(c *server.Config) { c.DefaultChecksum = "" }, `--checksum: must be one of none, ADLER32, CRC32, CRC32C, got ""`},
		{func(c *server.Config) { c.DefaultChecksum = "none" }, ""},
		{func(c *server.Config) { c.BlockSize = 63 }, "--block-size: must be between 64 and 33554432 bytes (32MiB), got 63"},
		{func(c *server.Config) { c.BlockSize = 32<<20 + 1 }, "--block-size: must be between"},
		{func(c *server.Config) { c.BlockSize = 64 }, ""},
		{func(c *server.Config) { c.MetricsAddr = "0.0.0.0:9100" }, `--metrics-addr: must be a loopback host:port (127.0.0.1:9100, [::1]:9100, localhost:9100) unless --metrics-allow-remote is set, got "0.0.0.0:9100"`},
		{func(c *server.Config) { c.MetricsAddr, c.MetricsAllowRemote = "0.0.0.0:9100", true }, ""},
		{func(c *server.Config) { c.MetricsAddr, c.MetricsAllowRemote = "10.1.2.3:9100", true }, ""},
		{func(c *server.Config) { c.MetricsAddr, c.MetricsAllowRemote = "10.1.2.3", true }, `--metrics-addr: must be a host:port, got "10.1.2.3"`},
		{func(c *server.Config) { c.MetricsAddr = ":9100" }, `--metrics-addr: must be a loopback host:port`},
		{func(c *server.Config) { c.MetricsAddr = "10.1.2.3:9100" }, `--metrics-addr: must be a loopback host:port`},
		{func(c *server.Config) { c.MetricsAddr = "127.0.0.1:9100" }, ""},
		{func(c *server.Config) { c.MetricsAddr = "[::1]:9100" }, ""},
		{func(c *server.Config) { c.MetricsAddr = "localhost:9100" }, ""},
		{func(c *server.Config) { c.DrainTimeout = -time.Second }, "--drain-timeout: must be > 0, got -1s"},
		{func(c *server.Config) { c.FileMode = 0o4640 }, "--file-mode: must hold permission bits only (at most 0777), got 04640"},
		{func(c *server.Config) { c.FileMode = fs.ModeSetuid | 0o640 }, "--file-mode: must hold permission bits only"},
		{func(c *server.Config) { c.FileMode = 0o440 }, "--file-mode: must let the owner read and write (0600), got 0440"},
		{func(c *server.Config) { c.FileMode = 0o666 }, "--file-mode: must not be world-writable, got 0666"},
		{func(c *server.Config) { c.FileMode = 0o644 }, ""},
		{func(c *server.Config) { c.SocketMode = 0o060 }, "--socket-mode: must let the owner read and write (0600), got 060"},
		{func(c *server.Config) { c.SocketMode = 0o666 }, ""},
		{func(c *server.Config) { c.MaxFrame = 100 }, "--max-frame: must be between 65536 (64KiB) and 1073741824 (1GiB) bytes, got 100"},
		{func(c *server.Config) { c.Retention = -time.Hour }, "--retention: must be >= 0 (0 keeps outputs until removed), got -1h0m0s"},
		{func(c *server.Config) { c.Retention = 24 * time.Hour }, ""},
		{func(c *server.Config) { c.LogFormat = "xml" }, `--log-format: must be text or json, got "xml"`},
		{func(c *server.Config) { c.MaxConnections = -1 }, "--max-connections: must be > 0, got -1"},
		{func(c *server.Config) { c.MaxConnectionsPerUID = -1 }, "--max-connections-per-uid: must be > 0, got -1"},
		{func(c *server.Config) { c.MaxOpenOutputsPerUID = 65537 }, "--max-open-outputs-per-uid: must be >= 0 (0: half of --max-open-outputs) and at most --max-open-outputs (65536), got 65537"},
		{func(c *server.Config) { c.PartitionStateLimitPerUID = -1 }, "--partition-state-limit-per-uid: must be >= 0"},
		{func(c *server.Config) { c.HelloTimeout = -time.Second }, "--hello-timeout: must be > 0, got -1s"},
		{func(c *server.Config) { c.MemfdIdleGrace = -time.Second }, "--memfd-idle-grace: must be > 0 and at most 1m0s, got -1s"},
		{func(c *server.Config) { c.MemfdIdleGrace = 2 * time.Minute }, "--memfd-idle-grace: must be > 0 and at most 1m0s, got 2m0s"},
		{func(c *server.Config) { c.MemfdIdleGrace = time.Minute }, ""},
		{func(c *server.Config) { c.CUDACompressSlots = -1 }, "--cuda-compress-slots: must be in [0,64] (0: 4), got -1"},
		{func(c *server.Config) { c.CUDACompressSlots = 65 }, "--cuda-compress-slots: must be in [0,64] (0: 4), got 65"},
		{func(c *server.Config) { c.CUDACompressSlots = 64 }, ""},
		{func(c *server.Config) { c.FrameMemory = 1 << 20 }, "--frame-memory: must be at least --max-frame (67108864, 64MiB), got 1048576"},
		{func(c *server.Config) { c.MaxFrame = 512 << 20; c.FrameMemory = 0; c.EnsureDefaults() }, ""},
	}
	for _, tt := range tests {
		c := defaults()
		tt.change(&c)
		err := c.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("Validate() of %+v = %v, want nil", c, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, server.ErrInvalidConfig) {
			t.Errorf("Validate() = %v, want %v containing %q", err, server.ErrInvalidConfig, tt.want)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := defaults()
	c.LimitBytes, c.PoolSize, c.LogFormat = -5, 0, "xml"
	err := c.Validate()
	for _, want := range []string{"--limit: must be > 0, got -5", "--pool: must be > 0, got 0", `--log-format: must be text or json, got "xml"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to contain %q", err, want)
		}
	}
}

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestBindFlags(t *testing.T) {
	c := defaults()
	fs := newFlagSet()
	c.BindFlags(fs)
	err := fs.Parse([]string{
		"--socket=/tmp/s.sock", "--allowed-roots=/data1,/data2/", "--allowed-roots", "/data3",
		"--root=/srv/shuffled", "--limit=1g", "--pool=5", "--codec=ZSTD", "--checksum=crc32",
		"--block-size=64k", "--sync", "--metrics-addr=127.0.0.1:9100",
		"--allowed-uids=root,1000", "--allowed-gids=2000", "--drain-timeout=1m",
		"--file-mode=0644", "--socket-mode=0o600", "--max-frame=16MiB", "--retention=48h",
		"--log-level=debug", "--log-format=json", "--cuda-staging-prime",
		"--partition-state-limit=1MiB", "--max-open-outputs=100", "--no-cuda-compress",
		"--max-connections=10", "--max-connections-per-uid=3", "--frame-memory=32MiB",
		"--partition-state-limit-per-uid=512KiB", "--max-open-outputs-per-uid=40", "--hello-timeout=3s",
		"--memfd-idle-grace=500ms",
		"--cuda-compress-slots=12",
	})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := server.Config{
		SocketPath:                "/tmp/s.sock",
		AllowedRoots:              []string{"/data1", "/data2", "/data3"},
		Root:                      "/srv/shuffled",
		DiskLowWatermark:          "256MiB",
		LimitBytes:                1 << 30,
		PoolSize:                  5,
		PartitionStateLimit:       1 << 20,
		MaxOpenOutputs:            100,
		MaxConnections:            10,
		MaxConnectionsPerUID:      3,
		FrameMemory:               32 << 20,
		HelloTimeout:              3 * time.Second,
		MemfdIdleGrace:            500 * time.Millisecond,
		MaxOpenOutputsPerUID:      40,
		PartitionStateLimitPerUID: 512 << 10,
		DefaultCodec:              "zstd",
		DefaultChecksum:           "CRC32",
		BlockSize:                 64 << 10,
		Sync:                      true,
		MetricsAddr:               "127.0.0.1:9100",
		AllowedUIDs:               []uint32{0, 1000},
		AllowedGIDs:               []uint32{2000},
		DrainTimeout:              time.Minute,
		FileMode:                  0o644,
		SocketMode:                0o600,
		MaxFrame:                  16 << 20,
		Retention:                 48 * time.Hour,
		LogLevel:                  slog.LevelDebug,
		LogFormat:                 "json",
		CUDAStagingPrime:          true,
		CUDACompressSlots:         12,
		NoCUDACompress:            true,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("after flags:\n got %+v\nwant %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

func TestBindFlagsRejects(t *testing.T) {
	tests := []struct {
		arg, want string
	}{
		{"--limit=-5", `invalid size "-5"`},
		{"--limit=lots", `invalid size "lots"`},
		{"--block-size=1x", `unknown unit "x"`},
		{"--pool=many", `invalid integer "many"`},
		{"--sync=maybe", `invalid boolean "maybe"`},
		{"--drain-timeout=30", `invalid duration "30"`},
		{"--file-mode=0968", `invalid octal mode "0968"`},
		{"--log-level=loud", `invalid log level "loud"`},
		{"--allowed-uids=no-such-user-shuffled", `unknown user "no-such-user-shuffled"`},
		{"--allowed-gids=no-such-group-shuffled", `unknown group "no-such-group-shuffled"`},
		{"--allowed-uids=4294967295", `invalid id "4294967295"`},
		{"--allowed-uids=4294967296", `invalid id "4294967296"`},
	}
	for _, tt := range tests {
		c := defaults()
		fs := newFlagSet()
		c.BindFlags(fs)
		err := fs.Parse([]string{tt.arg})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tt.arg, err, tt.want)
		}
	}
}

func TestHelpShowsDefaultsAndEnv(t *testing.T) {
	c := defaults()
	fs := newFlagSet()
	c.BindFlags(fs)
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	fs.PrintDefaults()
	for _, want := range []string{
		"-limit size", "(env SHUFFLED_LIMIT) (default 512MiB)",
		"(env SHUFFLED_SOCKET) (default /run/shuffled/shuffled.sock)",
		"(env SHUFFLED_ALLOWED_ROOTS)", "(env SHUFFLED_METRICS_ADDR)",
		"(env SHUFFLED_FILE_MODE) (default 0644)", "(env SHUFFLED_DRAIN_TIMEOUT) (default 30s)",
		"(env SHUFFLED_LOG_LEVEL) (default info)",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, buf.String())
		}
	}
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestApplyEnv(t *testing.T) {
	c := defaults()
	err := c.ApplyEnv(env(map[string]string{
		"SHUFFLED_SOCKET":             "/tmp/e.sock",
		"SHUFFLED_LIMIT":              "2g",
		"SHUFFLED_SYNC":               "true",
		"SHUFFLED_ALLOWED_ROOTS":      "/a,/b",
		"SHUFFLED_ALLOWED_GIDS":       "0,7",
		"SHUFFLED_CHECKSUM":           "crc32c",
		"SHUFFLED_UNRELATED":          "ignored",
		"SHUFFLED_CUDA_STAGING_PRIME": "1",
	}))
	if err != nil {
		t.Fatalf("ApplyEnv: %v", err)
	}
	if c.SocketPath != "/tmp/e.sock" || c.LimitBytes != 2<<30 || !c.Sync || c.DefaultChecksum != "CRC32C" || !c.CUDAStagingPrime ||
		!reflect.DeepEqual(c.AllowedRoots, []string{"/a", "/b"}) || !reflect.DeepEqual(c.AllowedGIDs, []uint32{0, 7}) {
		t.Errorf("after ApplyEnv: %+v", c)
	}
}

func TestApplyEnvReportsEveryBadVariable(t *testing.T) {
	c := defaults()
	err := c.ApplyEnv(env(map[string]string{
		"SHUFFLED_LIMIT": "-5",
		"SHUFFLED_POOL":  "x",
		"SHUFFLED_ROOT":  "/srv",
	}))
	if !errors.Is(err, server.ErrInvalidConfig) {
		t.Fatalf("ApplyEnv = %v, want %v", err, server.ErrInvalidConfig)
	}
	for _, want := range []string{`SHUFFLED_LIMIT: invalid size "-5"`, `SHUFFLED_POOL: invalid integer "x"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ApplyEnv = %v, want it to contain %q", err, want)
		}
	}
	if c.Root != "/srv" {
		t.Errorf("ApplyEnv with other bad variables left Root = %q, want %q", c.Root, "/srv")
	}
}

func TestLoadPrecedence(t *testing.T) {
	vars := env(map[string]string{
		"SHUFFLED_LIMIT":         "1g",
		"SHUFFLED_POOL":          "3",
		"SHUFFLED_ALLOWED_ROOTS": "/env1,/env2",
		"SHUFFLED_SYNC":          "true",
		"SHUFFLED_DRAIN_TIMEOUT": "0", // zero means the default
	})
	var c server.Config
	args := []string{"--limit=2g", "--allowed-roots=/flag1", "--allowed-roots=/flag2,/flag3", "--sync=false", "--max-frame=512MiB"}
	if err := c.Load(newFlagSet(), args, vars); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.LimitBytes != 2<<30 {
		t.Errorf("LimitBytes = %d, want %d (flag over env)", c.LimitBytes, 2<<30)
	}
	if c.PoolSize != 3 {
		t.Errorf("PoolSize = %d, want 3 (env over default)", c.PoolSize)
	}
	if want := []string{"/flag1", "/flag2", "/flag3"}; !reflect.DeepEqual(c.AllowedRoots, want) {
		t.Errorf("AllowedRoots = %q, want %q (flags replace the env list, then append)", c.AllowedRoots, want)
	}
	if c.Sync {
		t.Error("Sync = true, want false (flag over env)")
	}
	if c.DrainTimeout != 30*time.Second {
		t.Errorf("DrainTimeout = %v, want the default 30s", c.DrainTimeout)
	}
	if c.FrameMemory != 512<<20 {
		t.Errorf("FrameMemory = %d with --max-frame=512MiB, want it raised to 512 MiB", c.FrameMemory)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		args []string
		vars map[string]string
		want string
	}{
		{[]string{"--pool=-2"}, nil, "--pool: must be > 0, got -2"},
		{nil, map[string]string{"SHUFFLED_METRICS_ADDR": "0.0.0.0:9100"}, `--metrics-addr: must be a loopback host:port`},
		{nil, map[string]string{"SHUFFLED_LIMIT": "many"}, `SHUFFLED_LIMIT: invalid size "many"`},
		{[]string{"--no-such-flag"}, nil, "flag provided but not defined: -no-such-flag"},
	}
	for _, tt := range tests {
		var c server.Config
		err := c.Load(newFlagSet(), tt.args, env(tt.vars))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q, %v) = %v, want an error containing %q", tt.args, tt.vars, err, tt.want)
		}
	}
}
