package sparkauth

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"testing"
)

// FuzzStep: any two handshake messages either fail with one of the
// package's errors or authenticate (which random bytes never do).
func FuzzStep(f *testing.F) {
	f.Add(saslMessage("app", nil), saslMessage("app", []byte(`username="u",nonce="n"`)))
	f.Add(authMessageBytes("app", make([]byte, 16), make([]byte, aeCiphertextLen)), []byte{})
	for _, k := range loadKATsFuzz() {
		f.Add(k[0], k[1])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		s := NewServer(secrets(map[string]string{"app": "s3cr3t"}), Options{Rand: rand.Reader})
		for _, body := range [][]byte{a, b} {
			if _, err := s.Step(body); err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrAuthFailed) && !errors.Is(err, ErrUnknownApp) && !errors.Is(err, ErrState) {
					t.Fatalf("Step: unexpected error class: %v", err)
				}
				if bytes.Contains([]byte(err.Error()), []byte("s3cr3t")) {
					t.Fatalf("error shows the secret: %v", err)
				}
				return
			}
		}
		if s.Done() {
			t.Fatalf("random messages authenticated")
		}
	})
}

// loadKATsFuzz returns the first handshake bodies of the recorded
// connections, as seeds.
func loadKATsFuzz() [][2][]byte {
	ks, err := readKATs()
	if err != nil {
		return nil
	}
	var out [][2][]byte
	for _, k := range ks {
		in, err := hex.DecodeString(k.In)
		if err != nil {
			continue
		}
		r := bytes.NewReader(in)
		f1, err1 := readFrame(r)
		f2, _ := readFrame(r)
		if err1 == nil {
			out = append(out, [2][]byte{f1.body, f2.body})
		}
	}
	return out
}

func FuzzGCMReader(f *testing.F) {
	key := make([]byte, 16)
	var wire bytes.Buffer
	newGCMWriter(key, &wire, rand.Reader).Write([]byte("a frame's bytes"))
	f.Add(wire.Bytes())
	f.Add(binary.BigEndian.AppendUint64(nil, 1<<40))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, err := io.ReadAll(io.LimitReader(newGCMReader(key, bytes.NewReader(in)), 1<<20))
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("unexpected error: %v", err)
		}
	})
}

func FuzzSASLReader(f *testing.F) {
	var ha1 [16]byte
	f.Add(binary.BigEndian.AppendUint64(nil, 30), false)
	f.Add(binary.BigEndian.AppendUint64(nil, 1<<40), true)
	f.Fuzz(func(t *testing.T, in []byte, des bool) {
		name := "rc4"
		if des {
			name = "3des"
		}
		layer, err := newSASLLayer(ha1, name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll((&saslCipher{layer: layer}).WrapReader(bytes.NewReader(in)))
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("unexpected error: %v", err)
		}
	})
}

func FuzzParseDirectives(f *testing.F) {
	f.Add(`charset=utf-8,username="c3BhcmtTYXNsVXNlcg==",realm="default",nonce="x",nc=00000001,cnonce="y",digest-uri="null/default",maxbuf=65536,response=0,qop=auth`)
	f.Add(`a="\"\\",b=c`)
	f.Fuzz(func(t *testing.T, in string) {
		m, err := parseDirectives(in)
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("unexpected error: %v", err)
		}
		if err == nil && len(m) > len(in) {
			t.Fatalf("%d directives from %d bytes", len(m), len(in))
		}
	})
}
