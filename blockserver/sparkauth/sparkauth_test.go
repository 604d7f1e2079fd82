package sparkauth

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rc4"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/errdefs"
)

func secrets(m map[string]string) SecretFunc {
	return func(app string) ([]byte, bool) {
		v, ok := m[app]
		return []byte(v), ok
	}
}

func saslMessage(app string, payload []byte) []byte {
	b := []byte{saslTag}
	b = appendBytes(b, []byte(app))
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func authMessageBytes(app string, salt, ct []byte) []byte {
	return (&authMessage{appID: app, salt: salt, ciphertext: ct}).encode()
}

func TestStepMalformed(t *testing.T) {
	salt := make([]byte, aeSaltLen)
	ct := make([]byte, aeCiphertextLen)
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"no handshake", []byte{0x0e, 1, 2, 3}, ErrMalformed},
		{"sasl cut in app id", []byte{saslTag, 0, 0, 0, 9, 'a'}, ErrMalformed},
		{"sasl negative app id length", []byte{saslTag, 0xff, 0xff, 0xff, 0xff}, ErrMalformed},
		{"sasl no payload length", append([]byte{saslTag}, appendBytes(nil, []byte("app"))...), ErrMalformed},
		{"sasl payload length wrong", append(saslMessage("app", nil), 1), ErrMalformed},
		{"sasl initial response", saslMessage("app", []byte("x")), ErrMalformed},
		{"sasl empty app id", saslMessage("", nil), ErrMalformed},
		{"sasl control in app id", saslMessage("a\nb", nil), ErrMalformed},
		{"sasl app id too long", saslMessage(strings.Repeat("a", maxAppIDLen+1), nil), ErrMalformed},
		{"sasl token too long", saslMessage("app", make([]byte, maxSASLToken+1)), ErrMalformed},
		{"sasl unknown app", saslMessage("nobody", nil), ErrUnknownApp},
		{"ae short salt", authMessageBytes("app", salt[:8], ct), ErrMalformed},
		{"ae short ciphertext", authMessageBytes("app", salt, ct[:40]), ErrMalformed},
		{"ae long ciphertext", authMessageBytes("app", salt, append(ct, 0)), ErrMalformed},
		{"ae trailing bytes", append(authMessageBytes("app", salt, ct), 0), ErrMalformed},
		{"ae unknown app", authMessageBytes("nobody", salt, ct), ErrUnknownApp},
		{"ae garbage key", authMessageBytes("app", salt, ct), ErrAuthFailed},
	} {
		s := NewServer(secrets(map[string]string{"app": "s3cr3t"}), Options{})
		reply, err := s.Step(tc.body)
		if !errors.Is(err, tc.want) || reply != nil {
			t.Errorf("%s: Step = %q, %v; want nil, %v", tc.name, reply, err, tc.want)
			continue
		}
		if !s.Failed() || s.Done() || s.AppID() != "" || s.Cipher() != nil {
			t.Errorf("%s: after the error: failed %v done %v app %q cipher %v", tc.name, s.Failed(), s.Done(), s.AppID(), s.Cipher())
		}
		if _, err := s.Step(saslMessage("app", nil)); !errors.Is(err, ErrState) {
			t.Errorf("%s: Step after failure = %v, want ErrState", tc.name, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(s.String(), "s3cr3t") {
			t.Errorf("%s: error or String shows the secret", tc.name)
		}
	}
}

func TestStepSASLSecondMessage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		app      string
		response func(nonce string) string
		want     error
	}{
		{"other app", "other", func(n string) string { return `nonce="` + n + `"` }, ErrAuthFailed},
		{"no username", "app", func(n string) string {
			return `nonce="` + n + `",cnonce="x",nc=00000001,digest-uri="null/default",response=00`
		}, ErrMalformed},
		{"wrong nonce", "app", func(string) string {
			return `username="u",nonce="x",cnonce="x",nc=00000001,digest-uri="null/default",response=00`
		}, ErrAuthFailed},
		{"nc 2", "app", func(n string) string {
			return `username="u",nonce="` + n + `",cnonce="x",nc=00000002,digest-uri="null/default",response=00`
		}, ErrAuthFailed},
		{"qop not offered", "app", func(n string) string {
			return `username="u",nonce="` + n + `",cnonce="x",nc=00000001,digest-uri="null/default",response=00,qop=auth-int`
		}, ErrAuthFailed},
		{"cipher not offered", "app", func(n string) string {
			return `username="u",nonce="` + n + `",cnonce="x",nc=00000001,digest-uri="null/default",response=00,qop=auth-conf,cipher="des"`
		}, ErrAuthFailed},
		{"bad response", "app", func(n string) string {
			return `username="u",realm="default",nonce="` + n + `",cnonce="x",nc=00000001,digest-uri="null/default",response=0123456789abcdef0123456789abcdef,qop=auth`
		}, ErrAuthFailed},
		{"duplicate", "app", func(n string) string {
			return `username="u",username="v",nonce="` + n + `"`
		}, ErrMalformed},
		{"unterminated", "app", func(n string) string { return `username="u` }, ErrMalformed},
	} {
		s := NewServer(secrets(map[string]string{"app": "s3cr3t", "other": "x"}), Options{})
		ch, err := s.Step(saslMessage("app", nil))
		if err != nil {
			t.Fatal(err)
		}
		dirs, err := parseDirectives(string(ch))
		if err != nil {
			t.Fatalf("challenge %q: %v", ch, err)
		}
		if dirs["realm"] != "default" || dirs["algorithm"] != "md5-sess" || dirs["qop"] != "auth-conf,auth" || dirs["cipher"] != "3des,rc4" {
			t.Fatalf("challenge %q", ch)
		}
		_, err = s.Step(saslMessage(tc.app, []byte(tc.response(dirs["nonce"]))))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Step = %v, want %v", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte("s3cr3t"))) {
			t.Errorf("%s: error %q shows the secret", tc.name, err)
		}
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{
		{MaxSASLBlock: 10},
		{MaxSASLBlock: 1<<30 + 1},
		{AuthEngineVersion: 3},
		{AuthEngineVersion: -1},
		{AuthEngineCipher: "AES/CBC/PKCS5Padding"},
	} {
		s := NewServer(secrets(nil), o)
		if _, err := s.Step(saslMessage("app", nil)); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "Options.") {
			t.Errorf("Options %+v: Step = %v, want an invalid argument naming the field", o, err)
		}
	}
	s := NewServer(secrets(map[string]string{"app": "x"}), Options{DisableSASL: true})
	if _, err := s.Step(saslMessage("app", nil)); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("DisableSASL: Step = %v, want ErrAuthFailed", err)
	}
	s = NewServer(secrets(map[string]string{"app": "x"}), Options{DisableAuthEngine: true})
	if _, err := s.Step(authMessageBytes("app", make([]byte, 16), make([]byte, aeCiphertextLen))); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("DisableAuthEngine: Step = %v, want ErrAuthFailed", err)
	}
	s = NewServer(secrets(map[string]string{"app": "x"}), Options{SASLRequireEncryption: true})
	ch, err := s.Step(saslMessage("app", nil))
	if err != nil || !strings.Contains(string(ch), `qop="auth-conf",`) {
		t.Errorf("SASLRequireEncryption: challenge %q, %v", ch, err)
	}
}

func TestParseDirectives(t *testing.T) {
	got, err := parseDirectives(` a=b , c="d,\"e\"" ,,f=""`)
	if err != nil || len(got) != 3 || got["a"] != "b" || got["c"] != `d,"e"` || got["f"] != "" {
		t.Errorf("parseDirectives = %q, %v", got, err)
	}
	for _, in := range []string{`a`, `=b`, `a="b`, `a=b c=d`, "a=\x01"} {
		if _, err := parseDirectives(in); !errors.Is(err, ErrMalformed) {
			t.Errorf("parseDirectives(%q) = %v, want ErrMalformed", in, err)
		}
	}
}

// Spark's password is Netty's line-broken base64: a newline after every 76
// characters but the last.
func TestSparkBase64(t *testing.T) {
	for _, n := range []int{0, 1, 56, 57, 58, 64, 114, 115, 200} {
		secret := bytes.Repeat([]byte{'k'}, n)
		std := base64.StdEncoding.EncodeToString(secret)
		got := string(sparkBase64(secret))
		if strings.ReplaceAll(got, "\n", "") != std || strings.HasSuffix(got, "\n") {
			t.Errorf("sparkBase64(%d bytes) = %q", n, got)
		}
		for i, line := range strings.Split(got, "\n") {
			if l := len(line); l > 76 || (l != 76 && i < strings.Count(got, "\n")) {
				t.Errorf("sparkBase64(%d bytes): line %d of %d characters", n, i, l)
			}
		}
	}
}

func TestDESKey(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{[]byte{0, 0, 0, 0, 0, 0, 0}, []byte{1, 1, 1, 1, 1, 1, 1, 1}},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte{0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe}},
		// 0x80 00.. : the top bit lands in the first byte's top bit.
		{[]byte{0x80, 0, 0, 0, 0, 0, 0}, []byte{0x80, 1, 1, 1, 1, 1, 1, 1}},
		// ..00 01 : the bottom bit lands above the last byte's parity bit.
		{[]byte{0, 0, 0, 0, 0, 0, 1}, []byte{1, 1, 1, 1, 1, 1, 1, 0x02}},
	} {
		got := make([]byte, 8)
		desKey(got, tc.in)
		if !bytes.Equal(got, tc.want) {
			t.Errorf("desKey(% x) = % x, want % x", tc.in, got, tc.want)
		}
	}
}

// GCM: both directions use one key, so what the writer writes, the reader
// reads; sizes around the segment boundaries.
func TestGCMRoundTrip(t *testing.T) {
	for _, keyLen := range []int{16, 32} {
		key := make([]byte, keyLen)
		rand.Read(key)
		var wire bytes.Buffer
		w := newGCMWriter(key, &wire, rand.Reader)
		var want []byte
		for _, n := range []int{1, 9, gcmPlainSegment - 1, gcmPlainSegment, gcmPlainSegment + 1, 2 * gcmPlainSegment, 100_000} {
			p := make([]byte, n)
			rand.Read(p)
			if m, err := w.Write(p); m != n || err != nil {
				t.Fatalf("Write(%d) = %d, %v", n, m, err)
			}
			want = append(want, p...)
		}
		got, err := io.ReadAll(newGCMReader(key, &wire))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("key %d: read back %d bytes, %v; want %d", keyLen, len(got), err, len(want))
		}
	}
}

func TestGCMReaderBounds(t *testing.T) {
	key := make([]byte, 16)
	msg := func(length uint64, hdr byte) []byte {
		b := binary.BigEndian.AppendUint64(nil, length)
		return append(append(b, hdr), make([]byte, 23)...)
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"length below the header", msg(8+23, 24)},
		{"length past 2^62", msg(1<<63, 24)},
		{"header length byte", msg(8+24, 40)},
		{"segment shorter than its tag", append(msg(8+24+10, 24), make([]byte, 10)...)},
		{"cut in the segment", append(msg(8+24+100, 24), make([]byte, 50)...)},
		{"bad tag", append(msg(8+24+100, 24), make([]byte, 100)...)},
	} {
		_, err := io.ReadAll(newGCMReader(key, bytes.NewReader(tc.in)))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
		}
	}
	// A message with no plaintext reads as nothing.
	var wire bytes.Buffer
	b := binary.BigEndian.AppendUint64(nil, 8+24)
	wire.Write(append(append(b, 24), make([]byte, 23)...))
	if got, err := io.ReadAll(newGCMReader(key, &wire)); err != nil || len(got) != 0 {
		t.Errorf("empty message: %q, %v", got, err)
	}
}

func TestSASLReaderBounds(t *testing.T) {
	var ha1 [16]byte
	layer, err := newSASLLayer(ha1, "rc4")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint64{0, 7, 8 + DefaultMaxSASLBlock + 8 + 10 + 6 + 8 + 1, 1 << 62} {
		in := binary.BigEndian.AppendUint64(nil, n)
		_, err := io.ReadAll((&saslCipher{layer: layer}).WrapReader(bytes.NewReader(in)))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("block length %d: %v, want ErrCorrupt", n, err)
		}
	}
	// A block of garbage fails its MAC; a short one its size check.
	for _, body := range [][]byte{make([]byte, 40), make([]byte, 10)} {
		in := binary.BigEndian.AppendUint64(nil, uint64(8+len(body)))
		in = append(in, body...)
		copy(in[len(in)-6:], []byte{0, 1, 0, 0, 0, 0})
		_, err := io.ReadAll((&saslCipher{layer: layer}).WrapReader(bytes.NewReader(in)))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("garbage block of %d bytes: %v, want ErrCorrupt", len(body), err)
		}
	}
}

func TestAECipherBeforeRead(t *testing.T) {
	keys, err := aeSessionKeys(make([]byte, 32), []byte("transcript"))
	if err != nil {
		t.Fatal(err)
	}
	c := newAECipher(keys, &Options{Rand: rand.Reader})
	if _, err := c.WrapWriter(io.Discard).Write([]byte("x")); !errors.Is(err, ErrNotYetKnown) {
		t.Errorf("Write before the first read = %v, want ErrNotYetKnown", err)
	}
	// Nine bytes that fit no setting (a CTR frame header decrypts to
	// something else with overwhelming chance; this one is checked).
	_, err = c.WrapReader(bytes.NewReader(bytes.Repeat([]byte{0xff}, 64))).Read(make([]byte, 8))
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("garbage first bytes: %v, want ErrCorrupt", err)
	}
	if s := c.String(); !strings.Contains(s, "not yet") {
		t.Errorf("String = %q", s)
	}
}

// saslClientLayer is the client's side of newSASLLayer: it encrypts with
// Kcc and Kic, decrypts with Kcs and Kis.
func saslClientLayer(t *testing.T, ha1 [16]byte, name string) *saslLayer {
	t.Helper()
	l, err := newSASLLayer(ha1, name)
	if err != nil {
		t.Fatal(err)
	}
	kcc := md5Concat(ha1[:], magicSealC2S)
	kcs := md5Concat(ha1[:], magicSealS2C)
	c := &saslLayer{name: name}
	c.out.mac, c.in.mac = l.in.mac, l.out.mac
	switch name {
	case "rc4":
		c.out.stream, _ = rc4NewCipher(kcc)
		c.in.stream, _ = rc4NewCipher(kcs)
	case "3des":
		out, _ := tripleDES(kcc)
		in, _ := tripleDES(kcs)
		c.out.block = cipher.NewCBCEncrypter(out, kcc[8:16])
		c.in.block = cipher.NewCBCDecrypter(in, kcs[8:16])
	}
	return c
}

func rc4NewCipher(k []byte) (cipher.Stream, error) { return rc4.NewCipher(k) }

// Frames announced with BeginFrame and written in pieces, and plain Writes,
// read back as the same stream: SASL both ways, GCM.
func TestFrameWriters(t *testing.T) {
	sizes := []int{1, 21, 7000, 65535, 65536, 65537, 2*65536 + 5, gcmPlainSegment, gcmPlainSegment + 1, 3 * gcmPlainSegment}
	write := func(t *testing.T, fw FrameWriter) []byte {
		var all []byte
		for i, n := range sizes {
			p := make([]byte, n)
			rand.Read(p)
			all = append(all, p...)
			if i%2 == 1 { // a plain Write
				if m, err := fw.Write(p); m != n || err != nil {
					t.Fatalf("Write(%d) = %d, %v", n, m, err)
				}
				continue
			}
			if err := fw.BeginFrame(int64(n)); err != nil {
				t.Fatal(err)
			}
			for len(p) > 0 {
				k := min(len(p), 5000)
				if m, err := fw.Write(p[:k]); m != k || err != nil {
					t.Fatalf("Write(%d) in a frame = %d, %v", k, m, err)
				}
				p = p[k:]
			}
		}
		return all
	}
	for _, name := range []string{"rc4", "3des"} {
		var ha1 [16]byte
		rand.Read(ha1[:])
		srv, err := newSASLLayer(ha1, name)
		if err != nil {
			t.Fatal(err)
		}
		cli := saslClientLayer(t, ha1, name)
		var wire bytes.Buffer
		want := write(t, (&saslCipher{layer: srv}).WrapWriter(&wire))
		got, err := io.ReadAll((&saslCipher{layer: cli}).WrapReader(&wire))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("sasl %s server to client: %d bytes, %v; want %d", name, len(got), err, len(want))
		}
		wire.Reset()
		want = write(t, (&saslCipher{layer: cli}).WrapWriter(&wire))
		got, err = io.ReadAll((&saslCipher{layer: srv}).WrapReader(&wire))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("sasl %s client to server: %d bytes, %v; want %d", name, len(got), err, len(want))
		}
	}
	for _, keyLen := range []int{16, 32} {
		key := make([]byte, keyLen)
		rand.Read(key)
		var wire bytes.Buffer
		want := write(t, newGCMWriter(key, &wire, rand.Reader))
		got, err := io.ReadAll(newGCMReader(key, &wire))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("gcm key %d: %d bytes, %v; want %d", keyLen, len(got), err, len(want))
		}
	}
}

func TestFrameWriterMisuse(t *testing.T) {
	var ha1 [16]byte
	layer, _ := newSASLLayer(ha1, "rc4")
	keys, _ := aeSessionKeys(make([]byte, 32), nil)
	s, _ := newCTR(keys.v2, keys.inputIV)
	for name, fw := range map[string]FrameWriter{
		"sasl": (&saslCipher{layer: layer}).WrapWriter(io.Discard),
		"gcm":  newGCMWriter(make([]byte, 16), io.Discard, rand.Reader),
		"ctr":  &ctrWriter{s: s, w: io.Discard},
	} {
		if err := fw.BeginFrame(10); err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(make([]byte, 11)); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: Write past the frame = %v, want ErrFrame", name, err)
		}
		fw.Write(make([]byte, 4))
		if err := fw.BeginFrame(3); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: BeginFrame within a frame = %v, want ErrFrame", name, err)
		}
		if err := fw.BeginFrame(-1); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: BeginFrame(-1) = %v, want ErrFrame", name, err)
		}
	}
}
