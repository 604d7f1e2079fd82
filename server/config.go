package server

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/writer"
)

// ErrInvalidConfig is wrapped by every error of Validate and ApplyEnv.
var ErrInvalidConfig = errdefs.New(errdefs.ErrInvalidArgument, "server: invalid configuration")

// Config is the configuration of `shuffled serve`. The zero value plus
// EnsureDefaults is the default configuration.
//
// Sources, by precedence: command-line flags, then SHUFFLED_* environment
// variables (the flag name in upper case with '-' as '_': --limit is
// SHUFFLED_LIMIT, --allowed-roots is SHUFFLED_ALLOWED_ROOTS), then the
// defaults. Load applies them in that order; a caller that does it by hand
// calls ApplyEnv before parsing the flags that BindFlags registered, so the
// flags overwrite what the environment set.
type Config struct {
	// SocketPath is the Unix socket clients connect to (--socket).
	// Default /run/shuffled/shuffled.sock.
	SocketPath string
	// AllowedRoots are the directories under which registered Spark local
	// dirs may lie, after symbolic links are resolved (--allowed-roots).
	// Empty, the default: no Spark local dir is accepted, and every
	// executor writes under Root.
	AllowedRoots []string
	// Root is the daemon's own root, where executors that register no local
	// dirs get <root>/<app>/<executor>/ (--root). Several comma-separated
	// directories, one per disk, spread map outputs over the disks (round
	// robin among those above the low watermark). Default /var/lib/shuffled.
	Root string
	// DiskLowWatermark and DiskHighWatermark bound the free space of each
	// root disk, as a size (1GiB) or a percentage of the disk (5%): below
	// the low watermark new map outputs are refused and writes in flight
	// fail; above the high one they are accepted again. Defaults 256MiB and
	// twice the low watermark.
	DiskLowWatermark, DiskHighWatermark string

	// LimitBytes bounds the bytes held by records in flight, daemon-wide
	// (--limit). Default 512 MiB: a fixed bound keeps the daemon's footprint
	// predictable whatever the host's memory or cgroup limit (a fraction of
	// "memory" misreads containers), and it keeps 64 compressors fed with
	// two 4 MiB records each; beyond that, memory buys no throughput.
	LimitBytes int64
	// PoolSize is the number of goroutines that serialize and compress
	// records (--pool). Default GOMAXPROCS, which follows the CPU quota.
	PoolSize int
	// PartitionStateLimit bounds the memory that open map outputs hold per
	// partition (lengths, checksums and run tables, charged at Open as
	// num_partitions x PartitionStateBytes), daemon-wide
	// (--partition-state-limit). Default 256 MiB: about 10 million open
	// partitions. An Open over it is refused (ResourceExhausted).
	PartitionStateLimit int64
	// MaxOpenOutputs bounds the map outputs open at once, daemon-wide
	// (--max-open-outputs). Default 65536; one connection holds at most
	// MaxOutputsPerConnection of them.
	MaxOpenOutputs int
	// PartitionStateLimitPerUID and MaxOpenOutputsPerUID bound what the map
	// outputs of one peer uid take of PartitionStateLimit and
	// MaxOpenOutputs (--partition-state-limit-per-uid,
	// --max-open-outputs-per-uid), so that one uid cannot keep every
	// other from opening map outputs. 0 (the default) is half of each
	// (uidStateLimit, uidOutputLimit); at most all.
	PartitionStateLimitPerUID int64
	MaxOpenOutputsPerUID      int
	// HelloTimeout bounds how long a connection may take to send its Hello
	// (--hello-timeout): one that has not sent a whole Hello by then is
	// closed, so a connection that never speaks holds no slot of
	// --max-connections for long. Default 10s.
	HelloTimeout time.Duration
	// MaxConnections bounds the connections open at once, daemon-wide
	// (--max-connections), and MaxConnectionsPerUID those of one peer uid
	// (--max-connections-per-uid). Defaults 4096 and 1024. A connection
	// past either is told so (an Error at request id 0, ResourceExhausted)
	// and closed.
	MaxConnections       int
	MaxConnectionsPerUID int
	// FrameMemory bounds the payloads of the frames that connections are
	// reading or handing over, daemon-wide (--frame-memory): a frame of more
	// than 64 KiB waits for its share before the daemon reads its payload,
	// holds it until the request is applied (an inline batch's bytes then
	// count under the bytes-in-flight limit) and must arrive within a
	// minute. Default 256 MiB; EnsureDefaults raises it to MaxFrame, so that
	// one frame always fits. One peer uid's frames hold at most half of it (or MaxFrame
	// if that is more), so that one uid cannot hold every other's back.
	FrameMemory int64

	// DefaultCodec is used when a map output names none (--codec): none,
	// lz4, zstd or snappy. Default lz4, as Spark.
	DefaultCodec string
	// DefaultChecksum is used when a map output names none (--checksum):
	// none, ADLER32, CRC32 or CRC32C. Default ADLER32, as Spark.
	DefaultChecksum string
	// BlockSize is the lz4 and snappy block size in bytes (--block-size) of
	// map outputs that name none (OpenMapOutput.block_size 0); Spark's
	// spark.io.compression.{lz4,snappy}.blockSize. Default 32 KiB.
	BlockSize int
	// Sync makes a commit fsync the data and index files before renaming
	// them (--sync). Default off, as Spark: a commit is atomic against a
	// process crash either way; Sync adds durability against a power loss.
	Sync bool

	// MetricsAddr serves Prometheus metrics at /metrics on this loopback
	// host:port (--metrics-addr). Empty, the default, serves none.
	MetricsAddr string
	// MetricsAllowRemote lets MetricsAddr be any address, not only a
	// loopback one (--metrics-allow-remote): the endpoint then serves the
	// metrics and the health probes to anyone who can reach the port.
	MetricsAllowRemote bool
	// AllowedUIDs and AllowedGIDs are the peers allowed to connect besides
	// root and the daemon's own user (--allowed-uids, --allowed-gids;
	// names or numbers). A peer is allowed by its uid, or by its primary or
	// any supplementary group. Both empty, the default: only root and the
	// daemon's own user; a deployment names the executors' user or a group
	// they share.
	AllowedUIDs []uint32
	AllowedGIDs []uint32

	// DrainTimeout is how long SIGTERM lets open map outputs finish before
	// aborting them (--drain-timeout). Default 30s. The systemd unit's
	// TimeoutStopSec= must exceed it.
	DrainTimeout time.Duration
	// FileMode is the mode of the shuffle files written (--file-mode).
	// Default 0644, as Spark makes shuffle files when the external shuffle
	// service serves them (SPARK-37618); 0640 limits them to the group of
	// the local dirs. World-writable modes are refused.
	FileMode fs.FileMode
	// SocketMode is the mode of the Unix socket (--socket-mode). Default
	// 0660; peer credentials are checked on top of it.
	SocketMode fs.FileMode
	// MaxFrame is the largest protocol frame accepted, in bytes
	// (--max-frame). Default 64 MiB; larger batches go through a memfd.
	MaxFrame int
	// Retention removes the outputs of an application that has been idle
	// this long (--retention). Zero, the default, keeps them until the
	// engine removes them.
	Retention time.Duration

	// LogLevel is the least level logged (--log-level). Default info.
	LogLevel slog.Level
	// LogFormat is text or json (--log-format). Default text.
	LogFormat string

	// CUDAStagingPrime makes a daemon with the GPU data plane (built with
	// the cuda tag) open every CUDA device and pin its staging buffers
	// before it serves, instead of at the first batch in device memory
	// (--cuda-staging-prime). Default off: startup stays cheap and the
	// first device batch pays (docs/benchmarks.md, "GPU", measures both).
	// A build without the GPU data plane accepts it and ignores it.
	CUDAStagingPrime bool
	// NoCUDACompress keeps a daemon with the GPU data plane from
	// compressing the device batches of lz4 map outputs on the GPU
	// (--no-cuda-compress): they are copied to the host and compressed by
	// the CPU pool. By default they are compressed on the GPU: the records
	// leave the device as finished lz4-java streams and the CPU only
	// checksums and writes them, faster and with a fraction of the CPU
	// (docs/benchmarks.md, "GPU"). Other codecs, block sizes over 64 KiB,
	// and columnar batches the GPU plans do not cover (gpu.Covers: today
	// SHFC and kudo with every column type) always use the CPU pool. A
	// build without the GPU data plane accepts it and ignores it.
	NoCUDACompress bool
}

// defaultConfig holds the value EnsureDefaults gives each zero field, except
// PoolSize, which is GOMAXPROCS at the time of the call.
var defaultConfig = Config{
	SocketPath:           "/run/shuffled/shuffled.sock",
	Root:                 "/var/lib/shuffled",
	DiskLowWatermark:     "256MiB",
	LimitBytes:           writer.DefaultLimit,
	PartitionStateLimit:  256 << 20,
	MaxOpenOutputs:       65536,
	MaxConnections:       4096,
	MaxConnectionsPerUID: 1024,
	HelloTimeout:         10 * time.Second,
	FrameMemory:          256 << 20,
	DefaultCodec:         "lz4",
	DefaultChecksum:      "ADLER32",
	BlockSize:            32 << 10,
	DrainTimeout:         30 * time.Second,
	FileMode:             shufflefile.DefaultFileMode,
	SocketMode:           0o660,
	MaxFrame:             protocol.DefaultMaxFrame,
	LogFormat:            "text",
}

// Bounds that Validate enforces.
const (
	maxSocketPath = 107 // sun_path holds 108 bytes with the NUL
	minBlockSize  = 64  // lz4-java's LZ4BlockOutputStream bounds
	maxBlockSize  = 32 << 20
	minMaxFrame   = protocol.MinMaxFrame
	maxMaxFrame   = 1 << 30
)

// codecNames are the codecs a map output may name.
var codecNames = []string{"none", "lz4", "zstd", "snappy"}

// uidStateLimit is what the open map outputs of one peer uid may hold of
// the partition state: PartitionStateLimitPerUID, or half of
// PartitionStateLimit when that is 0.
func (c *Config) uidStateLimit() int64 {
	if c.PartitionStateLimitPerUID > 0 {
		return c.PartitionStateLimitPerUID
	}
	return max(c.PartitionStateLimit/2, 1)
}

// uidOutputLimit is how many map outputs one peer uid may have open:
// MaxOpenOutputsPerUID, or half of MaxOpenOutputs when that is 0.
func (c *Config) uidOutputLimit() int {
	if c.MaxOpenOutputsPerUID > 0 {
		return c.MaxOpenOutputsPerUID
	}
	return max(c.MaxOpenOutputs/2, 1)
}

// EnsureDefaults sets every zero field to its default and spells the codec
// and checksum names the canonical way (lz4, ADLER32). It returns c.
func (c *Config) EnsureDefaults() *Config {
	d := defaultConfig
	setDefault(&c.SocketPath, d.SocketPath)
	setDefault(&c.Root, d.Root)
	setDefault(&c.DiskLowWatermark, d.DiskLowWatermark)
	setDefault(&c.LimitBytes, d.LimitBytes)
	setDefault(&c.PoolSize, runtime.GOMAXPROCS(0))
	setDefault(&c.PartitionStateLimit, d.PartitionStateLimit)
	setDefault(&c.MaxOpenOutputs, d.MaxOpenOutputs)
	setDefault(&c.MaxConnections, d.MaxConnections)
	setDefault(&c.MaxConnectionsPerUID, d.MaxConnectionsPerUID)
	setDefault(&c.HelloTimeout, d.HelloTimeout)
	setDefault(&c.DefaultCodec, d.DefaultCodec)
	setDefault(&c.DefaultChecksum, d.DefaultChecksum)
	setDefault(&c.BlockSize, d.BlockSize)
	setDefault(&c.DrainTimeout, d.DrainTimeout)
	setDefault(&c.FileMode, d.FileMode)
	setDefault(&c.SocketMode, d.SocketMode)
	setDefault(&c.MaxFrame, d.MaxFrame)
	setDefault(&c.FrameMemory, d.FrameMemory)
	c.FrameMemory = max(c.FrameMemory, int64(c.MaxFrame)) // one frame always fits
	setDefault(&c.LogFormat, d.LogFormat)
	c.DefaultCodec = canonicalCodec(c.DefaultCodec)
	c.DefaultChecksum = canonicalChecksum(c.DefaultChecksum)
	c.LogFormat = strings.ToLower(c.LogFormat)
	return c
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// canonicalCodec lower-cases a known codec name and leaves anything else
// for Validate to report.
func canonicalCodec(s string) string {
	if lower := strings.ToLower(s); isCodec(lower) {
		return lower
	}
	return s
}

func isCodec(s string) bool {
	switch s {
	case "none", "lz4", "zstd", "snappy":
		return true
	}
	return false
}

// canonicalChecksum spells a known algorithm as Spark does and leaves
// anything else for Validate to report.
func canonicalChecksum(s string) string {
	if a, err := checksum.Parse(s); err == nil && s != "" {
		return a.String()
	}
	return s
}

// RootDirs returns the directories of Root.
func (c *Config) RootDirs() []string {
	var dirs []string
	for d := range strings.SplitSeq(c.Root, ",") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		dirs = []string{c.Root}
	}
	return dirs
}

// Validate reports every invalid field, each named by its flag with the
// offending value, e.g. "--limit: must be > 0, got -5". It checks values
// only; whether the paths exist is the server's concern at start.
func (c *Config) Validate() error {
	var problems []error
	bad := func(flagName, format string, args ...any) {
		problems = append(problems, fmt.Errorf("--%s: %s", flagName, fmt.Sprintf(format, args...)))
	}

	switch {
	case !filepath.IsAbs(c.SocketPath):
		bad("socket", "must be an absolute path, got %q", c.SocketPath)
	case len(c.SocketPath) > maxSocketPath:
		bad("socket", "must be at most %d bytes to fit a socket address, got %d bytes: %q",
			maxSocketPath, len(c.SocketPath), c.SocketPath)
	}
	for _, r := range c.RootDirs() {
		if !filepath.IsAbs(r) {
			bad("root", "must be absolute paths, got %q", r)
		}
	}
	if _, err := disks.ParseWatermark(c.DiskLowWatermark); err != nil {
		bad("disk-low-watermark", "%v", err)
	}
	if c.DiskHighWatermark != "" {
		if _, err := disks.ParseWatermark(c.DiskHighWatermark); err != nil {
			bad("disk-high-watermark", "%v", err)
		}
	}
	for _, r := range c.AllowedRoots {
		switch {
		case !filepath.IsAbs(r):
			bad("allowed-roots", "must be absolute paths, got %q", r)
		case filepath.Clean(r) == "/":
			bad("allowed-roots", "%q would allow every directory; name the parent of the Spark local dirs", r)
		}
	}

	if c.LimitBytes <= 0 {
		bad("limit", "must be > 0, got %d", c.LimitBytes)
	}
	if c.PoolSize <= 0 {
		bad("pool", "must be > 0, got %d", c.PoolSize)
	}
	if c.PartitionStateLimit <= 0 {
		bad("partition-state-limit", "must be > 0, got %d", c.PartitionStateLimit)
	}
	if c.MaxOpenOutputs <= 0 {
		bad("max-open-outputs", "must be > 0, got %d", c.MaxOpenOutputs)
	}
	if c.PartitionStateLimitPerUID < 0 || c.PartitionStateLimitPerUID > c.PartitionStateLimit {
		bad("partition-state-limit-per-uid", "must be >= 0 (0: half of --partition-state-limit) and at most --partition-state-limit (%d), got %d", c.PartitionStateLimit, c.PartitionStateLimitPerUID)
	}
	if c.MaxOpenOutputsPerUID < 0 || c.MaxOpenOutputsPerUID > c.MaxOpenOutputs {
		bad("max-open-outputs-per-uid", "must be >= 0 (0: half of --max-open-outputs) and at most --max-open-outputs (%d), got %d", c.MaxOpenOutputs, c.MaxOpenOutputsPerUID)
	}
	if c.HelloTimeout <= 0 {
		bad("hello-timeout", "must be > 0, got %v", c.HelloTimeout)
	}
	if c.MaxConnections <= 0 {
		bad("max-connections", "must be > 0, got %d", c.MaxConnections)
	}
	if c.MaxConnectionsPerUID <= 0 {
		bad("max-connections-per-uid", "must be > 0, got %d", c.MaxConnectionsPerUID)
	}
	if c.FrameMemory < int64(c.MaxFrame) {
		bad("frame-memory", "must be at least --max-frame (%d, %s), got %d", c.MaxFrame, FormatSize(int64(c.MaxFrame)), c.FrameMemory)
	}
	if !isCodec(c.DefaultCodec) {
		bad("codec", "must be one of %s, got %q", strings.Join(codecNames, ", "), c.DefaultCodec)
	}
	if _, err := checksum.Parse(c.DefaultChecksum); err != nil || c.DefaultChecksum == "" {
		bad("checksum", "must be one of none, ADLER32, CRC32, CRC32C, got %q", c.DefaultChecksum)
	}
	if c.BlockSize < minBlockSize || c.BlockSize > maxBlockSize {
		bad("block-size", "must be between %d and %d bytes (%s), got %d",
			minBlockSize, maxBlockSize, FormatSize(maxBlockSize), c.BlockSize)
	}
	if c.MetricsAddr != "" {
		if err := metrics.ValidateAddr(c.MetricsAddr, c.MetricsAllowRemote); err != nil {
			if c.MetricsAllowRemote {
				bad("metrics-addr", "must be a host:port, got %q", c.MetricsAddr)
			} else {
				bad("metrics-addr", "must be a loopback host:port (127.0.0.1:9100, [::1]:9100, localhost:9100) unless --metrics-allow-remote is set, got %q", c.MetricsAddr)
			}
		}
	}
	if c.DrainTimeout <= 0 {
		bad("drain-timeout", "must be > 0, got %v", c.DrainTimeout)
	}
	switch m := c.FileMode; {
	case m&^fs.ModePerm != 0:
		bad("file-mode", "must hold permission bits only (at most 0777), got %#o", uint32(m))
	case m&0o600 != 0o600:
		bad("file-mode", "must let the owner read and write (0600), got %#o", uint32(m))
	case m&0o002 != 0:
		bad("file-mode", "must not be world-writable, got %#o", uint32(m))
	}
	switch m := c.SocketMode; {
	case m&^fs.ModePerm != 0:
		bad("socket-mode", "must hold permission bits only (at most 0777), got %#o", uint32(m))
	case m&0o600 != 0o600:
		bad("socket-mode", "must let the owner read and write (0600), got %#o", uint32(m))
	}
	if c.MaxFrame < minMaxFrame || c.MaxFrame > maxMaxFrame {
		bad("max-frame", "must be between %d (%s) and %d (%s) bytes, got %d",
			minMaxFrame, FormatSize(minMaxFrame), maxMaxFrame, FormatSize(maxMaxFrame), c.MaxFrame)
	}
	if c.Retention < 0 {
		bad("retention", "must be >= 0 (0 keeps outputs until removed), got %v", c.Retention)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log-format", "must be text or json, got %q", c.LogFormat)
	}

	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
}

// setting ties one field to its flag name, its environment variable and a
// flag.Value that parses into the field.
type setting struct {
	name  string
	usage string
	value flag.Value
}

func (s setting) env() string {
	return "SHUFFLED_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

// settings lists every field of c with a fresh flag.Value bound to it.
func (c *Config) settings() []setting {
	return []setting{
		{"socket", "Unix socket `path` clients connect to", stringValue(&c.SocketPath, nil)},
		{"allowed-roots", "comma-separated `dirs` under which registered Spark local dirs may lie (repeatable)", pathListValue(&c.AllowedRoots)},
		{"root", "the daemon's own root `dirs` (comma-separated, one per disk), for executors that register no local dirs", stringValue(&c.Root, nil)},
		{"disk-low-watermark", "free space (`size` or percentage) below which a root disk refuses new map outputs", stringValue(&c.DiskLowWatermark, nil)},
		{"disk-high-watermark", "free space (`size` or percentage) above which a full root disk is used again (default twice the low)", stringValue(&c.DiskHighWatermark, nil)},
		{"limit", "bytes-in-flight limit of the whole daemon, a `size` such as 512MiB or 1g", sizeValue(&c.LimitBytes)},
		{"pool", "`goroutines` that serialize and compress records", intValue(&c.PoolSize)},
		{"partition-state-limit", "memory `size` that open map outputs may hold per partition, daemon-wide", sizeValue(&c.PartitionStateLimit)},
		{"max-open-outputs", "map outputs open at once, daemon-wide (`count`)", intValue(&c.MaxOpenOutputs)},
		{"partition-state-limit-per-uid", "memory `size` the open map outputs of one peer uid may hold per partition (0: half of --partition-state-limit)", sizeValue(&c.PartitionStateLimitPerUID)},
		{"max-open-outputs-per-uid", "map outputs one peer uid may have open at once (`count`; 0: half of --max-open-outputs)", intValue(&c.MaxOpenOutputsPerUID)},
		{"hello-timeout", "`duration` a new connection has to send its Hello before it is closed", durationValue(&c.HelloTimeout)},
		{"max-connections", "client connections open at once, daemon-wide (`count`)", intValue(&c.MaxConnections)},
		{"max-connections-per-uid", "client connections open at once from one peer uid (`count`)", intValue(&c.MaxConnectionsPerUID)},
		{"frame-memory", "memory `size` for the payloads of the frames connections are reading, daemon-wide (raised to --max-frame if below it)", sizeValue(&c.FrameMemory)},
		{"codec", "default `codec`: none, lz4, zstd, snappy", stringValue(&c.DefaultCodec, canonicalCodec)},
		{"checksum", "default checksum `algorithm`: none, ADLER32, CRC32, CRC32C", stringValue(&c.DefaultChecksum, canonicalChecksum)},
		{"block-size", "lz4 and snappy block `size` of map outputs that name none (Spark's spark.io.compression.lz4.blockSize)", intSizeValue(&c.BlockSize)},
		{"sync", "fsync data and index files before a commit", boolValue(&c.Sync)},
		{"metrics-addr", "serve Prometheus metrics, /healthz and /readyz on this loopback `host:port` (off when empty)", stringValue(&c.MetricsAddr, nil)},
		{"metrics-allow-remote", "let --metrics-addr be a non-loopback address (0.0.0.0:9100, a host's IP), for a Prometheus on another host", boolValue(&c.MetricsAllowRemote)},
		{"allowed-uids", "comma-separated `users` (names or ids) allowed to connect besides root and the daemon's own", idListValue(&c.AllowedUIDs, lookupUser)},
		{"allowed-gids", "comma-separated `groups` (names or ids) whose members may connect", idListValue(&c.AllowedGIDs, lookupGroup)},
		{"drain-timeout", "`duration` SIGTERM lets open map outputs finish before aborting the rest", durationValue(&c.DrainTimeout)},
		{"file-mode", "octal `mode` of the shuffle files written", modeValue(&c.FileMode)},
		{"socket-mode", "octal `mode` of the Unix socket", modeValue(&c.SocketMode)},
		{"max-frame", "largest protocol frame `size` accepted", intSizeValue(&c.MaxFrame)},
		{"retention", "remove outputs of applications idle for this `duration` (0 keeps them until removed)", durationValue(&c.Retention)},
		{"log-level", "least `level` logged: debug, info, warn, error", levelValue(&c.LogLevel)},
		{"log-format", "log `format`: text or json", stringValue(&c.LogFormat, strings.ToLower)},
		{"cuda-staging-prime", "open every CUDA device and pin its staging buffers at startup, not at the first device batch (cuda builds only: no effect in others)", boolValue(&c.CUDAStagingPrime)},
		{"no-cuda-compress", "compress device batches of lz4 map outputs on the CPU pool, not on the GPU (cuda builds only: no effect in others)", boolValue(&c.NoCUDACompress)},
	}
}

// BindFlags registers a flag for every field on fs, with the field's current
// value as the flag's default.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	for _, s := range c.settings() {
		fs.Var(s.value, s.name, s.usage+" (env "+s.env()+")")
	}
}

// ApplyEnv sets the fields whose SHUFFLED_* variable lookup finds (pass
// os.LookupEnv). It reports every variable it cannot parse; fields of the
// others are still set.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	var problems []error
	for _, s := range c.settings() {
		v, ok := lookup(s.env())
		if !ok {
			continue
		}
		if err := s.value.Set(v); err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", s.env(), err))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
}

// Load fills c from its three sources in order of precedence (flags in
// args, then the environment through lookup, then defaults) and validates
// the result. The flags are registered on fs, whose error handling decides
// what a bad flag or -help does.
func (c *Config) Load(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) error {
	c.EnsureDefaults() // so that -help shows the defaults
	if err := c.ApplyEnv(lookup); err != nil {
		return err
	}
	c.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.EnsureDefaults() // a variable or flag set to zero means the default
	return c.Validate()
}

// ParseSize parses a byte size: a non-negative integer with an optional
// unit, case-insensitive: B; K, KB, KiB; M, MB, MiB; G, GB, GiB; T, TB,
// TiB. Every unit is a power of 1024, as in Spark's and the JVM's size
// settings, so "1g" is 1073741824 bytes. Space between number and unit is
// allowed ("512 MiB").
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	end := 0
	for end < len(t) && t[end] >= '0' && t[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, fmt.Errorf("invalid size %q: want a non-negative integer with an optional unit (B, KiB, MiB, GiB, TiB, or k, m, g, t)", s)
	}
	var shift uint
	switch strings.ToLower(strings.TrimSpace(t[end:])) {
	case "", "b":
		shift = 0
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	case "t", "tb", "tib":
		shift = 40
	default:
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, or k, m, g, t)", s, strings.TrimSpace(t[end:]))
	}
	n, err := strconv.ParseInt(t[:end], 10, 64)
	if err != nil || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("invalid size %q: more than %d bytes", s, int64(math.MaxInt64))
	}
	return n << shift, nil
}

// FormatSize writes n with the largest binary unit that divides it exactly
// ("512MiB", "32KiB", "1000"), in a form ParseSize reads back.
func FormatSize(n int64) string {
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// funcValue is a flag.Value built from closures over a Config field.
type funcValue struct {
	set    func(string) error
	get    func() string
	isBool bool
}

func (v *funcValue) Set(s string) error { return v.set(s) }
func (v *funcValue) IsBoolFlag() bool   { return v.isBool }

func (v *funcValue) String() string {
	if v == nil || v.get == nil { // the flag package probes a zero Value
		return ""
	}
	return v.get()
}

func stringValue(p *string, canonical func(string) string) *funcValue {
	return &funcValue{
		set: func(s string) error {
			if canonical != nil {
				s = canonical(s)
			}
			*p = s
			return nil
		},
		get: func() string { return *p },
	}
}

func boolValue(p *bool) *funcValue {
	return &funcValue{
		set: func(s string) error {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return fmt.Errorf("invalid boolean %q", s)
			}
			*p = b
			return nil
		},
		get:    func() string { return strconv.FormatBool(*p) },
		isBool: true,
	}
}

func intValue(p *int) *funcValue {
	return &funcValue{
		set: func(s string) error {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("invalid integer %q", s)
			}
			*p = n
			return nil
		},
		get: func() string { return strconv.Itoa(*p) },
	}
}

func sizeValue(p *int64) *funcValue {
	return &funcValue{
		set: func(s string) error {
			n, err := ParseSize(s)
			if err != nil {
				return err
			}
			*p = n
			return nil
		},
		get: func() string { return FormatSize(*p) },
	}
}

func intSizeValue(p *int) *funcValue {
	return &funcValue{
		set: func(s string) error {
			n, err := ParseSize(s)
			if err != nil {
				return err
			}
			if n > math.MaxInt {
				return fmt.Errorf("invalid size %q: more than %d bytes", s, math.MaxInt)
			}
			*p = int(n)
			return nil
		},
		get: func() string { return FormatSize(int64(*p)) },
	}
}

func durationValue(p *time.Duration) *funcValue {
	return &funcValue{
		set: func(s string) error {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("invalid duration %q (e.g. 30s, 2m, 1h30m)", s)
			}
			*p = d
			return nil
		},
		get: func() string { return p.String() },
	}
}

func modeValue(p *fs.FileMode) *funcValue {
	return &funcValue{
		set: func(s string) error {
			t := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0o"), "0O")
			n, err := strconv.ParseUint(t, 8, 32)
			if err != nil {
				return fmt.Errorf("invalid octal mode %q (e.g. 0640)", s)
			}
			*p = fs.FileMode(n)
			return nil
		},
		get: func() string { return fmt.Sprintf("%#o", uint32(*p)) },
	}
}

func levelValue(p *slog.Level) *funcValue {
	return &funcValue{
		set: func(s string) error {
			if err := p.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
				return fmt.Errorf("invalid log level %q (want debug, info, warn or error)", s)
			}
			return nil
		},
		get: func() string { return strings.ToLower(p.String()) },
	}
}

// pathListValue parses comma-separated paths. The first Set replaces the
// list (so a flag replaces what the environment set) and later ones append
// (so the flag can be repeated).
func pathListValue(p *[]string) *funcValue {
	replaced := false
	return &funcValue{
		set: func(s string) error {
			if !replaced {
				*p, replaced = nil, true
			}
			for item := range strings.SplitSeq(s, ",") {
				if item = strings.TrimSpace(item); item != "" {
					*p = append(*p, filepath.Clean(item))
				}
			}
			return nil
		},
		get: func() string { return strings.Join(*p, ",") },
	}
}

// idListValue parses comma-separated ids or names that lookup resolves,
// replacing then appending like pathListValue.
func idListValue(p *[]uint32, lookup func(name string) (string, error)) *funcValue {
	replaced := false
	return &funcValue{
		set: func(s string) error {
			var ids []uint32
			for item := range strings.SplitSeq(s, ",") {
				if item = strings.TrimSpace(item); item == "" {
					continue
				}
				id, err := parseID(item, lookup)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			if !replaced {
				*p, replaced = nil, true
			}
			*p = append(*p, ids...)
			return nil
		},
		get: func() string {
			parts := make([]string, len(*p))
			for i, id := range *p {
				parts[i] = strconv.FormatUint(uint64(id), 10)
			}
			return strings.Join(parts, ",")
		},
	}
}

func parseID(item string, lookup func(string) (string, error)) (uint32, error) {
	text := item
	if item[0] < '0' || item[0] > '9' {
		resolved, err := lookup(item)
		if err != nil {
			return 0, err
		}
		text = resolved
	}
	n, err := strconv.ParseUint(text, 10, 32)
	if err != nil || n == math.MaxUint32 { // (uid_t)-1 is "no id"
		return 0, fmt.Errorf("invalid id %q", item)
	}
	return uint32(n), nil
}

func lookupUser(name string) (string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("unknown user %q", name)
	}
	return u.Uid, nil
}

func lookupGroup(name string) (string, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", fmt.Errorf("unknown group %q", name)
	}
	return g.Gid, nil
}
