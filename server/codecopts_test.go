package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

func statOf(t *testing.T, stats []protocol.Stat, name string) int64 {
	t.Helper()
	for _, s := range stats {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("StatsResult has no %s", name)
	return 0
}

// TestOpenCodecOptions opens map outputs with their own lz4 block size and
// zstd level, checks what lands on disk, and counts them in Stats.
func TestOpenCodecOptions(t *testing.T) {
	d := startDaemon(t, nil) // --block-size 32 KiB
	ctx := context.Background()
	c := dial(t, d, "app")
	data := bytes.Repeat([]byte("spark.io.compression.lz4.blockSize="), 8000) // 280 KB
	write := func(req protocol.OpenMapOutput) {
		t.Helper()
		mo, err := c.Open(ctx, req)
		if err != nil {
			t.Fatalf("Open %+v: %v", req, err)
		}
		if err := mo.WriteOpaque(ctx, data, []int64{0, int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := mo.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	layout := shufflefile.Flat(filepath.Join(d.root, "app", "1"))
	write(protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque, Codec: "lz4", BlockSize: 64 << 10})
	write(protocol.OpenMapOutput{ShuffleID: 1, MapID: 2, NumPartitions: 1, Kind: protocol.KindOpaque, Codec: "zstd", Level: 3})
	if got := readOutput(t, layout, shufflefile.ID{Shuffle: 1, Map: 1}, codec.LZ4); !bytes.Equal(got[0], data) {
		t.Errorf("lz4 64 KiB: partition 0 differs")
	}
	if got := readOutput(t, layout, shufflefile.ID{Shuffle: 1, Map: 2}, codec.Zstd); !bytes.Equal(got[0], data) {
		t.Errorf("zstd level 3: partition 0 differs")
	}
	mo, err := shufflefile.Open(vfs.Default, layout, shufflefile.ID{Shuffle: 1, Map: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := mo.ReadPartition(0)
	mo.Close()
	if err != nil {
		t.Fatal(err)
	}
	// lz4-java blocks: "LZ4Block", token (method | level), compressed,
	// decompressed, checksum. 64 KiB blocks carry level 6.
	full := 0
	for len(raw) >= 21 && string(raw[:8]) == "LZ4Block" {
		if lvl := raw[8] & 0x0F; lvl != 6 {
			t.Fatalf("lz4 block token %#x, want level 6 (64 KiB)", raw[8])
		}
		if binary.LittleEndian.Uint32(raw[13:]) == 64<<10 {
			full++
		}
		raw = raw[21+binary.LittleEndian.Uint32(raw[9:]):]
	}
	if len(raw) != 0 || full != len(data)/(64<<10) {
		t.Errorf("%d full 64 KiB blocks, %d bytes left unparsed; want %d and 0", full, len(raw), len(data)/(64<<10))
	}

	// Refused, naming the field; then counted as neither commit nor abort.
	for _, tc := range []struct {
		req  protocol.OpenMapOutput
		want string
	}{
		{protocol.OpenMapOutput{Codec: "lz4", BlockSize: 63}, "OpenMapOutput.block_size 63"},
		{protocol.OpenMapOutput{Codec: "snappy", Level: 1}, "OpenMapOutput.level 1"},
		{protocol.OpenMapOutput{Codec: "zstd", Level: 23}, "OpenMapOutput.level 23"},
		{protocol.OpenMapOutput{Codec: "zstd", Level: -1}, "OpenMapOutput.level -1"},
		{protocol.OpenMapOutput{Codec: "zstd", BlockSize: 1 << 16}, "OpenMapOutput.block_size 65536"},
		{protocol.OpenMapOutput{Codec: "none", Level: 2}, "OpenMapOutput.level 2"},
		{protocol.OpenMapOutput{Level: 5}, "OpenMapOutput.level 5: codec lz4"}, // the daemon's default codec
	} {
		tc.req.ShuffleID, tc.req.MapID, tc.req.NumPartitions, tc.req.Kind = 2, 1, 1, protocol.KindOpaque
		_, err := c.Open(ctx, tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "InvalidArgument") {
			t.Errorf("Open codec %q block size %d level %d: %v, want InvalidArgument naming %q", tc.req.Codec, tc.req.BlockSize, tc.req.Level, err, tc.want)
		}
	}
	mo2, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 2, MapID: 2, NumPartitions: 1, Kind: protocol.KindOpaque, Codec: "snappy", BlockSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := mo2.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := statOf(t, stats, "commits_total"); got != 2 {
		t.Errorf("commits_total = %d, want 2", got)
	}
	if got := statOf(t, stats, "aborts_total"); got != 1 {
		t.Errorf("aborts_total = %d, want 1", got)
	}
}
