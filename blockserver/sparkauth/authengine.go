package sparkauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"io"
)

// Spark's AuthEngine (network-common crypto/, the same in 3.5 through 4.3),
// server side. The client sends an AuthMessage
//
//	u8 0xFB, string app_id, bytes salt (16), bytes ciphertext (12 + 32 + 16)
//
// (string and bytes: an i32 big-endian length, then the bytes). The
// ciphertext is Tink's AesGcmJce of the client's ephemeral X25519 public
// key: a 12-byte IV, the sealed key, the 16-byte tag, under
//
//	aad = app_id || salt || transcript        (transcript empty for the client)
//	kek = HKDF-SHA256(ikm = secret, salt = salt, info = aad, 16 bytes)
//
// The server answers an AuthMessage of the same form with its own ephemeral
// public key, sealed the same way with transcript = the client's AuthMessage
// as encoded. Both sides then compute
//
//	shared     = X25519(own private key, peer public key)
//	transcript = client AuthMessage || server AuthMessage (encoded)
//	key        = shared                                               authEngineVersion 1
//	           = HKDF-SHA256(shared, transcript, "derivedKey", 16)   authEngineVersion 2
//	ivIn       = HKDF-SHA256(shared, transcript, "inputIv", 16)
//	ivOut      = HKDF-SHA256(shared, transcript, "outputIv", 16)
//
// With AES/CTR/NoPadding (CtrTransportCipher) the client encrypts its byte
// stream with (key, ivOut) and the server with (key, ivIn): Spark hands
// "inputIv" to the client as the IV it reads with. With AES/GCM/NoPadding
// (GcmTransportCipher) both directions use key alone (see gcm.go).
//
// Neither the version nor the cipher is negotiated: each side takes its own
// spark.network.crypto.authEngineVersion and spark.network.crypto.cipher,
// and the server's reply does not depend on them. So this server keeps both
// keys until the client's first encrypted bytes show which one it uses
// (detect in aecipher.go).
const (
	aeSaltLen       = 16
	aeKeyLen        = 16 // AES_GCM_KEY_SIZE_BYTES
	aeGCMIVLen      = 12
	aeGCMTagLen     = 16
	aePublicKeyLen  = 32
	aeCiphertextLen = aeGCMIVLen + aePublicKeyLen + aeGCMTagLen
	aeIVLen         = 16
)

// authMessage is an AuthMessage: app id, salt, ciphertext.
type authMessage struct {
	appID      string
	salt       []byte
	ciphertext []byte
}

func (m *authMessage) encode() []byte {
	b := make([]byte, 0, 1+12+len(m.appID)+len(m.salt)+len(m.ciphertext))
	b = append(b, authEngineTag)
	b = appendBytes(b, []byte(m.appID))
	b = appendBytes(b, m.salt)
	return appendBytes(b, m.ciphertext)
}

func decodeAuthMessage(body []byte) (*authMessage, error) {
	d := decoder{b: body}
	if tag := d.u8("AuthMessage tag"); d.err == nil && tag != authEngineTag {
		return nil, fmt.Errorf("%w: AuthMessage tag %#x, want 0xfb", ErrMalformed, tag)
	}
	m := &authMessage{}
	m.appID = d.str("AuthMessage app id", maxAppIDLen)
	m.salt = d.bytes("AuthMessage salt", aeSaltLen)
	m.ciphertext = d.bytes("AuthMessage ciphertext", aeCiphertextLen)
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: AuthMessage has %d bytes after its ciphertext", ErrMalformed, len(d.b))
	}
	if len(m.salt) != aeSaltLen {
		return nil, fmt.Errorf("%w: AuthMessage salt of %d bytes, want %d", ErrMalformed, len(m.salt), aeSaltLen)
	}
	if len(m.ciphertext) != aeCiphertextLen {
		return nil, fmt.Errorf("%w: AuthMessage ciphertext of %d bytes, want %d", ErrMalformed, len(m.ciphertext), aeCiphertextLen)
	}
	if err := validAppID(m.appID); err != nil {
		return nil, err
	}
	return m, nil
}

// aeKEK derives the key that seals an ephemeral public key.
func aeKEK(secret []byte, appID string, salt, transcript []byte) (kek, aad []byte, err error) {
	aad = make([]byte, 0, len(appID)+len(salt)+len(transcript))
	aad = append(append(append(aad, appID...), salt...), transcript...)
	kek, err = hkdf.Key(sha256.New, secret, salt, string(aad), aeKeyLen)
	if err != nil {
		return nil, nil, fmt.Errorf("sparkauth: hkdf: %w", err)
	}
	return kek, aad, nil
}

func aeGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sparkauth: aes: %w", err)
	}
	return cipher.NewGCM(b)
}

func fullRead(r io.Reader, b []byte) (int, error) {
	n, err := io.ReadFull(r, b)
	if err != nil {
		return n, fmt.Errorf("sparkauth: random source: %w", err)
	}
	return n, nil
}

// authEngineRespond handles the client's AuthMessage: it returns the app id,
// the server's AuthMessage, and the session cipher.
func authEngineRespond(body []byte, secrets SecretFunc, opts *Options) (string, []byte, Cipher, error) {
	cm, err := decodeAuthMessage(body)
	if err != nil {
		return "", nil, nil, err
	}
	secret, ok := secrets(cm.appID)
	if !ok {
		return "", nil, nil, fmt.Errorf("%w %q", ErrUnknownApp, cm.appID)
	}

	// Open the client's public key.
	kek, aad, err := aeKEK(secret, cm.appID, cm.salt, nil)
	if err != nil {
		return "", nil, nil, err
	}
	g, err := aeGCM(kek)
	clear(kek)
	if err != nil {
		return "", nil, nil, err
	}
	clientPub, err := g.Open(nil, cm.ciphertext[:aeGCMIVLen], cm.ciphertext[aeGCMIVLen:], aad)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%w: app %q: the client's key does not open with the app's secret", ErrAuthFailed, cm.appID)
	}
	peer, err := ecdh.X25519().NewPublicKey(clientPub)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%w: app %q: client public key: %v", ErrAuthFailed, cm.appID, err)
	}

	// Seal ours, with the client's message as the transcript.
	// The private key is 32 bytes of Options.Rand (X25519 clamps them), not
	// ecdh's GenerateKey, which may ignore a custom source.
	var seed [32]byte
	if _, err := fullRead(opts.Rand, seed[:]); err != nil {
		return "", nil, nil, err
	}
	priv, err := ecdh.X25519().NewPrivateKey(seed[:])
	clear(seed[:])
	if err != nil {
		return "", nil, nil, fmt.Errorf("sparkauth: x25519: %w", err)
	}
	clientEncoded := cm.encode()
	sm := &authMessage{appID: cm.appID, salt: make([]byte, aeSaltLen)}
	if _, err := fullRead(opts.Rand, sm.salt); err != nil {
		return "", nil, nil, err
	}
	kek, aad, err = aeKEK(secret, cm.appID, sm.salt, clientEncoded)
	if err != nil {
		return "", nil, nil, err
	}
	g, err = aeGCM(kek)
	clear(kek)
	if err != nil {
		return "", nil, nil, err
	}
	iv := make([]byte, aeGCMIVLen, aeCiphertextLen)
	if _, err := fullRead(opts.Rand, iv); err != nil {
		return "", nil, nil, err
	}
	sm.ciphertext = g.Seal(iv, iv, priv.PublicKey().Bytes(), aad)
	serverEncoded := sm.encode()

	shared, err := priv.ECDH(peer)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%w: app %q: x25519: %v", ErrAuthFailed, cm.appID, err)
	}
	defer clear(shared)
	transcript := append(clientEncoded, serverEncoded...)
	keys, err := aeSessionKeys(shared, transcript)
	if err != nil {
		return "", nil, nil, err
	}
	return cm.appID, serverEncoded, newAECipher(keys, opts), nil
}

// aeKeys are the session's key material: the key of each authEngineVersion
// and the two IVs (named by the HKDF info that made them).
type aeKeys struct {
	v1, v2            []byte
	inputIV, outputIV []byte
}

func (k *aeKeys) wipe() {
	clear(k.v1)
	clear(k.v2)
	clear(k.inputIV)
	clear(k.outputIV)
}

func aeSessionKeys(shared, transcript []byte) (*aeKeys, error) {
	k := &aeKeys{v1: append([]byte(nil), shared...)}
	var err error
	if k.v2, err = hkdf.Key(sha256.New, shared, transcript, "derivedKey", aeKeyLen); err != nil {
		return nil, fmt.Errorf("sparkauth: hkdf: %w", err)
	}
	if k.inputIV, err = hkdf.Key(sha256.New, shared, transcript, "inputIv", aeIVLen); err != nil {
		return nil, fmt.Errorf("sparkauth: hkdf: %w", err)
	}
	if k.outputIV, err = hkdf.Key(sha256.New, shared, transcript, "outputIv", aeIVLen); err != nil {
		return nil, fmt.Errorf("sparkauth: hkdf: %w", err)
	}
	return k, nil
}
