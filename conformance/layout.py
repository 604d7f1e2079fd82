"""docs/format.md's layouts, written from the document alone: the committed files (Spark's
local-dir layout, the index, checksum and data files, read back through the codecs), the
columnar batches a client sends (section 1, every column type and the nested ones) and the
blocks and kudo tables they come back as (sections 2 and 7); and the daemon's registry files
(docs/protocol.md section 4, "The registry's files")."""

import json
import os
import struct

from fail import Fail, check
from wire import i32, i64, lst, string, u16, u32, u8
from codec import CHECKSUMS, DECODERS, M32


# ---------------------------------------------------------------------------
# The committed files (format.md section 9)


def java_hash(s):
    """Java's String.hashCode: over UTF-16 code units, 32-bit two's complement."""
    h = 0
    b = s.encode("utf-16-be")
    for unit in struct.unpack(">%dH" % (len(b) // 2), b):
        h = (31 * h + unit) & M32
    return h - (1 << 32) if h >= 1 << 31 else h


def spark_path(local_dirs, sub_dirs, name):
    """Spark's ExecutorDiskUtils: nonNegativeHash, then dir and sub-dir (protocol.md 4)."""
    h = java_hash(name)
    h = 0 if h == -(1 << 31) else abs(h)
    return os.path.join(local_dirs[h % len(local_dirs)], "%02x" % ((h // len(local_dirs)) % sub_dirs), name)


def read_output(where, shuffle, mapid, nparts, codec, algo, block_size, result):
    """Reads a committed map output back; returns the decoded partitions and stream counts."""
    base = "shuffle_%d_%d_0" % (shuffle, mapid)
    data_p, index_p = where(base + ".data"), where(base + ".index")
    with open(index_p, "rb") as f:
        index = f.read()
    check(len(index) == 8 * (nparts + 1), "index file of %d bytes, want 8 x %d" % (len(index), nparts + 1))
    offs = struct.unpack(">%dq" % (nparts + 1), index)
    check(offs[0] == 0, "index starts at %d" % offs[0])
    with open(data_p, "rb") as f:
        data = f.read()
    check(offs[-1] == len(data), "index ends at %d, data file has %d bytes" % (offs[-1], len(data)))
    lengths = [offs[p + 1] - offs[p] for p in range(nparts)]
    check(all(x >= 0 for x in lengths), "index offsets decrease")
    check(lengths == result["lengths"], "CommitResult lengths differ from the index file")
    if algo == "none":
        check(result["checksums"] == [], "checksums with checksum none")
        for name in os.listdir(os.path.dirname(data_p)):
            check(not name.startswith(base + ".checksum"), "checksum file %s with checksum none" % name)
    else:
        with open(where(base + ".checksum." + algo), "rb") as f:
            ck = f.read()
        check(len(ck) == 8 * nparts, "checksum file of %d bytes, want 8 x %d" % (len(ck), nparts))
        sums = list(struct.unpack(">%dq" % nparts, ck))
        check(sums == result["checksums"], "CommitResult checksums differ from the checksum file")
        fn = CHECKSUMS[algo]
        for p in range(nparts):
            got = fn(data[offs[p]:offs[p + 1]])
            check(got == sums[p], "partition %d: %s stored %#x, computed %#x" % (p, algo, sums[p], got))
    parts, streams = [], []
    for p in range(nparts):
        seg = data[offs[p]:offs[p + 1]]
        info = {}
        try:
            parts.append(DECODERS[codec](seg, block_size, info) if seg else b"")
        except Fail as e:
            raise Fail("partition %d: %s" % (p, e))
        streams.append(info.get("streams", 0) if seg else 0)
    return parts, streams


def make_bytes(rng, n):
    """Compressible but not trivial: words and numbers."""
    words = [b"alpha", b"beta", b"gamma", b"delta", b"lineitem", b"shuffle", b"|"]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + str(rng.randrange(100000)).encode()
    return bytes(out[:n])


# The nested columns: protocol type, name, Spark type (top level), nullable, children.
def _n(typ, name, nullable, *children, spark=None):
    return {"type": typ, "name": name, "nullable": nullable, "children": list(children), "spark": spark}


NESTED = [
    _n(5, "k", False, spark="bigint"),
    _n(15, "a", True, _n(4, "element", True), spark="array<int>"),
    _n(16, "s", True, _n(3, "x", True), _n(11, "y", False), spark="struct<x:smallint,y:string>"),
    _n(17, "m", False, _n(16, "entries", False, _n(11, "key", False), _n(5, "value", True)), spark="map<string,bigint>"),
    _n(15, "bb", False, _n(12, "element", True), spark="array<binary>"),
    _n(15, "aa", True, _n(15, "element", True, _n(4, "element", False)), spark="array<array<int>>"),
    _n(18, "ym", False, spark="interval year to month"),
    _n(19, "dt", True, spark="interval day to second"),
    _n(20, "v", True, spark="void"),
]
NESTED_FIXED = {3: ("<h", 2), 4: ("<i", 4), 5: ("<q", 8), 18: ("<i", 4), 19: ("<q", 8), 20: ("<b", 1)}


def nested_value(rng, node):
    """A random value of node's type (None: null)."""
    t = node["type"]
    if t == 20 or (node["nullable"] and rng.random() < 0.2):
        return None
    if t in NESTED_FIXED:
        bits = 8 * NESTED_FIXED[t][1]
        return rng.randrange(-2 ** (bits - 1), 2 ** (bits - 1))
    if t in VAR:
        return make_bytes(rng, rng.randrange(0, 6))
    if t == 16:
        return tuple(nested_value(rng, ch) for ch in node["children"])
    if t == 17:
        return [tuple(nested_value(rng, ch) for ch in node["children"][0]["children"]) for _ in range(rng.randrange(0, 4))]
    return [nested_value(rng, node["children"][0]) for _ in range(rng.randrange(0, 4))]


def zero_value(node):
    """What a non-nullable child holds under a null struct row."""
    t = node["type"]
    if t == 16:
        return tuple(zero_value(ch) for ch in node["children"])
    return None if t == 20 else b"" if t in VAR else [] if t in (15, 17) else 0


def partition_rows(rng, nparts, rows, pspan):
    """The row offsets of nparts partitions, each row in a random one of the first pspan."""
    per = [0] * nparts
    for _ in range(rows):
        per[rng.randrange(pspan)] += 1
    prow = [0]
    for x in per:
        prow.append(prow[-1] + x)
    return prow


def build_nested(rng, nparts, rows, align):
    """A columnar batch of NESTED: the layout, the payload, and the rows of each partition."""
    prow = partition_rows(rng, nparts, rows, nparts)
    payload = bytearray()

    def put(b):
        if not b:
            return 0, 0
        while len(payload) % align:
            payload.append(0)
        off = len(payload)
        payload.extend(b)
        return off, len(b)

    cols = []

    def emit(node, vals):
        """Lays out one column (vals: its rows) and then its children, depth first."""
        t, v, o, d = node["type"], (0, 0), (0, 0), (0, 0)
        if node["nullable"]:
            bits = bytearray((len(vals) + 7) // 8)
            for r, x in enumerate(vals):
                if x is not None:
                    bits[r // 8] |= 1 << (r % 8)
            v = put(bytes(bits))
        idx = len(cols)
        cols.append(None)
        if t in NESTED_FIXED:
            fmt, _ = NESTED_FIXED[t]
            d = put(b"".join(struct.pack(fmt, 0 if x is None else x) for x in vals))
        elif t in VAR or t in (15, 17):
            offs, child = [0], []
            for x in vals:
                x = x if x is not None else (b"" if t in VAR else [])
                offs.append(offs[-1] + len(x))
                child.extend(x)
            o = put(struct.pack("<%di" % len(offs), *offs))
            if t in VAR:
                d = put(b"".join(x for x in vals if x is not None))
            else:
                emit(node["children"][0], child)
        else:  # struct
            for k, ch in enumerate(node["children"]):
                emit(ch, [x[k] if x is not None else (None if ch["nullable"] else zero_value(ch)) for x in vals])
        cols[idx] = (u8(t) + u8(0) + u16(len(node["children"])) + i32(0) + i32(0) + string(node["name"]) +
                     i64(v[0]) + i64(v[1]) + i64(o[0]) + i64(o[1]) + i64(d[0]) + i64(d[1]))

    values = []
    for node in NESTED:
        vals = [nested_value(rng, node) for _ in range(rows)]
        values.append(vals)
        emit(node, vals)
    layout = i64(rows) + u32(len(cols)) + b"".join(cols) + lst(prow, i64)
    rows_of = list(zip(*values))
    return layout, bytes(payload), [rows_of[prow[p]:prow[p + 1]] for p in range(nparts)]


def nested_rows(node, vals, valid, offs, children):
    """The values of a decoded column from its parts (valid: None or one bool per row)."""
    t = node["type"]
    if t in (15, 17):
        child = children[0]
        vals = [child[offs[r] - offs[0]:offs[r + 1] - offs[0]] for r in range(len(offs) - 1)]
    elif t == 16:
        vals = list(zip(*children)) if children else [()] * len(valid or vals)
    if t == 20:
        check(valid is not None and not any(valid), "void column with valid rows")
    if valid is not None:
        vals = [x if ok else None for x, ok in zip(vals, valid)]
    return vals


def decode_nested_blocks(data):
    """SHFC blocks of NESTED (format.md section 2, flattened columns); rows as tuples."""
    rows_out = []
    i = 0
    while i < len(data):
        magic, ver, bflags, ncols, nrows, blen = struct.unpack_from("<4sBBHII", data, i)
        check(magic == b"SHFC" and ver == 1 and blen % 8 == 0, "block header")
        blk = data[i:i + blen]
        descs = [struct.unpack_from("<BBBbI", blk, 16 + 8 * k) for k in range(ncols)]
        pos = 16 + 8 * ncols
        if bflags & 1:
            lens = struct.unpack_from("<%dH" % ncols, blk, pos)
            pos = pad8(pos + 2 * ncols + sum(lens))
        at = [0, pos]  # next descriptor, next section

        def read(node, n):
            t, fl, _, _, length = descs[at[0]]
            check(t == node["type"], "block column %d: type %d, want %d" % (at[0], t, node["type"]))
            at[0] += 1
            valid = offs = None
            vals, children = [], []
            if fl & 1:
                vb = blk[at[1]:at[1] + (n + 7) // 8]
                valid = [bool(vb[r // 8] >> (r % 8) & 1) for r in range(n)]
                at[1] = pad8(at[1] + (n + 7) // 8)
            if t in VAR or t in (15, 17):
                offs = struct.unpack_from("<%di" % (n + 1), blk, at[1])
                check(offs[0] == 0 and offs[-1] == length, "block offsets not rebased")
                at[1] = pad8(at[1] + 4 * (n + 1))
            if t in (15, 17):
                children = [read(node["children"][0], length)]
            elif t == 16:
                check(length == len(node["children"]), "struct of %d children" % length)
                children = [read(ch, n) for ch in node["children"]]
            else:
                d = blk[at[1]:at[1] + length]
                if t in VAR:
                    vals = [d[offs[r]:offs[r + 1]] for r in range(n)]
                else:
                    fmt, w = NESTED_FIXED[t]
                    check(length == w * n, "data length %d for %d rows" % (length, n))
                    vals = [struct.unpack_from(fmt, d, w * r)[0] for r in range(n)]
                at[1] = pad8(at[1] + length)
            return nested_rows(node, vals, valid, offs, children)

        cols = [read(node, nrows) for node in NESTED]
        check(at[0] == ncols and at[1] == blen, "block: %d of %d columns, sections end at %d of %d" % (at[0], ncols, at[1], blen))
        rows_out.extend(zip(*cols))
        i += blen
    return rows_out


def decode_nested_kudo(data):
    """kudo tables of NESTED (format.md section 7, flattened columns and slices); rows as tuples."""
    rows_out = []
    i = 0
    while i < len(data):
        magic, R, N, V, O, T, C = struct.unpack_from(">4s6i", data, i)
        check(magic == b"KUD0", "kudo magic")
        H = 28 + (C + 7) // 8
        bits = data[i + 28:i + H]
        base = i + H
        cur = {"flat": 0, "v": base, "o": base + V, "d": base + V + O}

        def bit():
            f = cur["flat"]
            cur["flat"] += 1
            return bool(bits[f // 8] >> (f % 8) & 1)

        def take(sec, n):
            p = cur[sec]
            cur[sec] += n
            return data[p:p + n]

        def read(node, off, n):
            t = node["type"]
            valid = offs = None
            vals, children = [], []
            if bit():
                check(n > 0, "has-validity bit on a slice of 0 rows")
                vb = take("v", (off + n - 1) // 8 - off // 8 + 1)
                valid = [bool(vb[(off % 8 + r) // 8] >> ((off % 8 + r) % 8) & 1) for r in range(n)]
            if (t in VAR or t in (15, 17)):
                offs = struct.unpack("<%di" % (n + 1), take("o", 4 * (n + 1))) if n else (0,)
            if t == 12:
                check(not bit(), "binary's byte child with validity")
            if t in (15, 17):
                children = [read(node["children"][0], offs[0], offs[-1] - offs[0])]
            elif t == 16:
                children = [read(ch, off, n) for ch in node["children"]]
            elif t in VAR:
                d = take("d", offs[-1] - offs[0])
                vals = [d[offs[r] - offs[0]:offs[r + 1] - offs[0]] for r in range(n)]
            else:
                fmt, w = NESTED_FIXED[t]
                d = take("d", w * n)
                vals = [struct.unpack_from(fmt, d, w * r)[0] for r in range(n)]
            return nested_rows(node, vals, valid, offs, children)

        cols = [read(node, R, N) for node in NESTED]
        check(cur["flat"] == C, "kudo: %d flattened columns read, header says %d" % (cur["flat"], C))
        check((H + V) % 4 == 0 and cur["v"] <= base + V and not any(data[cur["v"]:base + V]), "kudo validity section")
        check(cur["o"] == base + V + O, "kudo offsets section: %d of %d bytes" % (cur["o"] - base - V, O))
        d_end = base + T
        check(cur["d"] <= d_end < cur["d"] + 4 and not any(data[cur["d"]:d_end]), "kudo data section and padding")
        rows_out.extend(zip(*cols))
        i = d_end
    return rows_out


# Columns of the columnar cases: name, (protocol type, width, precision, scale, nullable), Spark type.
COLUMNS = [  # every type of protocol.md's table; width None for string (11) and binary (12)
    ("id", (5, 8, 0, 0, True), "bigint"),
    ("s", (11, None, 0, 0, True), "string"),
    ("x", (4, 4, 0, 0, False), "int"),
    ("b", (1, 1, 0, 0, False), "boolean"),
    ("d", (10, 8, 12, 2, True), "decimal(12,2)"),
    ("i8", (2, 1, 0, 0, True), "tinyint"),
    ("i16", (3, 2, 0, 0, False), "smallint"),
    ("f4", (6, 4, 0, 0, True), "float"),
    ("f8", (7, 8, 0, 0, False), "double"),
    ("day", (8, 4, 0, 0, True), "date"),
    ("ts", (9, 8, 0, 0, False), "timestamp"),
    ("bin", (12, None, 0, 0, True), "binary"),
    ("d32", (13, 4, 7, 3, True), "decimal(7,3)"),
    ("d128", (14, 16, 30, 5, True), "decimal(30,5)"),
]
FIXED = {1: "<%dB", 2: "<%db", 3: "<%dh", 4: "<%di", 5: "<%dq", 6: "<%df", 7: "<%dd", 8: "<%di", 9: "<%dq",
         10: "<%dq", 13: "<%di"}  # decimal128 (14): 16 bytes, low 8 first (pack_fixed)
VAR = (11, 12)


def pack_fixed(typ, vals):
    if typ == 14:
        return b"".join(v.to_bytes(16, "little", signed=True) for v in vals)
    return struct.pack(FIXED[typ] % len(vals), *vals)


def unpack_fixed(typ, buf, pos, n):
    if typ == 14:
        return [int.from_bytes(buf[pos + 16 * r:pos + 16 * (r + 1)], "little", signed=True) for r in range(n)]
    return list(struct.unpack_from(FIXED[typ] % n, buf, pos))


def fixed_values(rng, typ, prec, rows):
    """rows random values of a fixed-width type, within its precision (decimals)."""
    if typ == 1:
        return [rng.randrange(2) for _ in range(rows)]
    if typ in (6, 7):  # values a float32 (float64) holds exactly
        fmt = "<f" if typ == 6 else "<d"
        return [struct.unpack(fmt, struct.pack(fmt, rng.uniform(-1e6, 1e6)))[0] for _ in range(rows)]
    if typ in (10, 13, 14):
        top = 10 ** prec
        return [rng.randrange(-top + 1, top) for _ in range(rows)]
    bits = {2: 8, 3: 16, 4: 32, 5: 64, 8: 32, 9: 64}[typ]
    return [rng.randrange(-2 ** (bits - 1), 2 ** (bits - 1)) for _ in range(rows)]


def build_columnar(rng, nparts, rows, align, pspan):
    """A columnar batch: the Batch layout, the payload, and the rows of each partition."""
    prow = partition_rows(rng, nparts, rows, pspan)
    payload = bytearray()

    def put(b):
        while len(payload) % align:
            payload.append(0)
        off = len(payload)
        payload.extend(b)
        return off, len(b)

    cols, values = [], []
    for name, (typ, width, prec, scale, nullable), _ in COLUMNS:
        if typ in VAR:
            vals = [make_bytes(rng, rng.randrange(0, 12)) for _ in range(rows)]
        else:
            vals = fixed_values(rng, typ, prec, rows)
        v = o = (0, 0)
        if nullable:
            valid = [rng.random() < 0.8 for _ in range(rows)]
            bits = bytearray((rows + 7) // 8)
            for r, ok in enumerate(valid):
                if ok:
                    bits[r // 8] |= 1 << (r % 8)
            v = put(bytes(bits))
            values.append([x if ok else None for x, ok in zip(vals, valid)])
        else:
            values.append(vals)
        if typ in VAR:
            offs = [0]
            for x in vals:
                offs.append(offs[-1] + len(x))
            o = put(struct.pack("<%di" % (rows + 1), *offs))
            d = put(b"".join(vals))
        else:
            d = put(pack_fixed(typ, vals))
        cols.append(u8(typ) + u8(0) + u16(0) + i32(prec) + i32(scale) + string(name) +
                    i64(v[0]) + i64(v[1]) + i64(o[0]) + i64(o[1]) + i64(d[0]) + i64(d[1]))
    layout = i64(rows) + u32(len(cols)) + b"".join(cols) + lst(prow, i64)
    rows_of = list(zip(*values)) if values else []
    per_part = [rows_of[prow[p]:prow[p + 1]] for p in range(nparts)]
    return layout, bytes(payload), per_part


TABLES = [0]  # blocks or tables the last decode_blocks or decode_kudo read


def pad8(n):
    return (n + 7) & ~7


def decode_blocks(data):
    """SHFC blocks of format.md section 2 (the types of COLUMNS); rows as tuples."""
    rows_out = []
    i = 0
    TABLES[0] = 0
    while i < len(data):
        magic, ver, bflags, ncols, nrows, blen = struct.unpack_from("<4sBBHII", data, i)
        check(magic == b"SHFC" and ver == 1, "block magic/version")
        check(blen % 8 == 0 and i + blen <= len(data), "block length %d" % blen)
        blk = data[i:i + blen]
        pos = 16
        descs = []
        for k in range(ncols):
            t, fl, prec, scale, dlen = struct.unpack_from("<BBBbI", blk, pos)
            want = COLUMNS[k][1]
            check((t, prec, scale) == (want[0], want[2], want[3]), "block column %d: type %d (%d,%d)" % (k, t, prec, scale))
            descs.append((t, fl, dlen))
            pos += 8
        if bflags & 1:
            lens = struct.unpack_from("<%dH" % ncols, blk, pos)
            names = blk[pos + 2 * ncols:pos + 2 * ncols + sum(lens)]
            check(names == b"".join(n.encode() for n, _, _ in COLUMNS[:ncols]), "block names %r" % names)
            pos = pad8(pos + 2 * ncols + sum(lens))
        cols = []
        for t, fl, dlen in descs:
            valid = None
            if fl & 1:
                vb = blk[pos:pos + (nrows + 7) // 8]
                valid = [bool(vb[r // 8] >> (r % 8) & 1) for r in range(nrows)]
                pos = pad8(pos + (nrows + 7) // 8)
            if t in (11, 12):
                offs = struct.unpack_from("<%dI" % (nrows + 1), blk, pos)
                check(offs[0] == 0 and offs[-1] == dlen, "block offsets not rebased")
                pos = pad8(pos + 4 * (nrows + 1))
                d = blk[pos:pos + dlen]
                vals = [d[offs[r]:offs[r + 1]] for r in range(nrows)]
            else:
                width = COLUMNS[len(cols)][1][1]
                check(dlen == width * nrows, "type %d data length %d for %d rows" % (t, dlen, nrows))
                vals = unpack_fixed(t, blk, pos, nrows)
            pos = pad8(pos + dlen)
            if valid is not None:
                vals = [v if ok else None for v, ok in zip(vals, valid)]
            cols.append(vals)
        check(pos == blen, "block sections end at %d, block length %d" % (pos, blen))
        rows_out.extend(zip(*cols))
        i += blen
        TABLES[0] += 1
    return rows_out


def decode_kudo(data):
    """kudo tables of format.md section 7 (the schema of COLUMNS); rows as tuples."""
    rows_out = []
    i = 0
    TABLES[0] = 0
    while i < len(data):
        magic, R, N, V, O, T, C = struct.unpack_from(">4s6i", data, i)
        check(magic == b"KUD0", "kudo magic %r at %d" % (magic, i))
        # Flattened columns: a binary column is two, the list and its byte child.
        flat = []
        for k, (_, (typ, *_r), _) in enumerate(COLUMNS):
            flat.append(k)
            if typ == 12:
                flat.append(None)  # the child: no validity, its bytes are the column's data
        check(C == len(flat) and N >= 1 and R >= 0, "kudo header C %d N %d R %d, want C %d" % (C, N, R, len(flat)))
        bits = data[i + 28:i + 28 + (C + 7) // 8]
        H = 28 + (C + 7) // 8
        has_v = [bool(bits[f // 8] >> (f % 8) & 1) for f in range(C)]
        for f, k in enumerate(flat):
            want = k is not None and COLUMNS[k][1][4]
            check(has_v[f] == want, "kudo flattened column %d: has-validity %s, want %s" % (f, has_v[f], want))
        pos = i + H
        valid = {}
        nbytes = (R + N - 1) // 8 - R // 8 + 1
        for f, k in enumerate(flat):
            if has_v[f]:
                vb = data[pos:pos + nbytes]
                valid[k] = [bool(vb[(R % 8 + r) // 8] >> ((R % 8 + r) % 8) & 1) for r in range(N)]
                pos += nbytes
        while (pos - i) % 4:
            check(data[pos] == 0, "kudo validity padding")
            pos += 1
        check(pos - i - H == V, "kudo validity length %d, header says %d" % (pos - i - H, V))
        offs = {}
        o0 = pos
        for k, (_, (typ, *_r), _) in enumerate(COLUMNS):
            if typ in VAR:
                offs[k] = struct.unpack_from("<%di" % (N + 1), data, pos)
                pos += 4 * (N + 1)
        check(pos - o0 == O, "kudo offsets length %d, header says %d" % (pos - o0, O))
        cols = []
        for k, (_, (typ, width, *_r), _) in enumerate(COLUMNS):
            if typ in VAR:
                o = offs[k]
                d = data[pos:pos + o[-1] - o[0]]
                vals = [d[o[r] - o[0]:o[r + 1] - o[0]] for r in range(N)]
                pos += o[-1] - o[0]
            else:
                vals = unpack_fixed(typ, data, pos, N)
                pos += width * N
            if k in valid:
                vals = [v if ok else None for v, ok in zip(vals, valid[k])]
            cols.append(vals)
        while (pos - i) % 4:
            check(data[pos] == 0, "kudo data padding")
            pos += 1
        check(pos - i == H + T, "kudo table of %d bytes, header says %d" % (pos - i, H + T))
        rows_out.extend(zip(*cols))
        i = pos
        TABLES[0] += 1
    return rows_out


# ---------------------------------------------------------------------------

def read_registry(path):
    """The applications the registry's files name (protocol.md section 4, "The registry's
    files"): the snapshot, then the changes of the log it names, in seq order."""
    with open(path) as f:
        snap = json.load(f)
    check(snap.get("version") in (1, 2), "registry snapshot version %r" % snap.get("version"))
    apps = {a["app"]: a for a in snap["apps"]}
    log = path + ".log"
    if snap.get("version") != 2 or not snap.get("log") or not os.path.exists(log):
        return apps
    with open(log, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    head = json.loads(lines[0])
    check(head.get("version") == 2 and "base" in head, "registry log header %r" % head)
    if head["log"] != snap["log"]:
        return apps
    recs = [json.loads(line) for line in lines[1:-1]]  # the last piece lacks its newline: ignored
    for r in sorted(recs, key=lambda r: r["seq"]):
        if r["seq"] <= snap.get("seq", 0):
            continue
        if r["op"] == "register":
            a = apps.get(r["app"])
            if a is None or a.get("removed") or a["uid"] != r["uid"]:
                a = apps[r["app"]] = {"app": r["app"], "uid": r["uid"]}
            if r.get("local"):
                a.setdefault("local", []).append(r["local"])
        elif r["op"] == "remove":
            apps[r["app"]] = {"app": r["app"], "uid": r["uid"], "removed": r["removed"]}
        elif r["op"] == "drop":
            apps.pop(r["app"], None)
        else:
            raise Fail("registry log: unknown op %r" % r["op"])
    return apps
