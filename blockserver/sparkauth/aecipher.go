package sparkauth

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/shuffled/shuffled/errdefs"
)

// ErrNotYetKnown: an AuthEngine cipher's writer was used before its reader
// saw the client's first bytes, which tell the settings.
var ErrNotYetKnown = errdefs.New(errdefs.ErrFailedPrecondition, "sparkauth: AuthEngine settings not yet known: read the client's first request before writing")

// How the server finds the client's authEngineVersion and cipher. The
// client speaks first after the handshake, and every network-common frame
// is at least 9 bytes (8 of length, 1 of type), so the server reads the
// first 9 bytes and tries:
//
//   - GCM: the bytes are in the clear an 8-byte message length, then the
//     first byte of Tink's header, its own length: 1 + 16 + 7 = 24 for a
//     16-byte key (version 2), 1 + 32 + 7 = 40 for the 32-byte key of
//     version 1. The segments' tags then confirm the key.
//   - CTR: decrypted with each version's key, the bytes must read as a frame
//     header: a length in [9, 2^31] and a message type below 13 (Spark's
//     Message.Type). A wrong key passes this with a chance below 2^-36.
//
// When no candidate fits, or more than one does, the read fails
// (ErrCorrupt): the client's settings are not ones Spark has.
const (
	ctrMaxFrame    = 1 << 31
	maxMessageType = 12
)

type aeMode struct {
	version int
	gcm     bool
	key     []byte
}

func (m *aeMode) String() string {
	name := CipherCTR
	if m.gcm {
		name = CipherGCM
	}
	return fmt.Sprintf("authengine v%d %s", m.version, name)
}

// aeCipher is AuthEngine's session cipher, its settings found from the
// stream.
type aeCipher struct {
	version int    // 0: either
	cipher  string // "": either
	rand    io.Reader

	mu    sync.Mutex
	keys  *aeKeys // wiped once both directions are set up
	mode  *aeMode
	users int // directions not yet set up
}

var _ Cipher = (*aeCipher)(nil)

func newAECipher(keys *aeKeys, opts *Options) *aeCipher {
	return &aeCipher{version: opts.AuthEngineVersion, cipher: opts.AuthEngineCipher, rand: opts.Rand, keys: keys, users: 2}
}

func (c *aeCipher) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mode == nil {
		return "authengine (settings not yet seen)"
	}
	return c.mode.String()
}

// setUp notes that one direction no longer needs the key material.
func (c *aeCipher) setUp() {
	c.users--
	if c.users == 0 {
		c.keys.wipe()
		if !c.mode.gcm { // CTR's streams hold their own key schedules now
			clear(c.mode.key)
		}
	}
}

func (c *aeCipher) WrapReader(r io.Reader) io.Reader { return &aeReader{c: c, r: r} }

func (c *aeCipher) WrapWriter(w io.Writer) FrameWriter { return &aeWriter{c: c, w: w} }

// detect chooses the mode from the client's first 9 bytes, raw.
func (c *aeCipher) detect(raw []byte) (*aeMode, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.keys
	var found []*aeMode
	if c.cipher != CipherCTR {
		n := binary.BigEndian.Uint64(raw[:8])
		h := int(raw[8])
		for _, m := range []*aeMode{{version: 1, gcm: true, key: k.v1}, {version: 2, gcm: true, key: k.v2}} {
			if c.version != 0 && c.version != m.version {
				continue
			}
			if h == gcmHeaderLen(len(m.key)) && n >= uint64(8+h) && n <= 1<<62 {
				found = append(found, m)
			}
		}
	}
	if len(found) == 0 && c.cipher != CipherGCM {
		for _, m := range []*aeMode{{version: 1, key: k.v1}, {version: 2, key: k.v2}} {
			if c.version != 0 && c.version != m.version {
				continue
			}
			var hdr [9]byte
			s, err := newCTR(m.key, k.outputIV)
			if err != nil {
				return nil, err
			}
			s.XORKeyStream(hdr[:], raw[:9])
			n := binary.BigEndian.Uint64(hdr[:8])
			if n >= 9 && n <= ctrMaxFrame && hdr[8] <= maxMessageType {
				found = append(found, m)
			}
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%w: the client's first bytes fit no AuthEngine version and cipher this server accepts", ErrCorrupt)
	case 1:
	default:
		return nil, fmt.Errorf("%w: the client's first bytes fit more than one AuthEngine setting", ErrCorrupt)
	}
	m := &aeMode{version: found[0].version, gcm: found[0].gcm, key: append([]byte(nil), found[0].key...)}
	c.mode = m
	return m, nil
}

func newCTR(key, iv []byte) (cipher.Stream, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sparkauth: aes: %w", err)
	}
	return cipher.NewCTR(b, iv), nil
}

type aeReader struct {
	c     *aeCipher
	r     io.Reader
	inner io.Reader
	err   error
}

func (a *aeReader) Read(p []byte) (int, error) {
	if a.inner == nil {
		if a.err != nil {
			return 0, a.err
		}
		if a.err = a.start(); a.err != nil {
			return 0, a.err
		}
	}
	return a.inner.Read(p)
}

func (a *aeReader) start() error {
	raw := make([]byte, 9)
	if _, err := io.ReadFull(a.r, raw); err != nil {
		if err == io.ErrUnexpectedEOF {
			return fmt.Errorf("%w: connection closed within the first frame", ErrCorrupt)
		}
		return err
	}
	m, err := a.c.detect(raw)
	if err != nil {
		return err
	}
	src := io.MultiReader(bytes.NewReader(raw), a.r)
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	defer a.c.setUp()
	if m.gcm {
		a.inner = newGCMReader(m.key, src)
		return nil
	}
	s, err := newCTR(m.key, a.c.keys.outputIV)
	if err != nil {
		return err
	}
	a.inner = &cipher.StreamReader{S: s, R: src}
	return nil
}

type aeWriter struct {
	c     *aeCipher
	w     io.Writer
	inner FrameWriter
}

// ensure sets up the writer of the mode the reader found.
func (a *aeWriter) ensure() error {
	if a.inner != nil {
		return nil
	}
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	m := a.c.mode
	if m == nil {
		return ErrNotYetKnown
	}
	if m.gcm {
		a.inner = newGCMWriter(m.key, a.w, a.c.rand)
	} else {
		s, err := newCTR(m.key, a.c.keys.inputIV)
		if err != nil {
			return err
		}
		a.inner = &ctrWriter{s: s, w: a.w}
	}
	a.c.setUp()
	return nil
}

func (a *aeWriter) BeginFrame(n int64) error {
	if err := a.ensure(); err != nil {
		return err
	}
	return a.inner.BeginFrame(n)
}

func (a *aeWriter) Write(p []byte) (int, error) {
	if err := a.ensure(); err != nil {
		return 0, err
	}
	return a.inner.Write(p)
}

// ctrWriter encrypts through a fixed buffer, so a Write of any size holds at
// most ctrChunk bytes more.
type ctrWriter struct {
	s   cipher.Stream
	w   io.Writer
	fs  frameState
	buf []byte
	err error
}

const ctrChunk = 64 << 10

func (c *ctrWriter) BeginFrame(n int64) error {
	if c.err != nil {
		return c.err
	}
	return c.fs.begin(n)
}

func (c *ctrWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if err := c.fs.take(len(p)); err != nil {
		return 0, err
	}
	if c.buf == nil {
		c.buf = make([]byte, ctrChunk)
	}
	written := 0
	for len(p) > 0 {
		n := min(len(p), len(c.buf))
		c.s.XORKeyStream(c.buf[:n], p[:n])
		if _, err := c.w.Write(c.buf[:n]); err != nil {
			// The keystream has moved on: the stream cannot go on.
			c.err = err
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// GCM (GcmTransportCipher, Spark 3.5.2+ and 4.x): each message the sender
// writes is one Tink AesGcmHkdfStreaming stream (ciphertext segments of
// 32 KiB, no first-segment offset), framed as
//
//	u64 length    the whole message, these 8 bytes included
//	u8  h         Tink's header length: 1 + key length + 7
//	salt          key length bytes
//	nonce prefix  7 bytes
//	segments      each up to 32768 bytes: AES-GCM of up to 32752 plaintext
//	              bytes, then its 16-byte tag; all full but the last
//
// segment key = HKDF-SHA256(key, salt, info = the 8 length bytes, key length)
// segment IV  = nonce prefix || u32 segment number || u8 1 if last else 0
// A message with no plaintext has no segment. Both directions use the same
// key; the salt differs per message.
const (
	gcmSegment      = 32 << 10
	gcmTag          = 16
	gcmPlainSegment = gcmSegment - gcmTag
	gcmNoncePrefix  = 7
)

func gcmHeaderLen(keyLen int) int { return 1 + keyLen + gcmNoncePrefix }

func gcmSegmentAEAD(key, salt []byte, length [8]byte) (cipher.AEAD, error) {
	sk, err := hkdf.Key(sha256.New, key, salt, string(length[:]), len(key))
	if err != nil {
		return nil, fmt.Errorf("sparkauth: hkdf: %w", err)
	}
	g, err := aeGCM(sk)
	clear(sk)
	return g, err
}

func gcmNonce(dst *[12]byte, prefix []byte, seg uint32, last bool) {
	copy(dst[:gcmNoncePrefix], prefix)
	binary.BigEndian.PutUint32(dst[gcmNoncePrefix:], seg)
	dst[11] = 0
	if last {
		dst[11] = 1
	}
}

type gcmReader struct {
	key    []byte
	r      io.Reader
	hdrLen int

	aead      cipher.AEAD
	prefix    []byte
	left      uint64 // ciphertext bytes left in the current message
	seg       uint32
	buf       []byte
	plain     []byte
	err       error
	inMessage bool
}

func newGCMReader(key []byte, r io.Reader) *gcmReader {
	return &gcmReader{key: key, r: r, hdrLen: gcmHeaderLen(len(key)), buf: make([]byte, gcmSegment)}
}

func (g *gcmReader) Read(p []byte) (int, error) {
	for len(g.plain) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		g.err = g.next()
	}
	n := copy(p, g.plain)
	g.plain = g.plain[n:]
	return n, nil
}

func (g *gcmReader) cut(err error, what string) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: GCM message cut short in its %s", ErrCorrupt, what)
	}
	return err
}

// next reads the next segment (or message header).
func (g *gcmReader) next() error {
	if !g.inMessage {
		var length [8]byte
		if _, err := io.ReadFull(g.r, length[:]); err != nil {
			if err == io.EOF {
				return io.EOF
			}
			return g.cut(err, "length")
		}
		n := binary.BigEndian.Uint64(length[:])
		if n < uint64(8+g.hdrLen) || n > 1<<62 {
			return fmt.Errorf("%w: GCM message length %d out of range [%d,2^62]", ErrCorrupt, n, 8+g.hdrLen)
		}
		hdr := g.buf[:g.hdrLen]
		if _, err := io.ReadFull(g.r, hdr); err != nil {
			return g.cut(err, "header")
		}
		if int(hdr[0]) != g.hdrLen {
			return fmt.Errorf("%w: GCM header length byte %d, want %d", ErrCorrupt, hdr[0], g.hdrLen)
		}
		keyLen := len(g.key)
		aead, err := gcmSegmentAEAD(g.key, hdr[1:1+keyLen], length)
		if err != nil {
			return err
		}
		g.aead = aead
		g.prefix = append(g.prefix[:0], hdr[1+keyLen:]...)
		g.left = n - 8 - uint64(g.hdrLen)
		g.seg = 0
		g.inMessage = g.left > 0
		return nil
	}
	size := int(min(g.left, gcmSegment))
	if size < gcmTag {
		return fmt.Errorf("%w: GCM segment of %d bytes, less than its tag", ErrCorrupt, size)
	}
	ct := g.buf[:size]
	if _, err := io.ReadFull(g.r, ct); err != nil {
		return g.cut(err, "segment")
	}
	g.left -= uint64(size)
	last := g.left == 0
	var nonce [12]byte
	gcmNonce(&nonce, g.prefix, g.seg, last)
	pt, err := g.aead.Open(ct[:0], nonce[:], ct, nil)
	if err != nil {
		return fmt.Errorf("%w: GCM segment %d does not authenticate", ErrCorrupt, g.seg)
	}
	g.seg++
	g.inMessage = !last
	g.plain = pt
	return nil
}

// gcmWriter writes each announced frame, or each Write outside one, as one
// GCM message, sealing a segment as soon as it is full.
type gcmWriter struct {
	key  []byte
	w    io.Writer
	rand io.Reader
	fs   frameState

	aead   cipher.AEAD // the message in progress
	prefix [gcmNoncePrefix]byte
	seg    uint32
	pend   []byte // plaintext of the segment in progress
	out    []byte // the message's length and header not yet written, then a sealed segment
	err    error
}

func newGCMWriter(key []byte, w io.Writer, rand io.Reader) *gcmWriter {
	return &gcmWriter{key: key, w: w, rand: rand}
}

func (g *gcmWriter) BeginFrame(n int64) error {
	if g.err != nil {
		return g.err
	}
	if err := g.fs.begin(n); err != nil {
		return err
	}
	if n > 0 {
		if err := g.start(n); err != nil {
			g.err = err
			return err
		}
	}
	return nil
}

// start begins a message of n plaintext bytes: its length and header go
// out with its first segment.
func (g *gcmWriter) start(n int64) error {
	keyLen := len(g.key)
	hdrLen := gcmHeaderLen(keyLen)
	full, part := n/gcmPlainSegment, n%gcmPlainSegment
	total := uint64(8+hdrLen) + uint64(full)*gcmSegment
	if part > 0 {
		total += uint64(part + gcmTag)
	}
	if g.out == nil {
		g.out = make([]byte, 0, 8+gcmHeaderLen(32)+gcmSegment)
		g.pend = make([]byte, 0, gcmPlainSegment)
	}
	var length [8]byte
	binary.BigEndian.PutUint64(length[:], total)
	out := append(g.out[:0], length[:]...)
	out = append(out, byte(hdrLen))
	out = out[:8+hdrLen]
	if _, err := fullRead(g.rand, out[9:]); err != nil {
		return err
	}
	aead, err := gcmSegmentAEAD(g.key, out[9:9+keyLen], length)
	if err != nil {
		return err
	}
	copy(g.prefix[:], out[9+keyLen:8+hdrLen])
	g.aead, g.seg, g.out, g.pend = aead, 0, out, g.pend[:0]
	return nil
}

// seal seals one segment of plaintext p and writes it (after the message's
// header, for its first segment).
func (g *gcmWriter) seal(p []byte, last bool) error {
	var nonce [12]byte
	gcmNonce(&nonce, g.prefix[:], g.seg, last)
	g.seg++
	g.out = g.aead.Seal(g.out, nonce[:], p, nil)
	_, err := g.w.Write(g.out)
	g.out = g.out[:0]
	return err
}

func (g *gcmWriter) Write(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !g.fs.in {
		// Outside an announced frame: p is one message of its own.
		if err := g.BeginFrame(int64(len(p))); err != nil {
			return 0, err
		}
	}
	if err := g.fs.take(len(p)); err != nil {
		return 0, err
	}
	n := len(p)
	more := func() bool { return len(p) > 0 || g.fs.in }
	for len(p) > 0 {
		if len(g.pend) == 0 && len(p) >= gcmPlainSegment {
			seg := p[:gcmPlainSegment]
			p = p[gcmPlainSegment:]
			if err := g.seal(seg, !more()); err != nil {
				g.err = err
				return n - len(p), err
			}
			continue
		}
		k := min(len(p), gcmPlainSegment-len(g.pend))
		g.pend = append(g.pend, p[:k]...)
		p = p[k:]
		if len(g.pend) == gcmPlainSegment || !more() {
			if err := g.seal(g.pend, !more()); err != nil {
				g.err = err
				return n - len(p), err
			}
			g.pend = g.pend[:0]
		}
	}
	return n, nil
}
