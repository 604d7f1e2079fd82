package writer

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// lz4BlockHeaders walks the lz4-java blocks of one partition's bytes and
// returns each block's token and decompressed length.
func lz4BlockHeaders(t *testing.T, raw []byte) (tokens []byte, lengths []int) {
	t.Helper()
	const header = 21 // "LZ4Block", token, compressed, decompressed, checksum
	for len(raw) > 0 {
		if len(raw) < header || string(raw[:8]) != "LZ4Block" {
			t.Fatalf("no lz4-java block header at %q", raw[:min(len(raw), 8)])
		}
		compressed := int(binary.LittleEndian.Uint32(raw[9:]))
		tokens = append(tokens, raw[8])
		lengths = append(lengths, int(binary.LittleEndian.Uint32(raw[13:])))
		if header+compressed > len(raw) {
			t.Fatalf("block of %d bytes past the end (%d left)", compressed, len(raw)-header)
		}
		raw = raw[header+compressed:]
	}
	return tokens, lengths
}

func TestPerMapOutputBlockSize(t *testing.T) {
	e := newEngine(t, WithWorkers(2))
	rng := rand.New(rand.NewPCG(1, 2))
	data := payload(rng, 300<<10)
	for _, tc := range []struct {
		blockSize, wantLen int
		wantLevel          byte
	}{
		{64 << 10, 64 << 10, 6}, // lz4-java's token level: log2(block size) - 10
		{0, DefaultBlockSize, 5},
		{1 << 20, 1 << 20, 10},
	} {
		spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: int64(tc.blockSize)}, NumPartitions: 1, Codec: codec.LZ4,
			BlockSize: tc.blockSize, Checksum: checksum.CRC32, Layout: shufflefile.Flat(t.TempDir())}
		if _, err := writeAll(t, e, spec, []op{{0, data}}); err != nil {
			t.Fatalf("block size %d: %v", tc.blockSize, err)
		}
		checkPartitions(t, readBack(t, vfs.Default, spec), [][]byte{data})
		mo, err := shufflefile.Open(vfs.Default, spec.Layout, spec.ID, spec.Checksum)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := mo.ReadPartition(0)
		mo.Close()
		if err != nil {
			t.Fatal(err)
		}
		tokens, lengths := lz4BlockHeaders(t, raw)
		full := 0
		for i, tok := range tokens {
			if tok&0x0F != tc.wantLevel {
				t.Errorf("block size %d: block %d token %#x, want level %d", tc.blockSize, i, tok, tc.wantLevel)
			}
			if lengths[i] > tc.wantLen {
				t.Errorf("block size %d: block %d holds %d bytes", tc.blockSize, i, lengths[i])
			}
			if lengths[i] == tc.wantLen {
				full++
			}
		}
		if wantFull := len(data) / tc.wantLen; full < wantFull {
			t.Errorf("block size %d: %d full blocks of %d bytes, want >= %d (lengths %v)", tc.blockSize, full, tc.wantLen, wantFull, lengths)
		}
	}
}

func TestPerMapOutputZstdLevel(t *testing.T) {
	e := newEngine(t, WithWorkers(2))
	rng := rand.New(rand.NewPCG(3, 4))
	ops := workload(rng, 16, 3, 20000)
	var sizes [2]int64
	for i, level := range []int{0, 19} {
		spec := Spec{ID: shufflefile.ID{Shuffle: 2, Map: int64(i)}, NumPartitions: 16, Codec: codec.Zstd, Level: level,
			Checksum: checksum.Adler32, Layout: shufflefile.Flat(t.TempDir())}
		res, err := writeAll(t, e, spec, ops)
		if err != nil {
			t.Fatalf("level %d: %v", level, err)
		}
		checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, 16))
		sizes[i] = res.BytesOut
	}
	if sizes[1] >= sizes[0] {
		t.Errorf("zstd level 19 wrote %d bytes, level 1 (default) %d: the level was not applied", sizes[1], sizes[0])
	}
	// Level 3, as a Spark job may set it: decodes, and reuses its pool.
	for m := range 2 {
		spec := Spec{ID: shufflefile.ID{Shuffle: 3, Map: int64(m)}, NumPartitions: 16, Codec: codec.Zstd, Level: 3,
			Layout: shufflefile.Flat(t.TempDir())}
		if _, err := writeAll(t, e, spec, ops); err != nil {
			t.Fatalf("level 3: %v", err)
		}
		checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, 16))
	}
	if n := e.encoderPools(); n != 2 {
		t.Errorf("%d extra encoder pools, want 2 (levels 19 and 3)", n)
	}
}

func TestPerMapOutputCodecOptionsRefused(t *testing.T) {
	e := newEngine(t)
	for _, tc := range []struct {
		codec     codec.Kind
		blockSize int
		level     int
		want      string
	}{
		{codec.LZ4, 0, 3, "level"},
		{codec.Snappy, 0, 1, "level"},
		{codec.Zstd, 64 << 10, 0, "block size"},
		{codec.None, 0, 1, "block size or level"},
		{codec.Zstd, 0, 23, "zstd level 23"},
		{codec.Zstd, 0, -1, "zstd level -1"},
		{codec.LZ4, 63, 0, "lz4 block size 63"},
		{codec.LZ4, 64<<20 + 1, 0, "lz4 block size"},
		{codec.Snappy, -5, 0, "snappy block size -5"},
	} {
		spec := Spec{ID: shufflefile.ID{Shuffle: 4}, NumPartitions: 1, Codec: tc.codec, BlockSize: tc.blockSize, Level: tc.level,
			Layout: shufflefile.Flat(t.TempDir())}
		w, err := e.Open(context.Background(), spec)
		if err == nil {
			_ = w.Abort()
			t.Errorf("%v block size %d level %d: Open succeeded", tc.codec, tc.blockSize, tc.level)
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v block size %d level %d: %v, want ErrInvalid naming %q", tc.codec, tc.blockSize, tc.level, err, tc.want)
		}
	}
	checkQuiet(t, e)
}

func TestEncoderPoolsBounded(t *testing.T) {
	e := newEngine(t)
	for i := range maxEncoderPools + 8 {
		spec := Spec{ID: shufflefile.ID{Shuffle: 5, Map: int64(i)}, NumPartitions: 1, Codec: codec.LZ4, BlockSize: 1024 + i,
			Layout: shufflefile.Flat(t.TempDir())}
		w, err := e.Open(context.Background(), spec)
		if err != nil {
			t.Fatalf("block size %d: %v", spec.BlockSize, err)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.encoderPools(); n != maxEncoderPools {
		t.Errorf("%d encoder pools, want the bound %d", n, maxEncoderPools)
	}
}
