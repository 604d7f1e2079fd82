package iocrypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"log/slog"
)

// IVSize is the length of the IV ahead of each encrypted partition
// (CryptoStreamUtils.IV_LENGTH_IN_BYTES).
const IVSize = 16

// ValidKeySize reports whether n bytes is an AES key length Spark can
// make: 16, 24 or 32 (spark.io.encryption.keySizeBits 128, 192, 256).
func ValidKeySize(n int) bool { return n == 16 || n == 24 || n == 32 }

// Key is an application's IO encryption key, expanded for AES. It holds
// no copy of the key's bytes of its own after NewKey returns (the caller
// clears its slice); the AES key schedule it holds begins with them, as
// AES's first round key is the key.
type Key struct {
	block cipher.Block
	bits  int
}

// NewKey expands an AES key of 16, 24 or 32 bytes. The error names the
// length only, never the bytes.
func NewKey(key []byte) (*Key, error) {
	if !ValidKeySize(len(key)) {
		return nil, fmt.Errorf("iocrypt: key of %d bytes, want 16, 24 or 32", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("iocrypt: key of %d bytes: %w", len(key), err)
	}
	return &Key{block: b, bits: 8 * len(key)}, nil
}

// Equal reports, in constant time, whether k and o are the same key:
// their encryptions of a zero block agree (and their sizes).
func (k *Key) Equal(o *Key) bool {
	var zero, a, b [aes.BlockSize]byte
	k.block.Encrypt(a[:], zero[:])
	o.block.Encrypt(b[:], zero[:])
	return k.bits == o.bits && subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// Bits returns the key size in bits.
func (k *Key) Bits() int { return k.bits }

// String, GoString and LogValue keep the key out of every text.
func (Key) String() string             { return "[redacted]" }
func (Key) GoString() string           { return "[redacted]" }
func (Key) LogValue() slog.Value       { return slog.StringValue("[redacted]") }
func (Key) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("[redacted]")) }

// NewIV fills iv with 16 random bytes from the system's CSPRNG, as
// commons-crypto's CryptoRandom does for each stream.
func NewIV(iv *[IVSize]byte) {
	_, _ = rand.Read(iv[:]) // crypto/rand.Read never fails (it aborts the process instead)
}

// StreamAt returns the keystream of the stream that starts with iv, from
// byte off of the encrypted bytes (the IV itself not counted).
func (k *Key) StreamAt(iv *[IVSize]byte, off int64) cipher.Stream {
	if off < 0 {
		panic(fmt.Sprintf("iocrypt: StreamAt offset %d", off))
	}
	var ctr [IVSize]byte
	hi := binary.BigEndian.Uint64(iv[:8])
	lo := binary.BigEndian.Uint64(iv[8:])
	blocks := uint64(off) / aes.BlockSize
	nlo := lo + blocks
	if nlo < lo { // carry into the high half: a 128-bit counter
		hi++
	}
	binary.BigEndian.PutUint64(ctr[:8], hi)
	binary.BigEndian.PutUint64(ctr[8:], nlo)
	s := cipher.NewCTR(k.block, ctr[:])
	if skip := int(off % aes.BlockSize); skip > 0 {
		var b [aes.BlockSize]byte
		s.XORKeyStream(b[:skip], b[:skip])
	}
	return s
}
