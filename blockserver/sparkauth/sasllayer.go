package sparkauth

import (
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rc4"
	"encoding/binary"
	"fmt"
	"io"
)

// The DIGEST-MD5 security layer for the auth-conf QOP (RFC 2831 2.4), as the
// JDK's DigestMD5Base.DigestPrivacy implements it:
//
//	wrapped = CIPHER(Kc, msg || pad || HMAC-MD5(Ki, seq || msg)[0:10]) || 0x0001 || seq
//
// seq is a 4-byte big-endian counter per direction from 0; pad (3des only)
// is 1 to 8 bytes, each the pad's length; the cipher's state runs on across
// messages (RC4's keystream, 3DES-CBC's chaining). Keys:
//
//	Kic = MD5(H(A1) || "Digest session key to client-to-server signing key magic constant")
//	Kis = MD5(H(A1) || "Digest session key to server-to-client signing key magic constant")
//	Kcc = MD5(H(A1) || "Digest H(A1) to client-to-server sealing key magic constant")
//	Kcs = MD5(H(A1) || "Digest H(A1) to server-to-client sealing key magic constant")
//
// rc4 keys with all 16 bytes of Kc; 3des with the two DES keys made from
// Kc[0:7] and Kc[7:14] (56 bits each, spread 7 to a byte), EDE with K1, K2,
// K1, and CBC with Kc[8:16] as the first IV.
const (
	magicSignC2S = "Digest session key to client-to-server signing key magic constant"
	magicSignS2C = "Digest session key to server-to-client signing key magic constant"
	magicSealC2S = "Digest H(A1) to client-to-server sealing key magic constant"
	magicSealS2C = "Digest H(A1) to server-to-client sealing key magic constant"
	saslMACLen   = 10
)

// saslLayer holds both directions of a connection's security layer.
type saslLayer struct {
	name string
	in   saslDirection // client to server
	out  saslDirection // server to client
}

type saslDirection struct {
	mac    []byte // Ki
	seq    uint32
	stream cipher.Stream    // rc4
	block  cipher.BlockMode // 3des
}

func md5Concat(a []byte, b string) []byte {
	h := md5.New()
	h.Write(a)
	h.Write([]byte(b))
	return h.Sum(nil)
}

func newSASLLayer(ha1 [16]byte, name string) (*saslLayer, error) {
	l := &saslLayer{name: name}
	l.in.mac = md5Concat(ha1[:], magicSignC2S)
	l.out.mac = md5Concat(ha1[:], magicSignS2C)
	kcc := md5Concat(ha1[:], magicSealC2S)
	kcs := md5Concat(ha1[:], magicSealS2C)
	defer clear(kcc)
	defer clear(kcs)
	switch name {
	case "rc4":
		in, err := rc4.NewCipher(kcc)
		if err != nil {
			return nil, fmt.Errorf("sparkauth: rc4: %w", err)
		}
		out, err := rc4.NewCipher(kcs)
		if err != nil {
			return nil, fmt.Errorf("sparkauth: rc4: %w", err)
		}
		l.in.stream, l.out.stream = in, out
	case "3des":
		in, err := tripleDES(kcc)
		if err != nil {
			return nil, err
		}
		out, err := tripleDES(kcs)
		if err != nil {
			return nil, err
		}
		l.in.block = cipher.NewCBCDecrypter(in, kcc[8:16])
		l.out.block = cipher.NewCBCEncrypter(out, kcs[8:16])
	default:
		return nil, fmt.Errorf("%w: cipher %q", ErrAuthFailed, name)
	}
	return l, nil
}

// tripleDES makes the EDE key K1 || K2 || K1 from the first 14 bytes of kc.
func tripleDES(kc []byte) (cipher.Block, error) {
	var key [24]byte
	desKey(key[0:8], kc[0:7])
	desKey(key[8:16], kc[7:14])
	copy(key[16:24], key[0:8])
	b, err := des.NewTripleDESCipher(key[:])
	clear(key[:])
	if err != nil {
		return nil, fmt.Errorf("sparkauth: 3des: %w", err)
	}
	return b, nil
}

// desKey spreads 56 bits (7 bytes, big-endian) over 8 bytes, 7 bits each in
// the high bits, with odd parity in the low bit (the JDK's addDesParity).
func desKey(dst, src []byte) {
	var v uint64
	for _, b := range src[:7] {
		v = v<<8 | uint64(b)
	}
	for i := 7; i >= 0; i-- {
		b := byte(v&0x7f) << 1
		v >>= 7
		if bitsOdd(b) == 0 {
			b |= 1
		}
		dst[i] = b
	}
}

func bitsOdd(b byte) byte {
	b ^= b >> 4
	b ^= b >> 2
	b ^= b >> 1
	return b & 1
}

func (d *saslDirection) hmac(seq []byte, msg []byte) []byte {
	m := hmac.New(md5.New, d.mac)
	m.Write(seq)
	m.Write(msg)
	return m.Sum(nil)[:saslMACLen]
}

// wrap appends msg's wrapped form to dst.
func (l *saslLayer) wrap(dst, msg []byte) []byte {
	d := &l.out
	var seq [4]byte
	binary.BigEndian.PutUint32(seq[:], d.seq)
	d.seq++
	mac := d.hmac(seq[:], msg)
	start := len(dst)
	dst = append(dst, msg...)
	if d.block != nil {
		pad := 8 - (len(msg)+saslMACLen)%8
		for i := 0; i < pad; i++ {
			dst = append(dst, byte(pad))
		}
	}
	dst = append(dst, mac...)
	body := dst[start:]
	if d.block != nil {
		d.block.CryptBlocks(body, body)
	} else {
		d.stream.XORKeyStream(body, body)
	}
	dst = append(dst, 0, 1)
	return append(dst, seq[:]...)
}

// unwrap decrypts and checks one wrapped message in place and returns its
// plaintext, a prefix of in.
func (l *saslLayer) unwrap(in []byte) ([]byte, error) {
	d := &l.in
	if len(in) < 6+saslMACLen {
		return nil, fmt.Errorf("%w: SASL block of %d bytes, less than %d", ErrCorrupt, len(in), 6+saslMACLen)
	}
	body, trailer := in[:len(in)-6], in[len(in)-6:]
	if trailer[0] != 0 || trailer[1] != 1 {
		return nil, fmt.Errorf("%w: SASL block message type %#x, want 1", ErrCorrupt, binary.BigEndian.Uint16(trailer))
	}
	seq := trailer[2:6]
	if got := binary.BigEndian.Uint32(seq); got != d.seq {
		return nil, fmt.Errorf("%w: SASL block sequence number %d, want %d", ErrCorrupt, got, d.seq)
	}
	if d.block != nil {
		if len(body)%8 != 0 {
			return nil, fmt.Errorf("%w: 3des SASL block of %d bytes, not a multiple of 8", ErrCorrupt, len(body))
		}
		d.block.CryptBlocks(body, body)
	} else {
		d.stream.XORKeyStream(body, body)
	}
	msg, mac := body[:len(body)-saslMACLen], body[len(body)-saslMACLen:]
	if d.block != nil {
		pad := int(msg[len(msg)-1])
		if pad < 1 || pad > 8 || pad > len(msg) {
			return nil, fmt.Errorf("%w: SASL block padding %d", ErrCorrupt, pad)
		}
		msg = msg[:len(msg)-pad]
	}
	if !hmac.Equal(mac, d.hmac(seq, msg)) {
		return nil, fmt.Errorf("%w: SASL block MAC does not match", ErrCorrupt)
	}
	d.seq++
	return msg, nil
}

// saslCipher frames the security layer as Spark's SaslEncryption does: each
// wrapped block goes on the wire as an 8-byte big-endian length that counts
// itself, then the block; the plaintext of consecutive blocks is the frame
// stream. Spark's EncryptionHandler wraps at most
// spark.network.sasl.maxEncryptedBlockSize (64 KiB) of plaintext per block;
// so does this writer.
type saslCipher struct {
	layer    *saslLayer
	maxBlock int
}

var (
	_ Cipher       = (*saslCipher)(nil)
	_ fmt.Stringer = (*saslCipher)(nil)
	_ fmt.Stringer = (*aeCipher)(nil)
)

// saslOutBlock is the plaintext per block the writer wraps.
const saslOutBlock = 64 << 10

func (c *saslCipher) String() string { return "sasl auth-conf " + c.layer.name }

func (c *saslCipher) WrapReader(r io.Reader) io.Reader {
	max := c.maxBlock
	if max == 0 {
		max = DefaultMaxSASLBlock
	}
	return &saslReader{r: r, layer: c.layer, max: max}
}

func (c *saslCipher) WrapWriter(w io.Writer) FrameWriter {
	return &saslWriter{w: w, layer: c.layer}
}

type saslReader struct {
	r     io.Reader
	layer *saslLayer
	max   int
	buf   []byte
	plain []byte
	err   error
}

func (s *saslReader) Read(p []byte) (int, error) {
	for len(s.plain) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.err = s.next()
	}
	n := copy(p, s.plain)
	s.plain = s.plain[n:]
	return n, nil
}

func (s *saslReader) next() error {
	var hdr [8]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return fmt.Errorf("%w: SASL block length cut short", ErrCorrupt)
		}
		return err
	}
	n := binary.BigEndian.Uint64(hdr[:])
	// The most a block of max plaintext bytes wraps to: 8 of pad, the MAC,
	// type and sequence number, and the length itself.
	limit := uint64(s.max) + 8 + saslMACLen + 6 + 8
	if n < 8 || n > limit {
		return fmt.Errorf("%w: SASL block length %d out of range [8,%d]", ErrCorrupt, n, limit)
	}
	size := int(n - 8)
	if cap(s.buf) < size {
		s.buf = make([]byte, size)
	}
	s.buf = s.buf[:size]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: SASL block cut short: %w", ErrCorrupt, err)
	}
	if size == 0 { // the JDK wraps nothing into nothing
		return nil
	}
	msg, err := s.layer.unwrap(s.buf)
	if err != nil {
		return err
	}
	s.plain = msg
	return nil
}

type saslWriter struct {
	w     io.Writer
	layer *saslLayer
	fs    frameState
	pend  []byte // plaintext of the announced frame not yet wrapped (< saslOutBlock)
	buf   []byte
	err   error
}

func (s *saslWriter) BeginFrame(n int64) error {
	if s.err != nil {
		return s.err
	}
	return s.fs.begin(n)
}

func (s *saslWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	framed := s.fs.in
	if err := s.fs.take(len(p)); err != nil {
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		if !framed || (len(s.pend) == 0 && len(p) >= saslOutBlock) {
			k := min(len(p), saslOutBlock)
			if err := s.block(p[:k]); err != nil {
				return n - len(p), err
			}
			p = p[k:]
			continue
		}
		k := min(len(p), saslOutBlock-len(s.pend))
		s.pend = append(s.pend, p[:k]...)
		p = p[k:]
		if len(s.pend) == saslOutBlock {
			if err := s.block(s.pend); err != nil {
				return n - len(p), err
			}
			s.pend = s.pend[:0]
		}
	}
	if framed && !s.fs.in && len(s.pend) > 0 {
		if err := s.block(s.pend); err != nil {
			return n, err
		}
		s.pend = s.pend[:0]
	}
	return n, nil
}

// block wraps msg and writes it with its length.
func (s *saslWriter) block(msg []byte) error {
	s.buf = append(s.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0)
	s.buf = s.layer.wrap(s.buf, msg)
	binary.BigEndian.PutUint64(s.buf[:8], uint64(len(s.buf)))
	if _, err := s.w.Write(s.buf); err != nil {
		// The sequence number and the cipher have moved on: the stream
		// cannot go on.
		s.err = err
		return err
	}
	return nil
}
