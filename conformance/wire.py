"""The wire protocol of docs/protocol.md, written from the document alone: its constants
(sections 2, 3 and 6), field encodings (section 2), and a connection (Conn) that frames
messages, passes fds (section 5) and matches request ids (section 7); sealed memfds for
the memfd data plane. Section numbers are docs/protocol.md's."""

import fcntl
import os
import socket
import struct

from fail import Fail, check


# ---------------------------------------------------------------------------
# Protocol constants (docs/protocol.md sections 2, 3, 6)

MAGIC = b"SH"
HEADER = struct.Struct("<2sHHHII")  # magic, type, flags, reserved, request id, length
FLAG_FD = 0x0001

HELLO, REGISTER, OPEN, BATCH, COMMIT, ABORT, PING, STATS = range(1, 9)
REMOVE_SHUFFLE, REMOVE_APP, LIST_SHUFFLES = 0x9, 0xA, 0xB
RESPONSE = 0x8000
ERROR = 0xFFFF

FEAT_MEMFD, FEAT_CUDA, FEAT_COLUMNAR, FEAT_LIFECYCLE, FEAT_KUDO, FEAT_LAST = (1 << i for i in range(6))

CODES = {
    0: "OK", 1: "InvalidArgument", 2: "Unsupported", 3: "NotFound", 4: "AlreadyExists",
    5: "PermissionDenied", 6: "ResourceExhausted", 7: "FailedPrecondition", 8: "Aborted",
    9: "Unavailable", 10: "VersionMismatch", 11: "Internal",
}
CODE = {v: k for k, v in CODES.items()}

KIND_OPAQUE, KIND_COLUMNAR = 1, 2
PLANE_INLINE, PLANE_MEMFD = 1, 2
BATCH_LAST = 0x01  # Batch.flags bit 0: the map output's last batch (feature bit 5)


class DaemonError(Exception):
    def __init__(self, code, message, rid):
        super().__init__("%s (%d): %s" % (CODES.get(code, "?"), code, message))
        self.code, self.message, self.rid = code, message, rid


# ---------------------------------------------------------------------------
# Field encodings (section 2, "Field encodings")

def u8(v): return struct.pack("<B", v)
def u16(v): return struct.pack("<H", v)
def u32(v): return struct.pack("<I", v)
def i32(v): return struct.pack("<i", v)
def i64(v): return struct.pack("<q", v)
def u64(v): return struct.pack("<Q", v)


def string(s):
    b = s.encode() if isinstance(s, str) else s
    return u16(len(b)) + b


def lst(items, enc):
    return u32(len(items)) + b"".join(enc(x) for x in items)


class Reader:
    """Decodes a payload; every message must be consumed exactly (no trailing bytes)."""

    def __init__(self, b):
        self.b, self.i = b, 0

    def take(self, n):
        check(self.i + n <= len(self.b), "payload too short: want %d bytes at %d of %d" % (n, self.i, len(self.b)))
        v = self.b[self.i:self.i + n]
        self.i += n
        return v

    def u8(self): return self.take(1)[0]
    def u16(self): return struct.unpack("<H", self.take(2))[0]
    def u32(self): return struct.unpack("<I", self.take(4))[0]
    def i32(self): return struct.unpack("<i", self.take(4))[0]
    def i64(self): return struct.unpack("<q", self.take(8))[0]
    def u64(self): return struct.unpack("<Q", self.take(8))[0]
    def string(self): return self.take(self.u16()).decode()

    def lst(self, f):
        n = self.u32()
        return [f() for _ in range(n)]

    def done(self):
        check(self.i == len(self.b), "%d trailing bytes in payload" % (len(self.b) - self.i))


# ---------------------------------------------------------------------------
# Connection: frames, fd passing (section 5), request ids (section 7)

class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(60)
        self.s.connect(path)
        self.next_id = 1
        self.pending = {}  # responses that arrived for ids not yet asked for
        self.hello = None

    def close(self):
        self.s.close()

    def rid(self):
        r = self.next_id
        self.next_id = self.next_id + 1 if self.next_id < 0xFFFFFFFF else 1
        return r

    def send(self, typ, payload, rid=None, fd=None, flags=None):
        rid = self.rid() if rid is None else rid
        fl = (FLAG_FD if fd is not None else 0) if flags is None else flags
        frame = HEADER.pack(MAGIC, typ, fl, 0, rid, len(payload)) + payload
        if fd is None:
            self.s.sendall(frame)
        else:
            # One sendmsg that starts at the header's first byte carries the descriptor;
            # whatever the kernel did not take follows with plain writes.
            n = socket.send_fds(self.s, [frame], [fd])
            if n < len(frame):
                self.s.sendall(frame[n:])
        return rid

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the daemon after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def recv_frame(self):
        magic, typ, flags, res, rid, length = HEADER.unpack(self.recv_exact(16))
        check(magic == MAGIC, "bad magic %r" % magic)
        check(flags == 0, "response frame with flags %#x" % flags)
        check(res == 0, "response frame with reserved %#x" % res)
        limit = self.hello["max_frame"] if self.hello else 64 << 20
        check(length <= limit, "response length %d over max_frame %d" % (length, limit))
        return typ, rid, self.recv_exact(length)

    def wait(self, rid):
        while rid not in self.pending:
            typ, r, payload = self.recv_frame()
            check(r not in self.pending, "two responses for request id %d" % r)
            self.pending[r] = (typ, payload)
        return self.pending.pop(rid)

    def call(self, typ, payload, **kw):
        """Sends a request and waits for its response; an Error raises DaemonError."""
        rid = self.send(typ, payload, **kw)
        return self.result(typ, rid)

    def result(self, typ, rid):
        rtyp, payload = self.wait(rid)
        if rtyp == ERROR:
            r = Reader(payload)
            code, msg = r.u32(), r.string()
            r.done()
            raise DaemonError(code, msg, rid)
        check(rtyp == typ | RESPONSE, "response type %#x to request type %#x" % (rtyp, typ))
        return Reader(payload)

    # --- messages (section 4) ---

    def do_hello(self, client="docconform/1", lo=1, hi=1):
        r = self.call(HELLO, u16(lo) + u16(hi) + string(client))
        h = dict(version=r.u16(), reserved=r.u16(), max_frame=r.u32(), max_inline=r.u32(),
                 features=r.u64(), server=r.string())
        r.done()
        check(h["version"] == 1, "ServerHello version %d" % h["version"])
        check(h["reserved"] == 0, "ServerHello reserved %d" % h["reserved"])
        check(h["max_frame"] >= 65536, "max_frame %d < 65536" % h["max_frame"])
        check(h["max_inline"] <= h["max_frame"], "max_inline over max_frame")
        want_inline = max(h["max_frame"] - (1 << 20), h["max_frame"] // 2)
        check(h["max_inline"] == want_inline,
              "max_inline %d, docs say max_frame less 1 MiB or half of it: %d" % (h["max_inline"], want_inline))
        self.hello = h
        return h

    def register(self, app, execu, local_dirs=(), sub_dirs=0):
        r = self.call(REGISTER, string(app) + string(execu) + i32(sub_dirs) + lst(list(local_dirs), string))
        dirs = r.lst(r.string)
        r.done()
        return dirs

    def open(self, shuffle, mapid, nparts, kind=KIND_OPAQUE, fmt=0, codec="", checksum="",
             block_size=0, level=0, schema=None):
        payload = (i32(shuffle) + i64(mapid) + i32(nparts) + u8(kind) + u8(fmt) + b"\0\0" +
                   string(codec) + string(checksum) + u32(block_size) + i32(level))
        if fmt == 1:
            payload += lst(schema, lambda f: string(f[0]) + string(f[1]))
        r = self.call(OPEN, payload)
        h = r.u64()
        r.done()
        check(h != 0, "Opened handle 0")
        return h

    def batch_opaque(self, handle, offsets, payload, plane=PLANE_INLINE, memfd=None, flags=0, reserved=0):
        self.result(BATCH, self.send_batch(handle, offsets, payload, plane, memfd, flags, reserved)).done()

    def send_batch(self, handle, offsets, payload, plane=PLANE_INLINE, memfd=None, flags=0, reserved=0):
        """Sends an opaque Batch without waiting for its answer; returns its request id."""
        head = u64(handle) + u8(KIND_OPAQUE) + u8(plane) + u8(flags) + u8(reserved) + lst(offsets, i64)
        if plane == PLANE_INLINE:
            return self.send(BATCH, head + u32(len(payload)) + payload)
        fd, off = memfd
        return self.send(BATCH, head + i64(off) + i64(len(payload)), fd=fd)

    def commit(self, handle):
        return self.commit_result(self.call(COMMIT, u64(handle)))

    def commit_result(self, r):
        existing = r.u8()
        reserved = r.take(3)
        runs = r.i32()
        lengths = r.lst(r.i64)
        checksums = r.lst(r.i64)
        r.done()
        check(existing in (0, 1) and reserved == b"\0\0\0", "CommitResult existing/reserved")
        return dict(existing=existing, runs=runs, lengths=lengths, checksums=checksums)

    def abort(self, handle):
        self.call(ABORT, u64(handle)).done()

    def ping(self):
        self.call(PING, b"").done()

    def shuffles(self, app):
        """ListShuffles: (shuffle_id, map_outputs, bytes) per shuffle of app."""
        r = self.call(LIST_SHUFFLES, string(app))
        got = r.lst(lambda: (r.i32(), r.i64(), r.i64()))
        r.done()
        return got

    def stats(self):
        r = self.call(STATS, b"")
        st = {}
        for _ in range(r.u32()):
            name = r.string()
            st[name] = r.i64()
        r.done()
        return st


def expect_error(code, fn, *args, field=None, **kw):
    """Runs fn, which must fail with the named error code and a message naming field."""
    try:
        fn(*args, **kw)
    except DaemonError as e:
        check(e.code == CODE[code], "want %s, got %s" % (code, e))
        if field is not None:
            # Messages name a field as Message.Field, the docs' snake_case name in CamelCase.
            norm = lambda s: s.replace("_", "").lower()
            for f in field if isinstance(field, tuple) else (field,):
                check(norm(f) in norm(e.message), "error message %r does not name %r" % (e.message, f))
        if os.environ.get("DOCCONFORM_SHOW_ERRORS"):
            print("     %s: %s" % (code, e.message))
        return e
    raise Fail("want error %s, got success" % code)


def sealed_memfd(payload, pad=0, seal=True):
    fd = os.memfd_create("docconform", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    buf = b"\xee" * pad + payload
    view = memoryview(buf)
    while view:
        view = view[os.write(fd, view):]
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd
