package server

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/ingest"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/protocol"
)

// Bounds that Validate enforces.
const (
	maxSocketPath = 107 // sun_path holds 108 bytes with the NUL
	minBlockSize  = 64  // lz4-java's LZ4BlockOutputStream bounds
	maxBlockSize  = 32 << 20
	minMaxFrame   = protocol.MinMaxFrame
	maxMaxFrame   = 1 << 30
	// maxMemfdIdleGrace bounds how long a connection with no map output
	// open keeps its client's memfd pages mapped.
	maxMemfdIdleGrace = time.Minute
)

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

	positive(bad, "limit", c.LimitBytes)
	positive(bad, "pool", c.PoolSize)
	positive(bad, "partition-state-limit", c.PartitionStateLimit)
	positive(bad, "max-open-outputs", c.MaxOpenOutputs)
	if c.CUDACompressSlots < 0 || c.CUDACompressSlots > MaxCUDACompressSlots {
		bad("cuda-compress-slots", "must be in [0,%d] (0: %d), got %d", MaxCUDACompressSlots, ingest.DefaultCompressSlots, c.CUDACompressSlots)
	}
	if c.PartitionStateLimitPerUID < 0 || c.PartitionStateLimitPerUID > c.PartitionStateLimit {
		bad("partition-state-limit-per-uid", "must be >= 0 (0: half of --partition-state-limit) and at most --partition-state-limit (%d), got %d", c.PartitionStateLimit, c.PartitionStateLimitPerUID)
	}
	if c.MaxOpenOutputsPerUID < 0 || c.MaxOpenOutputsPerUID > c.MaxOpenOutputs {
		bad("max-open-outputs-per-uid", "must be >= 0 (0: half of --max-open-outputs) and at most --max-open-outputs (%d), got %d", c.MaxOpenOutputs, c.MaxOpenOutputsPerUID)
	}
	positive(bad, "hello-timeout", c.HelloTimeout)
	if c.MemfdIdleGrace <= 0 || c.MemfdIdleGrace > maxMemfdIdleGrace {
		bad("memfd-idle-grace", "must be > 0 and at most %v, got %v", maxMemfdIdleGrace, c.MemfdIdleGrace)
	}
	positive(bad, "max-connections", c.MaxConnections)
	positive(bad, "max-connections-per-uid", c.MaxConnectionsPerUID)
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
	positive(bad, "drain-timeout", c.DrainTimeout)
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
	c.Serve.validate(bad)
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log-format", "must be text or json, got %q", c.LogFormat)
	}

	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
}

// positive reports, through bad, a value of flag flagName that is not > 0.
func positive[T ~int | ~int64](bad func(flagName, format string, args ...any), flagName string, v T) {
	if v <= 0 {
		bad(flagName, "must be > 0, got %v", v)
	}
}
