"""The checksums and codec streams of docs/format.md section 9, written from the document
alone: Adler-32, CRC32, CRC32C; lz4-java's LZ4Block framing with its xxhash32 checksums,
snappy-java's stream framing, zstd frames (through the `zstandard` package, when present)
and none."""

import struct
import zlib

from fail import check


try:
    import zstandard
except ImportError:  # the zstd cases are skipped (or fail with --require-zstd)
    zstandard = None


# ---------------------------------------------------------------------------
# Checksums (Spark's spark.shuffle.checksum.algorithm; format.md section 9)

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC32C_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    t = CRC32C_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


CHECKSUMS = {
    "ADLER32": lambda b: zlib.adler32(b, 1),
    "CRC32": lambda b: zlib.crc32(b, 0),
    "CRC32C": crc32c,
}

# ---------------------------------------------------------------------------
# xxhash32 (lz4-java's block checksum)

P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
M32 = 0xFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def xxh32(data, seed):
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + P1 + P2) & M32
        v2 = (seed + P2) & M32
        v3 = seed & M32
        v4 = (seed - P1) & M32
        lanes = struct.unpack_from("<%dI" % ((n // 16) * 4), data, 0)
        for k in range(0, len(lanes), 4):
            v1 = (_rotl((v1 + lanes[k] * P2) & M32, 13) * P1) & M32
            v2 = (_rotl((v2 + lanes[k + 1] * P2) & M32, 13) * P1) & M32
            v3 = (_rotl((v3 + lanes[k + 2] * P2) & M32, 13) * P1) & M32
            v4 = (_rotl((v4 + lanes[k + 3] * P2) & M32, 13) * P1) & M32
        i = (n // 16) * 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & M32
    else:
        h = (seed + P5) & M32
    h = (h + n) & M32
    while i + 4 <= n:
        h = (_rotl((h + struct.unpack_from("<I", data, i)[0] * P3) & M32, 17) * P4) & M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * P5) & M32, 11) * P1) & M32
        i += 1
    h ^= h >> 15
    h = (h * P2) & M32
    h ^= h >> 13
    h = (h * P3) & M32
    h ^= h >> 16
    return h


# ---------------------------------------------------------------------------
# Codec streams (format.md section 9)

def lz4_length(src, i, nibble, what):
    """A sequence's literal or match length: the token's nibble, and while
    it is 15, bytes added until one is not 255. Returns it and the index
    after its bytes."""
    n = nibble
    if n == 15:
        while True:
            check(i < len(src), "lz4: %s length runs off the block" % what)
            b = src[i]
            i += 1
            n += b
            if b != 255:
                break
    return n, i


def lz4_block_decompress(src, out_len):
    """Decodes one raw LZ4 block (the LZ4 block format) of out_len bytes."""
    dst = bytearray()
    i, n = 0, len(src)
    while True:
        check(i < n, "lz4: block ends inside a sequence")
        token = src[i]
        i += 1
        lit, i = lz4_length(src, i, token >> 4, "literal")
        check(i + lit <= n, "lz4: literals run off the block")
        dst += src[i:i + lit]
        i += lit
        if i == n:
            break  # the last sequence has literals only
        check(i + 2 <= n, "lz4: block ends inside an offset")
        off = src[i] | (src[i + 1] << 8)
        i += 2
        check(0 < off <= len(dst), "lz4: offset %d outside the %d bytes decoded" % (off, len(dst)))
        ml, i = lz4_length(src, i, token & 15, "match")
        ml += 4
        start = len(dst) - off
        if off >= ml:
            dst += dst[start:start + ml]
        else:
            pat = bytes(dst[start:])
            dst += (pat * (ml // off + 1))[:ml]
        check(len(dst) <= out_len, "lz4: block decodes past its length %d" % out_len)
    check(len(dst) == out_len, "lz4: block decodes to %d bytes, header says %d" % (len(dst), out_len))
    return bytes(dst)


LZ4_MAGIC = b"LZ4Block"
LZ4_SEED = 0x9747B28C


def decode_lz4(data, block_size, info):
    """lz4-java's LZ4BlockOutputStream framing, streams back to back (format.md 9): every
    block has its own 21-byte header (magic, token, lengths, checksum); a stream ends with an
    empty block, the end mark."""
    out = bytearray()
    i = 0
    want_level = max(0, (block_size - 1).bit_length() - 10)
    streams = 0
    ended, short = True, None
    while i < len(data):
        check(data[i:i + 8] == LZ4_MAGIC, "lz4: no LZ4Block magic at %d" % i)
        check(i + 21 <= len(data), "lz4: block header cut at %d" % i)
        token = data[i + 8]
        clen, olen, chk = struct.unpack_from("<iiI", data, i + 9)
        i += 21
        method, level = token & 0xF0, token & 0x0F
        check(level == want_level, "lz4: token level %d, want %d for block size %d" % (level, want_level, block_size))
        check(method in (0x10, 0x20), "lz4: method %#x" % method)
        if olen == 0:  # the end mark closes this stream
            check(clen == 0 and chk == 0 and method == 0x10, "lz4: bad end mark")
            check(not ended, "lz4: an end mark closes an empty stream at %d" % (i - 21))
            streams += 1
            ended, short = True, None
            continue
        check(ended or short is None, "lz4: a block of %d bytes, not the block size %d, before the stream's last" % (short or 0, block_size))
        ended = False
        check(0 < olen <= block_size, "lz4: block of %d bytes over block size %d" % (olen, block_size))
        short = olen if olen < block_size else None
        check(0 < clen <= len(data) - i, "lz4: compressed length %d" % clen)
        raw = data[i:i + clen]
        i += clen
        if method == 0x10:
            check(clen == olen, "lz4: raw block with clen %d != olen %d" % (clen, olen))
            blk = raw
        else:
            blk = lz4_block_decompress(raw, olen)
        got = xxh32(blk, LZ4_SEED) & 0x0FFFFFFF
        check(got == chk, "lz4: block checksum %#x, xxhash32 gives %#x" % (chk, got))
        out += blk
    check(ended, "lz4: the last stream has no end mark")
    info["streams"] = streams
    return bytes(out)


def snappy_raw_decompress(src):
    i, n = 0, len(src)
    ulen, shift = 0, 0
    while True:
        check(i < n, "snappy: varint cut")
        b = src[i]
        i += 1
        ulen |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    dst = bytearray()
    while i < n:
        tag = src[i]
        i += 1
        t = tag & 3
        if t == 0:
            ln = tag >> 2
            if ln >= 60:
                nb = ln - 59
                ln = int.from_bytes(src[i:i + nb], "little")
                i += nb
            ln += 1
            check(i + ln <= n, "snappy: literal runs off")
            dst += src[i:i + ln]
            i += ln
            continue
        if t == 1:
            ln = ((tag >> 2) & 7) + 4
            off = ((tag >> 5) << 8) | src[i]
            i += 1
        elif t == 2:
            ln = (tag >> 2) + 1
            off = int.from_bytes(src[i:i + 2], "little")
            i += 2
        else:
            ln = (tag >> 2) + 1
            off = int.from_bytes(src[i:i + 4], "little")
            i += 4
        check(0 < off <= len(dst), "snappy: offset %d" % off)
        start = len(dst) - off
        if off >= ln:
            dst += dst[start:start + ln]
        else:
            pat = bytes(dst[start:])
            dst += (pat * (ln // off + 1))[:ln]
    check(len(dst) == ulen, "snappy: %d bytes, header says %d" % (len(dst), ulen))
    return bytes(dst)


SNAPPY_MAGIC = b"\x82SNAPPY\x00"


def decode_snappy(data, block_size, info):
    """snappy-java's SnappyOutputStream: 16-byte header, then big-endian length + raw chunk."""
    out = bytearray()
    i, streams, short = 0, 0, None
    while i < len(data):
        if data[i:i + 8] == SNAPPY_MAGIC:
            ver, compat = struct.unpack_from(">ii", data, i + 8)
            check(ver == 1 and compat == 1, "snappy: header version %d/%d" % (ver, compat))
            i += 16
            streams += 1
            short = None
            continue
        check(streams > 0, "snappy: no stream header at %d" % i)
        (clen,) = struct.unpack_from(">i", data, i)
        i += 4
        check(0 < clen <= len(data) - i, "snappy: chunk length %d" % clen)
        chunk = snappy_raw_decompress(data[i:i + clen])
        check(0 < len(chunk) <= block_size, "snappy: chunk of %d bytes, block size %d" % (len(chunk), block_size))
        check(short is None, "snappy: a chunk of %d bytes, not the block size %d, before the stream's last" % (short or 0, block_size))
        short = len(chunk) if len(chunk) < block_size else None
        out += chunk
        i += clen
    info["streams"] = streams
    return bytes(out)


def decode_zstd(data, block_size, info):
    out = bytearray()
    streams = 0
    rest = data
    while rest:
        check(rest[:4] == b"\x28\xb5\x2f\xfd", "zstd: no frame magic")
        d = zstandard.ZstdDecompressor().decompressobj()
        out += d.decompress(rest)
        check(d.eof, "zstd: frame cut")
        rest = d.unused_data
        streams += 1
    info["streams"] = streams
    return bytes(out)


def decode_none(data, block_size, info):
    info["streams"] = None
    return data


DECODERS = {"lz4": decode_lz4, "snappy": decode_snappy, "zstd": decode_zstd, "none": decode_none}
