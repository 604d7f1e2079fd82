//go:build clib

package codec

import (
	"bytes"
	"testing"
)

// TestUseCLZ4 checks that UseCLZ4 switches the lz4 encoder's block
// compressor to liblz4 and back, and that its streams stay the same bytes.
func TestUseCLZ4(t *testing.T) {
	t.Cleanup(func() { UseCLZ4(false) })
	src := corpus(t, "lineitem")
	block := src[:DefaultBlockSize]
	want := make([]byte, lz4Bound(len(block)))
	wn := cLZ4Compress(block, want)
	// Below the bound the pure-Go compressor writes nothing and liblz4
	// still compresses: which one ran shows in the result.
	short := make([]byte, wn)
	if n, ok := cLZ4Block(short, block); ok || n != 0 {
		t.Fatalf("cLZ4Block with UseCLZ4 off = %d, %v; want 0, false", n, ok)
	}
	UseCLZ4(true)
	if n, ok := cLZ4Block(short, block); !ok || n != wn || !bytes.Equal(short, want[:wn]) {
		t.Fatalf("cLZ4Block with UseCLZ4 on = %d, %v; want LZ4_compress_default's %d bytes, true", n, ok, wn)
	}

	var streams [2][]byte
	for i, on := range []bool{false, true} {
		UseCLZ4(on)
		e, err := NewEncoder(LZ4)
		if err != nil {
			t.Fatal(err)
		}
		// Encode into exact room and into none: the compressor writes into
		// the output, then into the encoder's scratch buffer.
		streams[i] = e.Encode(make([]byte, 0, MaxEncodedLen(LZ4, len(src))), src)
		if small := e.Encode(nil, src); !bytes.Equal(small, streams[i]) {
			t.Errorf("UseCLZ4(%v): Encode into nil differs from Encode into room", on)
		}
		got, err := Decode(LZ4, nil, streams[i])
		if err != nil || !bytes.Equal(got, src) {
			t.Errorf("UseCLZ4(%v): Decode = %d bytes, %v; want the %d input bytes", on, len(got), err, len(src))
		}
	}
	if !bytes.Equal(streams[0], streams[1]) {
		t.Errorf("lz4 stream with liblz4 (%d bytes) differs from the pure-Go one (%d bytes) at byte %d",
			len(streams[1]), len(streams[0]), mismatch(streams[0], streams[1]))
	}
}

func mismatch(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
