package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// decodeBoth decodes src with Decode and with a reader fed one byte at a
// time, and checks that they agree.
func decodeBoth(t *testing.T, k Kind, src []byte) ([]byte, error) {
	t.Helper()
	got, err := Decode(k, nil, src)
	r, rerr := NewReader(k, iotest.OneByteReader(bytes.NewReader(src)))
	if rerr != nil {
		t.Fatalf("NewReader(%v) = %v", k, rerr)
	}
	rgot, rerr := readAll(t, r)
	if (err == nil) != (rerr == nil) {
		t.Fatalf("%v on %x: Decode error %v, reader error %v", k, src, err, rerr)
	}
	if err == nil && !bytes.Equal(got, rgot) {
		t.Fatalf("%v on %x: Decode gives %q, reader %q", k, src, got, rgot)
	}
	return got, err
}

// mutate returns a copy of b with f applied.
func mutate(b []byte, f func(b []byte)) []byte {
	c := bytes.Clone(b)
	f(c)
	return c
}

func putLE(b []byte, off int, v int32) { binary.LittleEndian.PutUint32(b[off:], uint32(v)) }
func putBE(b []byte, off int, v int32) { binary.BigEndian.PutUint32(b[off:], uint32(v)) }

func TestCorrupt(t *testing.T) {
	lz4Raw := mustEncoder(t, LZ4).Encode(nil, []byte("hello world"))
	lz4Comp := mustEncoder(t, LZ4).Encode(nil, textData(1000, 1))
	if lz4Comp[8]&0xF0 != lz4MethodLZ4 {
		t.Fatalf("text block stored with token 0x%02x, want a compressed block", lz4Comp[8])
	}
	lz4CompLen := int(binary.LittleEndian.Uint32(lz4Comp[9:]))
	snap := mustEncoder(t, Snappy).Encode(nil, []byte("hello world"))
	zst := mustEncoder(t, Zstd).Encode(nil, textData(1000, 1))

	tests := []struct {
		name string
		kind Kind
		src  []byte
		want string // in the error message
	}{
		{"lz4 bad magic", LZ4, mutate(lz4Raw, func(b []byte) { b[0] = 'M' }), "lz4 magic"},
		{"lz4 bad method", LZ4, mutate(lz4Raw, func(b []byte) { b[8] = 0x35 }), "lz4 token 0x35"},
		{"lz4 original length beyond level", LZ4, mutate(lz4Raw, func(b []byte) { b[8] = 0x10; putLE(b, 9, 2000); putLE(b, 13, 2000) }), "lz4 original length 2000"},
		{"lz4 absurd original length", LZ4, mutate(lz4Raw, func(b []byte) { b[8] = 0x2F; putLE(b, 13, 0x7FFFFFFF) }), "lz4 original length 2147483647"},
		{"lz4 negative original length", LZ4, mutate(lz4Raw, func(b []byte) { putLE(b, 13, -5) }), "lz4 original length -5"},
		{"lz4 negative compressed length", LZ4, mutate(lz4Comp, func(b []byte) { putLE(b, 9, -1) }), "lz4 compressed length -1"},
		{"lz4 absurd compressed length", LZ4, mutate(lz4Comp, func(b []byte) { putLE(b, 9, 0x7FFFFFF0) }), "not below original length"},
		{"lz4 impossible expansion", LZ4, mutate(lz4Comp, func(b []byte) { putLE(b, 9, 2); putLE(b, 13, 1000) }), "more than 255 times"},
		{"lz4 raw lengths differ", LZ4, mutate(lz4Raw, func(b []byte) { putLE(b, 9, 10) }), "lz4 raw block"},
		{"lz4 empty payload", LZ4, mutate(lz4Raw, func(b []byte) { putLE(b, 9, 0) }), "lz4 compressed length 0"},
		{"lz4 bad checksum", LZ4, mutate(lz4Raw, func(b []byte) { b[17] ^= 1 }), "checksum"},
		{"lz4 flipped raw byte", LZ4, mutate(lz4Raw, func(b []byte) { b[lz4HeaderLen] ^= 1 }), "checksum"},
		{"lz4 flipped compressed byte", LZ4, mutate(lz4Comp, func(b []byte) { b[lz4HeaderLen+lz4CompLen/2] ^= 0x40 }), "lz4 block at offset 0"},
		{"lz4 end mark checksum", LZ4, mutate(lz4Raw, func(b []byte) { b[len(b)-1] = 1 }), "lz4 end mark"},
		{"lz4 compressed end mark", LZ4, mutate(lz4Raw, func(b []byte) { b[len(b)-13] = 0x25 }), "not below original length"},
		{"lz4 missing end mark", LZ4, lz4Raw[:len(lz4Raw)-lz4HeaderLen], "without an end mark"},
		{"lz4 trailing garbage", LZ4, append(bytes.Clone(lz4Raw), 1, 2, 3), "3 of 21 bytes"},
		{"snappy bad magic", Snappy, mutate(snap, func(b []byte) { b[1] = 's' }), "snappy magic"},
		{"snappy version 0", Snappy, mutate(snap, func(b []byte) { putBE(b, 8, 0) }), "snappy version 0"},
		{"snappy negative chunk", Snappy, mutate(snap, func(b []byte) { putBE(b, 16, -7) }), "snappy chunk length -7"},
		{"snappy zero chunk", Snappy, mutate(snap, func(b []byte) { putBE(b, 16, 0) }), "snappy chunk length 0"},
		{"snappy absurd chunk", Snappy, mutate(snap, func(b []byte) { putBE(b, 16, 0x7FFFFFF0) }), "snappy chunk length 2147483632"},
		{"snappy long chunk", Snappy, mutate(snap, func(b []byte) { putBE(b, 16, 1000) }), "13 of 1000 bytes"},
		{"snappy absurd decoded length", Snappy, append(bytes.Clone(snappyHeader), 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0x0f, 0), "decoded length"},
		{"snappy decoded length beyond block limit", Snappy, append(bytes.Clone(snappyHeader), 0, 0, 0, 6, 0x80, 0x80, 0x80, 0x20, 0, 0), "exceeds"},
		{"snappy impossible expansion", Snappy, append(bytes.Clone(snappyHeader), 0, 0, 0, 4, 0xe8, 0x07, 0, 'x'), "more than 22 times"},
		{"snappy flipped byte", Snappy, mutate(snap, func(b []byte) { b[21] = 0x38 }), "does not decode"},
		{"snappy bad second header", Snappy, append(bytes.Clone(snap), mutate(snappyHeader, func(b []byte) { b[7] = 1 })...), "snappy magic"},
		{"snappy short second header", Snappy, append(bytes.Clone(snap), snappyHeader[:10]...), "snappy header at offset 33: 10 of 16"},
		{"snappy trailing length byte", Snappy, append(bytes.Clone(snap), 0), "snappy chunk length"},
		{"zstd bad magic", Zstd, mutate(zst, func(b []byte) { b[0] ^= 1 }), "zstd"},
		{"zstd bad checksum", Zstd, mutate(zst, func(b []byte) { b[len(b)-1] ^= 1 }), "zstd"},
		{"zstd trailing garbage", Zstd, append(bytes.Clone(zst), 1, 2, 3, 4, 5), "zstd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeBoth(t, tt.kind, tt.src)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode(%v, %x) = %v, want ErrCorrupt mentioning %q", tt.kind, tt.src, err, tt.want)
			}
		})
	}
}

// TestTruncated cuts valid concatenated streams at every length: a cut is
// an error unless it falls where a stream, or for snappy a chunk, ends.
func TestTruncated(t *testing.T) {
	pieces := [][]byte{[]byte("hello world"), textData(300, 1), nil, randomData(200, 2)}
	for _, k := range []Kind{LZ4, Zstd, Snappy} {
		opts := []Option{WithBlockSize(128)}
		e := mustEncoder(t, k, opts...)
		var stream []byte
		ends := map[int]bool{0: true}
		for _, p := range pieces {
			stream = e.Encode(stream, p)
			ends[len(stream)] = true
		}
		if k == Snappy {
			// Every chunk ends a valid stream.
			for off := 0; off < len(stream); {
				if binary.BigEndian.Uint32(stream[off:]) == snappyMagicHead {
					off += snappyHeaderLen
				} else {
					off += snappyLenLen + int(binary.BigEndian.Uint32(stream[off:]))
				}
				ends[off] = true
			}
		}
		for n := 0; n < len(stream); n++ {
			_, err := decodeBoth(t, k, stream[:n])
			if ends[n] {
				if err != nil {
					t.Errorf("%v stream cut at %d of %d, a stream boundary: %v", k, n, len(stream), err)
				}
				continue
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v stream cut at %d of %d = %v, want ErrCorrupt", k, n, len(stream), err)
			}
			if k != Zstd && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%v stream cut at %d of %d = %v, want io.ErrUnexpectedEOF", k, n, len(stream), err)
			}
		}
	}
}

func TestDecodeErrorKeepsDst(t *testing.T) {
	for _, k := range []Kind{LZ4, Zstd, Snappy} {
		stream := mustEncoder(t, k).Encode(nil, textData(100000, 1))
		dst := []byte("prefix")
		got, err := Decode(k, dst, stream[:len(stream)-1])
		if err == nil || len(got) < len(dst) || string(got[:len(dst)]) != "prefix" {
			t.Errorf("Decode(%v, truncated) = %d bytes, %v, want an error and dst kept", k, len(got), err)
		}
	}
}

// TestHostileLengthsAllocateLittle feeds headers that declare the largest
// blocks the formats allow, followed by a few bytes: decoders must fail
// without allocating for the declared lengths.
func TestHostileLengthsAllocateLittle(t *testing.T) {
	lz4Header := func(token byte, compLen, origLen int32) []byte {
		h := make([]byte, lz4HeaderLen)
		copy(h, lz4Magic)
		h[8] = token
		putLE(h, 9, compLen)
		putLE(h, 13, origLen)
		return append(h, "a few bytes"...)
	}
	snappyChunk := append(bytes.Clone(snappyHeader), 0x01, 0xf0, 0, 0)
	snappyChunk = append(snappyChunk, "a few bytes"...)
	// A zstd frame header declaring 1 GiB of content (8-byte content size,
	// single segment), then the start of a block.
	zstdFrame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0x04, 0, 0x10, 'x'}
	tests := []struct {
		name string
		kind Kind
		src  []byte
	}{
		{"lz4 raw 32MiB", LZ4, lz4Header(0x1F, MaxBlockSize, MaxBlockSize)},
		{"lz4 compressed 32MiB", LZ4, lz4Header(0x2F, MaxBlockSize-1, MaxBlockSize)},
		{"snappy 30MiB chunk", Snappy, snappyChunk},
		{"zstd 1GiB frame", Zstd, zstdFrame},
	}
	const limit = 4 << 20
	for _, tt := range tests {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, derr := Decode(tt.kind, nil, tt.src)
		r, err := NewReader(tt.kind, bytes.NewReader(tt.src))
		if err != nil {
			t.Fatal(err)
		}
		_, rerr := readAll(t, r)
		runtime.ReadMemStats(&after)
		if derr == nil || rerr == nil {
			t.Errorf("%s: Decode = %v, reader = %v, want errors", tt.name, derr, rerr)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > limit {
			t.Errorf("%s: decoding %d bytes allocated %d bytes, want at most %d", tt.name, len(tt.src), n, limit)
		}
	}
}
