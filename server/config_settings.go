package server

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/shuffled/shuffled/ingest"
)

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
	return append([]setting{
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
		{"memfd-idle-grace", "`duration` a connection with no map output open keeps its cached memfd mappings for its next one (at most 1m)", durationValue(&c.MemfdIdleGrace)},
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
		{"cuda-compress-slots", fmt.Sprintf("device batches each GPU compresses at once (`count`, 1-%d; 0: %d); each holds scratch of about three times the largest batch (cuda builds only: no effect in others)", MaxCUDACompressSlots, ingest.DefaultCompressSlots), intValue(&c.CUDACompressSlots)},
	}, c.Serve.settings()...)
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
