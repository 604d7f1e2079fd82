package sparkauth

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// SASL DIGEST-MD5 (RFC 2831) as Spark's SparkSaslServer runs it through the
// JDK: realm "default", the user and the password base64-encoded (see
// sparkBase64), algorithm md5-sess, charset utf-8, the auth-conf QOP with the
// 3des and rc4 ciphers.
const (
	saslRealm      = "default"
	saslDigestURI  = "null/default" // the JDK client's: protocol null, server name "default"
	maxSASLToken   = 4096           // the JDK's MAX_RESPONSE_LENGTH
	saslNonceBytes = 30             // base64: 40 characters, as the JDK's server
	qopAuth        = "auth"
	qopAuthConf    = "auth-conf"
	layerMarker    = ":00000000000000000000000000000000"
)

// saslCiphers returns the auth-conf ciphers offered, strongest first: the
// JDK's client takes the first of the strongest it supports, 3des.
func saslCiphers() []string { return []string{"3des", "rc4"} }

// saslServer is a SASL handshake between its challenge and the client's
// response.
type saslServer struct {
	password []byte // base64 of the secret: zeroed by wipe
	nonce    string
	qops     []string
	ciphers  []string
	maxBlock int
}

func (s *saslServer) wipe() { clear(s.password) }

// decodeSaslMessage reads a SaslMessage: u8 0xEA, string app id, i32 payload
// length, payload.
func decodeSaslMessage(body []byte) (appID string, payload []byte, err error) {
	d := decoder{b: body}
	if tag := d.u8("SaslMessage tag"); d.err == nil && tag != saslTag {
		return "", nil, fmt.Errorf("%w: SaslMessage tag %#x, want 0xea", ErrMalformed, tag)
	}
	appID = d.str("SaslMessage app id", maxAppIDLen)
	n := d.u32("SaslMessage payload length")
	if d.err != nil {
		return "", nil, d.err
	}
	if int64(n) != int64(len(d.b)) {
		return "", nil, fmt.Errorf("%w: SaslMessage payload length %d but %d bytes follow", ErrMalformed, n, len(d.b))
	}
	if len(d.b) > maxSASLToken {
		return "", nil, fmt.Errorf("%w: SaslMessage payload of %d bytes, more than %d", ErrMalformed, len(d.b), maxSASLToken)
	}
	if err := validAppID(appID); err != nil {
		return "", nil, err
	}
	return appID, d.b, nil
}

func (s *Server) saslStep(body []byte) ([]byte, error) {
	appID, payload, err := decodeSaslMessage(body)
	if err != nil {
		return nil, err
	}
	switch s.state {
	case stateNew:
		if len(payload) != 0 {
			return nil, fmt.Errorf("%w: DIGEST-MD5 has no initial response, got %d bytes", ErrMalformed, len(payload))
		}
		secret, ok := s.secrets(appID)
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownApp, appID)
		}
		nonce := make([]byte, saslNonceBytes)
		if _, err := fullRead(s.opts.Rand, nonce); err != nil {
			return nil, err
		}
		ss := &saslServer{
			password: sparkBase64(secret),
			nonce:    base64.StdEncoding.EncodeToString(nonce),
			qops:     []string{qopAuthConf, qopAuth},
			ciphers:  saslCiphers(),
			maxBlock: s.opts.MaxSASLBlock,
		}
		if s.opts.saslCiphers != nil {
			ss.ciphers = s.opts.saslCiphers
		}
		if s.opts.SASLRequireEncryption {
			ss.qops = ss.qops[:1]
		}
		s.sasl, s.appID, s.state = ss, appID, stateSASLChallenged
		return ss.challenge(), nil
	case stateSASLChallenged:
		if appID != s.appID {
			return nil, fmt.Errorf("%w: SaslMessage app id %q, the handshake began for %q", ErrAuthFailed, appID, s.appID)
		}
		reply, c, err := s.sasl.respond(payload)
		s.sasl.wipe()
		s.sasl = nil
		if err != nil {
			return nil, err
		}
		s.cipher, s.state = c, stateDone
		return reply, nil
	}
	return nil, ErrState
}

// challenge is the digest-challenge, laid out as the JDK's server does.
func (ss *saslServer) challenge() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `realm="%s",nonce="%s",qop="%s",charset=utf-8,`, saslRealm, ss.nonce, strings.Join(ss.qops, ","))
	fmt.Fprintf(&b, `cipher="%s",algorithm=md5-sess`, strings.Join(ss.ciphers, ","))
	return []byte(b.String())
}

// saslOnce reports whether a digest-response directive may appear only once.
func saslOnce(name string) bool {
	switch name {
	case "username", "realm", "nonce", "cnonce", "nc", "qop", "digest-uri",
		"response", "maxbuf", "charset", "cipher", "authzid":
		return true
	}
	return false
}

// respond checks a digest-response and returns the response-auth
// ("rspauth=...") and, for auth-conf, the security layer.
func (ss *saslServer) respond(payload []byte) ([]byte, Cipher, error) {
	dirs, err := parseDirectives(string(payload))
	if err != nil {
		return nil, nil, err
	}
	get := func(k string) (string, bool) { v, ok := dirs[k]; return v, ok }
	need := func(k string) (string, error) {
		v, ok := dirs[k]
		if !ok || v == "" {
			return "", fmt.Errorf("%w: digest-response has no %s", ErrMalformed, k)
		}
		return v, nil
	}
	username, err := need("username")
	if err != nil {
		return nil, nil, err
	}
	nonce, err := need("nonce")
	if err != nil {
		return nil, nil, err
	}
	cnonce, err := need("cnonce")
	if err != nil {
		return nil, nil, err
	}
	nc, err := need("nc")
	if err != nil {
		return nil, nil, err
	}
	uri, err := need("digest-uri")
	if err != nil {
		return nil, nil, err
	}
	resp, err := need("response")
	if err != nil {
		return nil, nil, err
	}
	if subtle.ConstantTimeCompare([]byte(nonce), []byte(ss.nonce)) != 1 {
		return nil, nil, fmt.Errorf("%w: digest-response nonce is not the one sent", ErrAuthFailed)
	}
	if nc != "00000001" {
		return nil, nil, fmt.Errorf("%w: digest-response nc %q, want 00000001", ErrAuthFailed, nc)
	}
	realm, _ := get("realm")
	if realm != "" && realm != saslRealm {
		return nil, nil, fmt.Errorf("%w: digest-response realm %q, want %q", ErrAuthFailed, realm, saslRealm)
	}
	if cs, ok := get("charset"); ok && !strings.EqualFold(cs, "utf-8") {
		return nil, nil, fmt.Errorf("%w: digest-response charset %q, want utf-8", ErrMalformed, cs)
	}
	qop, ok := get("qop")
	if !ok {
		qop = qopAuth
	}
	offered := false
	for _, q := range ss.qops {
		offered = offered || q == qop
	}
	if !offered {
		return nil, nil, fmt.Errorf("%w: digest-response qop %q, offered %s", ErrAuthFailed, qop, strings.Join(ss.qops, ","))
	}
	cipherName, hasCipher := get("cipher")
	if qop == qopAuthConf {
		offered := false
		for _, c := range ss.ciphers {
			offered = offered || c == cipherName
		}
		if !offered {
			return nil, nil, fmt.Errorf("%w: digest-response cipher %q, offered %s", ErrAuthFailed, cipherName, strings.Join(ss.ciphers, ","))
		}
	} else if hasCipher {
		return nil, nil, fmt.Errorf("%w: digest-response cipher %q with qop %q", ErrMalformed, cipherName, qop)
	}
	var authzid []byte
	if a, ok := get("authzid"); ok {
		authzid = []byte(a)
	}
	if mb, ok := get("maxbuf"); ok {
		if n, ok := parseDecimal(mb); !ok || n < 16 || n > 1<<24 {
			return nil, nil, fmt.Errorf("%w: digest-response maxbuf %q", ErrMalformed, mb)
		}
	}

	ha1 := saslHA1(username, realm, ss.password, nonce, cnonce, authzid)
	defer clear(ha1[:])
	want := saslResponseValue(ha1, "AUTHENTICATE", uri, qop, nonce, nc, cnonce)
	if subtle.ConstantTimeCompare([]byte(resp), want) != 1 {
		return nil, nil, fmt.Errorf("%w: DIGEST-MD5 response does not match", ErrAuthFailed)
	}
	rspauth := append([]byte("rspauth="), saslResponseValue(ha1, "", uri, qop, nonce, nc, cnonce)...)
	if qop != qopAuthConf {
		return rspauth, nil, nil
	}
	layer, err := newSASLLayer(ha1, cipherName)
	if err != nil {
		return nil, nil, err
	}
	return rspauth, &saslCipher{layer: layer, maxBlock: ss.maxBlock}, nil
}

// saslHA1 is H(A1) of RFC 2831 2.1.2.1 for md5-sess:
// MD5(MD5(user:realm:password):nonce:cnonce[:authzid]).
func saslHA1(username, realm string, password []byte, nonce, cnonce string, authzid []byte) [16]byte {
	inner := md5.New()
	inner.Write([]byte(username))
	inner.Write([]byte{':'})
	inner.Write([]byte(realm))
	inner.Write([]byte{':'})
	inner.Write(password)
	var urp [16]byte
	inner.Sum(urp[:0])
	a1 := md5.New()
	a1.Write(urp[:])
	clear(urp[:])
	a1.Write([]byte(":" + nonce + ":" + cnonce))
	if authzid != nil {
		a1.Write([]byte{':'})
		a1.Write(authzid)
	}
	var ha1 [16]byte
	a1.Sum(ha1[:0])
	return ha1
}

// saslResponseValue is RFC 2831's response-value (method "AUTHENTICATE", the
// client's) or response-auth's value (method "", the server's), in lower-case
// hex.
func saslResponseValue(ha1 [16]byte, method, uri, qop, nonce, nc, cnonce string) []byte {
	a2 := method + ":" + uri
	if qop == qopAuthConf || qop == "auth-int" {
		a2 += layerMarker
	}
	ha2 := md5.Sum([]byte(a2))
	kd := md5.New()
	kd.Write([]byte(hex.EncodeToString(ha1[:])))
	kd.Write([]byte(":" + nonce + ":" + nc + ":" + cnonce + ":" + qop + ":" + hex.EncodeToString(ha2[:])))
	return []byte(hex.EncodeToString(kd.Sum(nil)))
}

// parseDirectives parses a digest-response: comma-separated name=value,
// value a token or a quoted string with backslash escapes.
func parseDirectives(s string) (map[string]string, error) {
	if !isPrintable(s) {
		return nil, fmt.Errorf("%w: digest-response has control characters", ErrMalformed)
	}
	out := make(map[string]string)
	i := 0
	skipLWS := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	for {
		skipLWS()
		for i < len(s) && s[i] == ',' {
			i++
			skipLWS()
		}
		if i >= len(s) {
			return out, nil
		}
		start := i
		for i < len(s) && s[i] != '=' && s[i] != ',' && s[i] != ' ' && s[i] != '\t' {
			i++
		}
		name := strings.ToLower(s[start:i])
		skipLWS()
		if name == "" || i >= len(s) || s[i] != '=' {
			return nil, fmt.Errorf("%w: digest-response directive %q has no value", ErrMalformed, name)
		}
		i++
		skipLWS()
		var val strings.Builder
		if i < len(s) && s[i] == '"' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if c == '\\' && i < len(s) {
					val.WriteByte(s[i])
					i++
					continue
				}
				if c == '"' {
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("%w: digest-response directive %q: unterminated quoted string", ErrMalformed, name)
			}
		} else {
			start := i
			for i < len(s) && s[i] != ',' && s[i] != ' ' && s[i] != '\t' {
				i++
			}
			val.WriteString(s[start:i])
		}
		if _, dup := out[name]; dup && saslOnce(name) {
			return nil, fmt.Errorf("%w: digest-response directive %q appears twice", ErrMalformed, name)
		}
		out[name] = val.String()
		skipLWS()
		if i < len(s) && s[i] != ',' {
			return nil, fmt.Errorf("%w: digest-response: %q after directive %q", ErrMalformed, s[i], name)
		}
	}
}

func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func parseDecimal(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// sparkBase64 encodes a SASL password as Spark's SparkSaslServer.encodePassword
// does: Netty's Base64.encode of the secret's UTF-8 bytes, standard alphabet
// with padding, which breaks lines: a '\n' after every 76 characters but the
// last. A secret of more than 57 bytes (Spark's generated secrets are 64 hex
// characters) therefore has a newline in its password.
func sparkBase64(secret []byte) []byte {
	enc := make([]byte, base64.StdEncoding.EncodedLen(len(secret)))
	base64.StdEncoding.Encode(enc, secret)
	out := make([]byte, 0, len(enc)+len(enc)/76)
	for len(enc) > 76 {
		out = append(append(out, enc[:76]...), '\n')
		clear(enc[:76])
		enc = enc[76:]
	}
	out = append(out, enc...)
	clear(enc)
	return out
}
