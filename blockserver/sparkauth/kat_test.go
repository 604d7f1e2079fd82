package sparkauth

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The known-answer tests replay connections of Spark's own client
// (testdata/kat, recorded by TestSparkInterop with SPARKAUTH_RECORD=dir, on
// Spark 3.5.9 and 4.3.0) into a Server whose randomness is the recording's:
// the server must answer byte for byte what Spark's client accepted, and
// read the client's encrypted request.

func loadKATs(t *testing.T) []kat {
	t.Helper()
	ks, err := readKATs()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func readKATs() ([]kat, error) {
	files, err := filepath.Glob(filepath.Join("testdata", "kat", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no testdata/kat/*.json")
	}
	var ks []kat
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var k kat
		if err := json.Unmarshal(b, &k); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

type replay struct {
	out      []byte
	requests [][]byte
	cipher   string
	mech     Mechanism
	stepErr  error
	readErr  error
}

// replayKAT plays in (the client's bytes) into a Server and echoes each
// request, as the recording server did.
func replayKAT(k kat, in []byte, secret string) (rp replay) {
	srv := NewServer(func(app string) ([]byte, bool) {
		if app != k.App {
			return nil, false
		}
		return []byte(secret), true
	}, katOptions(k.Case))
	br := bufio.NewReader(bytes.NewReader(in))
	var out bytes.Buffer
	defer func() { rp.out = out.Bytes() }()
	for !srv.Done() {
		f, err := readFrame(br)
		if err != nil {
			rp.readErr = err
			return rp
		}
		reply, err := srv.Step(f.body)
		if err != nil {
			rp.stepErr = err
			return rp
		}
		writeResponse(&out, f.id, reply)
	}
	rp.mech = srv.Mechanism()
	var r io.Reader = br
	var w io.Writer = &out
	if c := srv.Cipher(); c != nil {
		r, w = c.WrapReader(br), c.WrapWriter(&out)
		defer func() { rp.cipher = fmt.Sprint(c) }()
	}
	for {
		f, err := readFrame(r)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				rp.readErr = err
			}
			return rp
		}
		rp.requests = append(rp.requests, f.body)
		if err := writeResponse(w, f.id, f.body); err != nil {
			rp.readErr = err
			return rp
		}
	}
}

func TestKnownAnswers(t *testing.T) {
	for _, k := range loadKATs(t) {
		t.Run("spark="+k.Spark+"/"+k.Case, func(t *testing.T) {
			in, err := hex.DecodeString(k.In)
			if err != nil {
				t.Fatal(err)
			}
			want, err := hex.DecodeString(k.Out)
			if err != nil {
				t.Fatal(err)
			}
			rp := replayKAT(k, in, k.Secret)
			if rp.stepErr != nil || rp.readErr != nil {
				t.Fatalf("replay: step %v, read %v", rp.stepErr, rp.readErr)
			}
			if rp.cipher != k.Cipher {
				t.Errorf("cipher %q, want %q", rp.cipher, k.Cipher)
			}
			if len(rp.requests) != 1 || len(rp.requests[0]) != 5 {
				t.Errorf("requests %d, want one of 5 bytes", len(rp.requests))
			}
			if !bytes.Equal(rp.out, want) {
				t.Errorf("server bytes differ from the recording (%d against %d bytes)", len(rp.out), len(want))
			}
		})
	}
}

// A wrong secret fails the handshake: at the first step for AuthEngine
// (the client's key does not open), at the second for SASL (the response
// does not match). The error never shows the secret.
func TestKnownAnswersWrongSecret(t *testing.T) {
	for _, k := range loadKATs(t) {
		in, _ := hex.DecodeString(k.In)
		wrong := strings.ToUpper(k.Secret) // same letters, other bytes
		rp := replayKAT(k, in, wrong)
		if !errors.Is(rp.stepErr, ErrAuthFailed) {
			t.Errorf("%s/%s: step error %v, want ErrAuthFailed", k.Spark, k.Case, rp.stepErr)
			continue
		}
		if len(rp.requests) != 0 {
			t.Errorf("%s/%s: %d requests read after a failed handshake", k.Spark, k.Case, len(rp.requests))
		}
		for _, s := range []string{k.Secret, wrong, string(sparkBase64([]byte(k.Secret))), string(sparkBase64([]byte(wrong)))} {
			if strings.Contains(rp.stepErr.Error(), s) {
				t.Errorf("%s/%s: error %q shows a secret", k.Spark, k.Case, rp.stepErr)
			}
		}
	}
}

// A flipped bit in the client's encrypted request: SASL auth-conf and GCM
// authenticate it (ErrCorrupt); CTR has no integrity (Spark's design), so
// the request reads differently, and a flip in its frame header fails the
// frame.
func TestKnownAnswersTampered(t *testing.T) {
	for _, k := range loadKATs(t) {
		if k.Cipher == "" {
			continue
		}
		in, _ := hex.DecodeString(k.In)
		good := replayKAT(k, in, k.Secret)
		in[len(in)-1] ^= 0x40
		rp := replayKAT(k, in, k.Secret)
		if rp.stepErr != nil {
			t.Errorf("%s/%s: handshake failed: %v", k.Spark, k.Case, rp.stepErr)
			continue
		}
		if strings.Contains(k.Cipher, "CTR") {
			if len(rp.requests) != 1 || bytes.Equal(rp.requests[0], good.requests[0]) {
				t.Errorf("%s/%s: tampered CTR request read as %d requests, the same", k.Spark, k.Case, len(rp.requests))
			}
			continue
		}
		if !errors.Is(rp.readErr, ErrCorrupt) || len(rp.requests) != 0 {
			t.Errorf("%s/%s: tampered request: %d requests, error %v; want none and ErrCorrupt", k.Spark, k.Case, len(rp.requests), rp.readErr)
		}
	}
}

// The reader and the writer of a Cipher run in two goroutines, as a block
// server runs them (the writer after the first request was read): the
// server's bytes are still the recording's.
func TestCipherReaderWriterGoroutines(t *testing.T) {
	for _, k := range loadKATs(t) {
		if k.Cipher == "" {
			continue
		}
		in, _ := hex.DecodeString(k.In)
		want, _ := hex.DecodeString(k.Out)
		srv := NewServer(func(string) ([]byte, bool) { return []byte(k.Secret), true }, katOptions(k.Case))
		br := bufio.NewReader(bytes.NewReader(in))
		var out bytes.Buffer
		for !srv.Done() {
			f, err := readFrame(br)
			if err != nil {
				t.Fatal(err)
			}
			reply, err := srv.Step(f.body)
			if err != nil {
				t.Fatal(err)
			}
			writeResponse(&out, f.id, reply)
		}
		if _, err := srv.Step(saslMessage(k.App, nil)); !errors.Is(err, ErrState) || !srv.Done() {
			t.Errorf("%s/%s: Step after the handshake = %v, done %v; want ErrState, still done", k.Spark, k.Case, err, srv.Done())
		}
		c := srv.Cipher()
		r, w := c.WrapReader(br), c.WrapWriter(&out)
		frames := make(chan frame)
		go func() {
			defer close(frames)
			for {
				f, err := readFrame(r)
				if err != nil {
					return
				}
				frames <- f
			}
		}()
		done := make(chan error)
		go func() {
			for f := range frames {
				if err := writeResponse(w, f.id, f.body); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		if err := <-done; err != nil {
			t.Fatalf("%s/%s: %v", k.Spark, k.Case, err)
		}
		if !bytes.Equal(out.Bytes(), want) || fmt.Sprint(c) != k.Cipher {
			t.Errorf("%s/%s: server bytes differ from the recording, or cipher %q", k.Spark, k.Case, fmt.Sprint(c))
		}
	}
}
