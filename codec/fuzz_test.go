package codec

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// fuzzDecode checks that a decoder never panics, that Decode and the reader
// agree, that every error is ErrCorrupt, and that what decodes re-encodes to
// a stream that decodes to the same bytes.
func fuzzDecode(t *testing.T, k Kind, src []byte) {
	got, err := Decode(k, nil, src)
	r, rerr := NewReader(k, bytes.NewReader(src))
	if rerr != nil {
		t.Fatalf("NewReader(%v) = %v", k, rerr)
	}
	rgot, rerr := io.ReadAll(r)
	r.Close()
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode(%v, %x) = %v, want ErrCorrupt", k, src, err)
		}
		if rerr == nil && k != Zstd {
			t.Fatalf("Decode(%v, %x) = %v, but the reader read %d bytes without error", k, src, err, len(rgot))
		}
		return
	}
	if rerr != nil {
		if k != Zstd {
			t.Fatalf("reader(%v, %x) = %v, but Decode succeeded", k, src, rerr)
		}
	} else if !bytes.Equal(got, rgot) {
		t.Fatalf("%v on %x: Decode gives %x, reader %x", k, src, got, rgot)
	}
	again, err := Decode(k, nil, mustEncoder(t, k).Encode(nil, got))
	if err != nil || !bytes.Equal(again, got) {
		t.Fatalf("%v re-encoded %x decodes to %x, %v", k, got, again, err)
	}
}

func FuzzDecodeLZ4(f *testing.F) {
	e := mustEncoder(f, LZ4, WithBlockSize(64))
	f.Add([]byte{})
	f.Add(e.Encode(nil, nil))
	f.Add(e.Encode(nil, []byte("hello world")))
	f.Add(e.Encode(nil, textData(300, 1)))
	f.Fuzz(func(t *testing.T, src []byte) { fuzzDecode(t, LZ4, src) })
}

func FuzzDecodeSnappy(f *testing.F) {
	e := mustEncoder(f, Snappy, WithBlockSize(64))
	f.Add([]byte{})
	f.Add(e.Encode(nil, nil))
	f.Add(e.Encode(nil, []byte("hello world")))
	f.Add(e.Encode(e.Encode(nil, textData(300, 1)), []byte("x")))
	f.Fuzz(func(t *testing.T, src []byte) { fuzzDecode(t, Snappy, src) })
}

func FuzzDecodeZstd(f *testing.F) {
	e := mustEncoder(f, Zstd)
	f.Add([]byte{})
	f.Add(e.Encode(nil, nil))
	f.Add(e.Encode(nil, []byte("hello world")))
	f.Add(e.Encode(e.Encode(nil, textData(300, 1)), []byte("x")))
	f.Fuzz(func(t *testing.T, src []byte) { fuzzDecode(t, Zstd, src) })
}

// FuzzRoundTrip encodes data with a kind and block size that the fuzzer
// picks, in one call and in writes of a chunk size it picks, and checks
// that both give the same stream and that it decodes to data.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("hello world"), uint8(1), uint16(0), uint16(3))
	f.Add(textData(1000, 1), uint8(3), uint16(100), uint16(77))
	f.Add(randomData(500, 2), uint8(2), uint16(0), uint16(1))
	f.Add([]byte{}, uint8(0), uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, kind uint8, block, chunk uint16) {
		k := Kind(kind % 4)
		var opts []Option
		switch k {
		case LZ4:
			opts = append(opts, WithBlockSize(MinLZ4BlockSize+int(block)))
		case Snappy:
			opts = append(opts, WithBlockSize(1+int(block)))
		case Zstd:
			opts = append(opts, WithLevel(MinLevel+int(block)%(MaxLevel-MinLevel+1)))
		}
		e, err := NewEncoder(k, opts...)
		if err != nil {
			t.Fatal(err)
		}
		want := e.Encode(nil, data)
		if max := MaxEncodedLen(k, len(data), opts...); len(want) > max {
			t.Fatalf("%v Encode(%d bytes) = %d bytes, more than MaxEncodedLen %d", k, len(data), len(want), max)
		}
		c := 1 + int(chunk)
		e.Reset(nil)
		for p := data; len(p) > 0; p = p[min(c, len(p)):] {
			e.Write(p[:min(c, len(p))])
		}
		if got := e.Finish(); !bytes.Equal(got, want) {
			t.Fatalf("%v writes of %d bytes give %x, Encode %x", k, c, got, want)
		}
		got, err := Decode(k, nil, want)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%v Decode(Encode(%x)) = %x, %v", k, data, got, err)
		}
	})
}
