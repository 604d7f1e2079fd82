package server

import (
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/shuffled/shuffled/errdefs"
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
	// MemfdIdleGrace is how long a connection with no map output open
	// keeps the memfd mappings it caches for its next map output
	// (--memfd-idle-grace); they still count against the peer uid's
	// budget, and go sooner when another connection of the uid needs it or
	// the connection ends. Default 2s; at most a minute.
	MemfdIdleGrace time.Duration
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
	// Serve configures the block server that serves map outputs to
	// Spark's reducers (config_serving.go).
	Serve ServeConfig

	// NoCUDACompress keeps a daemon with the GPU data plane from
	// compressing the device batches of lz4 map outputs on the GPU
	// (--no-cuda-compress): they are copied to the host and compressed by
	// the CPU pool. By default they are compressed on the GPU: the records
	// leave the device as finished lz4-java streams and the CPU only
	// checksums and writes them (the GPU sums them too where the map
	// output's checksums are Adler-32 and it is not encrypted), faster and
	// with a fraction of the CPU (docs/benchmarks.md, "GPU"). Other codecs, block sizes over 64 KiB,
	// and columnar batches the GPU plans do not cover (gpu.Covers: today
	// SHFC and kudo with every column type) always use the CPU pool. A
	// build without the GPU data plane accepts it and ignores it.
	NoCUDACompress bool
	// CUDACompressSlots is how many device batches each device compresses
	// at once (--cuda-compress-slots): each slot is a CUDA stream with
	// scratch memory that grows to about three times the largest batch it
	// has compressed. Zero, the default, means ingest.DefaultCompressSlots.
	// A build without the GPU data plane accepts it and ignores it.
	CUDACompressSlots int
}

// MaxCUDACompressSlots bounds CUDACompressSlots.
const MaxCUDACompressSlots = 64

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
