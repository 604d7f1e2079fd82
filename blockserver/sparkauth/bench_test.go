package sparkauth

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"testing"
)

// BenchmarkCipherWrite: the cost of sending a block through each transport
// cipher (what serving an encrypted connection pays instead of sendfile),
// frames of 1 MiB announced with BeginFrame and written in 256 KiB pieces.
func BenchmarkCipherWrite(b *testing.B) {
	var ha1 [16]byte
	keys, err := aeSessionKeys(make([]byte, 32), []byte("transcript"))
	if err != nil {
		b.Fatal(err)
	}
	writers := []struct {
		name string
		new  func() FrameWriter
	}{
		{"cipher=sasl-3des", func() FrameWriter {
			l, _ := newSASLLayer(ha1, "3des")
			return (&saslCipher{layer: l}).WrapWriter(io.Discard)
		}},
		{"cipher=sasl-rc4", func() FrameWriter {
			l, _ := newSASLLayer(ha1, "rc4")
			return (&saslCipher{layer: l}).WrapWriter(io.Discard)
		}},
		{"cipher=ctr", func() FrameWriter {
			s, _ := newCTR(keys.v2, keys.inputIV)
			return &ctrWriter{s: s, w: io.Discard}
		}},
		{"cipher=gcm-v2", func() FrameWriter { return newGCMWriter(keys.v2, io.Discard, rand.Reader) }},
		{"cipher=gcm-v1", func() FrameWriter { return newGCMWriter(keys.v1, io.Discard, rand.Reader) }},
	}
	frame := make([]byte, 1<<20)
	rand.Read(frame)
	for _, w := range writers {
		b.Run(w.name, func(b *testing.B) {
			fw := w.new()
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				if err := fw.BeginFrame(int64(len(frame))); err != nil {
					b.Fatal(err)
				}
				for p := frame; len(p) > 0; p = p[256<<10:] {
					if _, err := fw.Write(p[:256<<10]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkCipherRead: the cost of reading a client's requests through GCM
// (the reader every cipher but CTR has to authenticate).
func BenchmarkCipherRead(b *testing.B) {
	for _, keyLen := range []int{16, 32} {
		b.Run(fmt.Sprintf("cipher=gcm/key=%d", keyLen), func(b *testing.B) {
			key := make([]byte, keyLen)
			var wire bytes.Buffer
			w := newGCMWriter(key, &wire, rand.Reader)
			msg := make([]byte, 1<<20)
			w.Write(msg)
			enc := wire.Bytes()
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				r := newGCMReader(key, bytes.NewReader(enc))
				for {
					if _, err := r.Read(buf); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
