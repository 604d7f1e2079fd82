package server

import (
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/ingest"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/writer"
)

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
	MemfdIdleGrace:       ingest.DefaultMemfdIdleGrace,
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

// codecNames are the codecs a map output may name.
var codecNames = []string{"none", "lz4", "zstd", "snappy"}

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
	setDefault(&c.MemfdIdleGrace, d.MemfdIdleGrace)
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
	if k, err := codec.Parse(s); err == nil {
		return k.String()
	}
	return s
}

// isCodec reports whether s is one of codecNames, spelled as there.
func isCodec(s string) bool { return slices.Contains(codecNames, s) }

// canonicalChecksum spells a known algorithm as Spark does and leaves
// anything else for Validate to report.
func canonicalChecksum(s string) string {
	if a, err := checksum.Parse(s); err == nil && s != "" {
		return a.String()
	}
	return s
}
