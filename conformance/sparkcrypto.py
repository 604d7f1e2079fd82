"""The cryptography docs/serving-auth.md's AuthEngine names, in plain Python (slow, small data
only): AES (128 and 256 bits) with CTR and GCM, HKDF-SHA256, X25519 (RFC 7748). Each is checked
against its standard's test vector by selftest()."""

import hashlib
import hmac

from fail import check


# ---------------------------------------------------------------------------
# AES (FIPS-197)

def _sbox():
    sbox = [0] * 256
    p = q = 1
    while True:
        p = p ^ ((p << 1) & 0xFF) ^ (0x1B if p & 0x80 else 0)  # p *= 3
        q ^= q << 1
        q ^= q << 2
        q ^= q << 4
        q &= 0xFF
        if q & 0x80:
            q ^= 0x09  # q /= 3
        x = q ^ ((q << 1) | (q >> 7)) ^ ((q << 2) | (q >> 6)) ^ ((q << 3) | (q >> 5)) ^ ((q << 4) | (q >> 4))
        sbox[p] = (x ^ 0x63) & 0xFF
        if p == 1:
            break
    sbox[0] = 0x63
    return sbox


SBOX = _sbox()


def _xt(a):
    return ((a << 1) ^ (0x1B if a & 0x80 else 0)) & 0xFF


class AES:
    def __init__(self, key):
        check(len(key) in (16, 32), "AES key of %d bytes" % len(key))
        nk = len(key) // 4
        self.nr = nk + 6
        w = [list(key[4 * i:4 * i + 4]) for i in range(nk)]
        rcon = 1
        for i in range(nk, 4 * (self.nr + 1)):
            t = list(w[i - 1])
            if i % nk == 0:
                t = [SBOX[b] for b in t[1:] + t[:1]]
                t[0] ^= rcon
                rcon = _xt(rcon)
            elif nk > 6 and i % nk == 4:
                t = [SBOX[b] for b in t]
            w.append([w[i - nk][j] ^ t[j] for j in range(4)])
        self.rk = [sum(w[4 * r:4 * r + 4], []) for r in range(self.nr + 1)]

    def encrypt(self, block):
        s = [b ^ k for b, k in zip(block, self.rk[0])]
        for r in range(1, self.nr + 1):
            s = [SBOX[b] for b in s]
            s = [s[(i + 4 * (i % 4)) % 16] for i in range(16)]  # ShiftRows (column-major state)
            if r != self.nr:
                m = []
                for c in range(4):
                    a = s[4 * c:4 * c + 4]
                    t = a[0] ^ a[1] ^ a[2] ^ a[3]
                    m += [a[j] ^ t ^ _xt(a[j] ^ a[(j + 1) % 4]) for j in range(4)]
                s = m
            s = [b ^ k for b, k in zip(s, self.rk[r])]
        return bytes(s)


class CTR:
    """One AES-CTR keystream over a byte stream: the 16-byte counter block is the IV as a
    big-endian 128-bit integer, plus one per block, modulo 2^128."""

    def __init__(self, key, iv):
        self.aes, self.ctr, self.ks = AES(key), int.from_bytes(iv, "big"), b""

    def crypt(self, data):
        ks = [self.ks]
        have = len(self.ks)
        while have < len(data):
            ks.append(self.aes.encrypt(self.ctr.to_bytes(16, "big")))
            self.ctr = (self.ctr + 1) % (1 << 128)
            have += 16
        ks = b"".join(ks)
        self.ks = ks[len(data):]
        n = len(data)
        return (int.from_bytes(data, "big") ^ int.from_bytes(ks[:n], "big")).to_bytes(n, "big") if n else b""


def _gmul(x, y):
    r = 0xE1 << 120
    z = 0
    for i in range(127, -1, -1):
        if (y >> i) & 1:
            z ^= x
        x = (x >> 1) ^ (r if x & 1 else 0)
    return z


def _ghash(h, aad, ct):
    y = 0
    hi = int.from_bytes(h, "big")
    for data in (aad, ct):
        for i in range(0, len(data), 16):
            y = _gmul(y ^ int.from_bytes(data[i:i + 16].ljust(16, b"\0"), "big"), hi)
    y = _gmul(y ^ ((8 * len(aad)) << 64 | (8 * len(ct))), hi)
    return y.to_bytes(16, "big")


def gcm_seal(key, iv, plain, aad):
    """AES-GCM with a 12-byte IV: ciphertext || 16-byte tag."""
    aes = AES(key)
    j0 = iv + b"\0\0\0\1"
    ct = CTR(key, iv + b"\0\0\0\2").crypt(plain)
    tag = bytes(a ^ b for a, b in zip(aes.encrypt(j0), _ghash(aes.encrypt(b"\0" * 16), aad, ct)))
    return ct + tag


def gcm_open(key, iv, sealed, aad):
    """The plaintext, or None if the tag does not verify."""
    ct, tag = sealed[:-16], sealed[-16:]
    aes = AES(key)
    want = bytes(a ^ b for a, b in zip(aes.encrypt(iv + b"\0\0\0\1"), _ghash(aes.encrypt(b"\0" * 16), aad, ct)))
    if not hmac.compare_digest(tag, want):
        return None
    return CTR(key, iv + b"\0\0\0\2").crypt(ct)


def hkdf(ikm, salt, info, n):
    prk = hmac.new(salt or b"\0" * 32, ikm, hashlib.sha256).digest()
    out, t, i = b"", b"", 1
    while len(out) < n:
        t = hmac.new(prk, t + info + bytes([i]), hashlib.sha256).digest()
        out += t
        i += 1
    return out[:n]


# ---------------------------------------------------------------------------
# X25519 (RFC 7748)

P = 2 ** 255 - 19


def x25519(k, u):
    k = bytearray(k)
    k[0] &= 248
    k[31] &= 127
    k[31] |= 64
    k = int.from_bytes(k, "little")
    u = int.from_bytes(u, "little") & ((1 << 255) - 1)
    x1, x2, z2, x3, z3, swap = u, 1, 0, u, 1, 0
    for t in range(254, -1, -1):
        kt = (k >> t) & 1
        swap ^= kt
        if swap:
            x2, x3, z2, z3 = x3, x2, z3, z2
        swap = kt
        a, b = (x2 + z2) % P, (x2 - z2) % P
        aa, bb = a * a % P, b * b % P
        e = (aa - bb) % P
        c, d = (x3 + z3) % P, (x3 - z3) % P
        da, cb = d * a % P, c * b % P
        x3 = (da + cb) ** 2 % P
        z3 = x1 * (da - cb) ** 2 % P
        x2 = aa * bb % P
        z2 = e * (aa + 121665 * e) % P
    if swap:
        x2, z2 = x3, z3
    return (x2 * pow(z2, P - 2, P) % P).to_bytes(32, "little")


X25519_BASE = (9).to_bytes(32, "little")


def selftest():
    """The standards' own vectors: FIPS-197 C.1 and C.3, the GCM spec's test case 2 and 4
    (truncated: no AAD), RFC 5869 A.1, RFC 7748 5.2."""
    check(AES(bytes(range(16))).encrypt(bytes.fromhex("00112233445566778899aabbccddeeff")).hex()
          == "69c4e0d86a7b0430d8cdb78070b4c55a", "AES-128 FIPS-197 vector")
    check(AES(bytes(range(32))).encrypt(bytes.fromhex("00112233445566778899aabbccddeeff")).hex()
          == "8ea2b7ca516745bfeafc49904b496089", "AES-256 FIPS-197 vector")
    check(gcm_seal(b"\0" * 16, b"\0" * 12, b"\0" * 16, b"").hex()
          == "0388dace60b6a392f328c2b971b2fe78ab6e47d42cec13bdf53a67b21257bddf", "AES-GCM test case 2")
    k = bytes.fromhex("feffe9928665731c6d6a8f9467308308")
    iv = bytes.fromhex("cafebabefacedbaddecaf888")
    pt = bytes.fromhex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
    aad = bytes.fromhex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
    check(gcm_seal(k, iv, pt, aad).hex().endswith("5bc94fbc3221a5db94fae95ae7121a47"), "AES-GCM test case 4")
    check(gcm_open(k, iv, gcm_seal(k, iv, pt, aad), aad) == pt, "AES-GCM open")
    check(hkdf(bytes([0x0b] * 22), bytes(range(13)), bytes(range(0xf0, 0xfa)), 42).hex()
          == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865", "HKDF RFC 5869 A.1")
    check(x25519(bytes.fromhex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"),
                 bytes.fromhex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c")).hex()
          == "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552", "X25519 RFC 7748 5.2")
