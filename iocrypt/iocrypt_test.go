package iocrypt

import (
	"bytes"
	"crypto/aes"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// NIST SP 800-38A, F.5.1 CTR-AES128.Encrypt: an answer computed by
// others, with the counter block incremented as a 128-bit integer.
func TestNISTVector(t *testing.T) {
	k, err := NewKey(unhex(t, "2b7e151628aed2a6abf7158809cf4f3c"))
	if err != nil {
		t.Fatal(err)
	}
	var iv [IVSize]byte
	copy(iv[:], unhex(t, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"))
	pt := unhex(t, "6bc1bee22e409f96e93d7e117393172a"+"ae2d8a571e03ac9c9eb76fac45af8e51"+
		"30c81c46a35ce411e5fbc1191a0a52ef"+"f69f2445df4f9b17ad2b417be66c3710")
	want := unhex(t, "874d6191b620e3261bef6864990db6ce"+"9806f66b7970fdff8617187bb9fffdff"+
		"5ae4df3edbd5d35e5b4f09020db03eab"+"1e031dda2fbe03d1792170a0f3009cee")
	got := make([]byte, len(pt))
	k.StreamAt(&iv, 0).XORKeyStream(got, pt)
	if !bytes.Equal(got, want) {
		t.Fatalf("CTR-AES128 = %x, want %x", got, want)
	}
	// From any offset, block-aligned or not, the same bytes.
	for off := range len(pt) {
		part := make([]byte, len(pt)-off)
		k.StreamAt(&iv, int64(off)).XORKeyStream(part, pt[off:])
		if !bytes.Equal(part, want[off:]) {
			t.Fatalf("StreamAt(%d) = %x, want %x", off, part, want[off:])
		}
	}
}

// naive encrypts src at offset off of the stream starting with iv, one
// counter block at a time, the counter held as a big.Int.
func naive(k []byte, iv [IVSize]byte, off int64, src []byte) []byte {
	b, _ := aes.NewCipher(k)
	ctr := new(big.Int).SetBytes(iv[:])
	ctr.Add(ctr, big.NewInt(off/16))
	mod := new(big.Int).Lsh(big.NewInt(1), 128)
	out := make([]byte, len(src))
	skip := int(off % 16)
	var ks [16]byte
	for i := 0; i < len(src); {
		cb := make([]byte, 16)
		ctr.Mod(ctr, mod).FillBytes(cb)
		b.Encrypt(ks[:], cb)
		for j := skip; j < 16 && i < len(src); j++ {
			out[i] = src[i] ^ ks[j]
			i++
		}
		skip = 0
		ctr.Add(ctr, big.NewInt(1))
	}
	return out
}

// The counter carries from the low 64 bits into the high ones and wraps
// at 2^128, as JCE's and OpenSSL's CTR modes do.
func TestStreamAtCarry(t *testing.T) {
	for _, keyLen := range []int{16, 24, 32} {
		key := bytes.Repeat([]byte{byte(keyLen)}, keyLen)
		k, err := NewKey(key)
		if err != nil {
			t.Fatal(err)
		}
		src := bytes.Repeat([]byte("shuffle bytes "), 20)
		for _, ivHex := range []string{
			"0000000000000000fffffffffffffffe",
			"00000000000000ffffffffffffffffff",
			"ffffffffffffffffffffffffffffffff",
			"0123456789abcdef0123456789abcdef",
		} {
			var iv [IVSize]byte
			copy(iv[:], unhex(t, ivHex))
			for _, off := range []int64{0, 1, 15, 16, 17, 31, 33, 100} {
				got := make([]byte, len(src))
				k.StreamAt(&iv, off).XORKeyStream(got, src)
				if want := naive(key, iv, off, src); !bytes.Equal(got, want) {
					t.Errorf("key %d B, iv %s, StreamAt(%d) = %x, want %x", keyLen, ivHex, off, got[:32], want[:32])
				}
			}
		}
	}
}

func TestNewKeySizes(t *testing.T) {
	secret := "\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff"
	for n := 0; n <= 40; n++ {
		key := []byte(strings.Repeat(secret, 3)[:n])
		k, err := NewKey(key)
		if ValidKeySize(n) != (err == nil) {
			t.Fatalf("NewKey(%d bytes) = %v, %v", n, k, err)
		}
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprint(n)) {
				t.Errorf("NewKey(%d bytes): error %q does not name the length", n, err)
			}
			if n > 0 && strings.Contains(err.Error(), fmt.Sprintf("%x", key)) {
				t.Errorf("NewKey(%d bytes): error %q shows the key", n, err)
			}
			continue
		}
		if k.Bits() != 8*n {
			t.Errorf("NewKey(%d bytes).Bits() = %d", n, k.Bits())
		}
	}
}

// A Key formats as [redacted] however it is printed or logged.
func TestKeyNeverPrinted(t *testing.T) {
	raw := []byte("0123456789abcdef")
	k, err := NewKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("key", "k", k)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("key", "k", k)
	texts := []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %q", k, k, k, k, k, k), fmt.Sprintf("%v", *k), logged.String()}
	for _, s := range texts {
		if strings.Contains(s, string(raw)) || strings.Contains(s, hex.EncodeToString(raw)) {
			t.Errorf("key printed: %q", s)
		}
	}
	if !strings.Contains(texts[0], "redacted") {
		t.Errorf("fmt.Sprint(key) = %q, want [redacted]", texts[0])
	}
}

func TestNewIVFresh(t *testing.T) {
	seen := map[[IVSize]byte]bool{}
	for range 1000 {
		var iv [IVSize]byte
		NewIV(&iv)
		if seen[iv] {
			t.Fatalf("NewIV repeated %x", iv)
		}
		seen[iv] = true
	}
}

func BenchmarkStream(b *testing.B) {
	k, _ := NewKey(make([]byte, 16))
	var iv [IVSize]byte
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		k.StreamAt(&iv, 5).XORKeyStream(buf, buf)
	}
}

func TestKeyEqual(t *testing.T) {
	a, _ := NewKey([]byte("0123456789abcdef"))
	b, _ := NewKey([]byte("0123456789abcdef"))
	c, _ := NewKey([]byte("0123456789abcdeg"))
	d, _ := NewKey([]byte("0123456789abcdef01234567"))
	if !a.Equal(b) || a.Equal(c) || a.Equal(d) {
		t.Errorf("Equal: same %v, one byte apart %v, longer %v; want true, false, false", a.Equal(b), a.Equal(c), a.Equal(d))
	}
}
