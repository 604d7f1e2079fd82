"""The block server of docs/serving.md, written from the documents alone: a Spark reducer's side
of network-common's frames and network-shuffle's block-transfer messages over TCP (serving.md
sections 1 and 2), the auth tail of RegisterExecutor and the serve tail of Registered
(docs/protocol.md, "Serving", feature bit 7), SASL DIGEST-MD5 with qop auth
(docs/serving-auth.md), and the checks (`Serving`) that the suite runs against a daemon of its
own started with --serve-addr. Every fetched block is compared with the committed data file's
segment as its index gives it (docs/format.md section 9)."""

import base64
import hashlib
import hmac
import os
import re
import resource
import socket
import struct
import subprocess
import threading
import time
import urllib.request

from fail import Fail, check
from wire import BATCH_LAST, Conn, Reader, expect_error, i32, lst, string, u16
from codec import CHECKSUMS
from layout import spark_path
from sparkcrypto import CTR, X25519_BASE, gcm_open, gcm_seal, hkdf, selftest, x25519


FEAT_SERVE = 1 << 7  # protocol.md section 3: RegisterExecutor's auth tail, Registered's serve tail

# serving.md section 1: network-common's Message.Type
CHUNK_FETCH_REQUEST, CHUNK_FETCH_SUCCESS, CHUNK_FETCH_FAILURE = 0, 1, 2
RPC_REQUEST, RPC_RESPONSE, RPC_FAILURE = 3, 4, 5
STREAM_REQUEST, STREAM_RESPONSE, STREAM_FAILURE = 6, 7, 8
ONE_WAY, UPLOAD_STREAM, MERGED_META_REQUEST = 9, 10, 11
MAX_FRAME = 16 << 20

# serving.md section 2: BlockTransferMessage.Type
OPEN_BLOCKS, STREAM_HANDLE, REMOVE_BLOCKS, BLOCKS_REMOVED = 0, 3, 7, 8
FETCH_SHUFFLE_BLOCKS, GET_LOCAL_DIRS, LOCAL_DIRS = 9, 10, 11
DIAGNOSE, CORRUPTION_CAUSE, REMOVE_OUTPUTS = 16, 17, 100
DISK_ISSUE, NETWORK_ISSUE, UNKNOWN_ISSUE, CHECKSUM_VERIFY_PASS, UNSUPPORTED_ALGO = range(5)


# ---------------------------------------------------------------------------
# The socket side: RegisterExecutor with the auth tail (protocol.md, "Serving")

def register_payload(app, execu, secret=b"", local_dirs=(), sub_dirs=0):
    """RegisterExecutor with the auth tail: no IO key (length 0), then the secret."""
    return (string(app) + string(execu) + i32(sub_dirs) + lst(list(local_dirs), string) +
            u16(0) + u16(len(secret)) + secret)


def registered(r):
    """Registered with the serve tail: (dirs, serve_host, serve_port, serve_flags)."""
    dirs = r.lst(r.string)
    host, port, flags = r.string(), r.i32(), r.u8()
    r.done()
    return dirs, host, port, flags


def register_serving(c, app, execu, secret=b"", local_dirs=(), sub_dirs=0):
    return registered(c.call(2, register_payload(app, execu, secret, local_dirs, sub_dirs)))


# ---------------------------------------------------------------------------
# Encodings, big-endian (serving.md section 1)

def bstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(">i", len(b)) + b


def bstrs(items):
    return struct.pack(">i", len(items)) + b"".join(bstr(x) for x in items)


def bi32s(vals):
    return struct.pack(">i", len(vals)) + b"".join(struct.pack(">i", v) for v in vals)


def bi64s(vals):
    return struct.pack(">i", len(vals)) + b"".join(struct.pack(">q", v) for v in vals)


class BReader:
    def __init__(self, b):
        self.b, self.i = b, 0

    def take(self, n):
        check(0 <= n and self.i + n <= len(self.b), "message too short: want %d bytes at %d of %d" % (n, self.i, len(self.b)))
        v = self.b[self.i:self.i + n]
        self.i += n
        return v

    def u8(self): return self.take(1)[0]
    def i32(self): return struct.unpack(">i", self.take(4))[0]
    def i64(self): return struct.unpack(">q", self.take(8))[0]
    def str(self): return self.take(self.i32()).decode()
    def strs(self): return [self.str() for _ in range(self.i32())]
    def i32s(self): return [self.i32() for _ in range(self.i32())]
    def rest(self): return self.take(len(self.b) - self.i)

    def done(self):
        check(self.i == len(self.b), "%d trailing bytes in a message" % (len(self.b) - self.i))


def frame(typ, fields):
    return struct.pack(">qB", 9 + len(fields), typ) + fields


def open_blocks(app, execu, ids):
    return bytes([OPEN_BLOCKS]) + bstr(app) + bstr(execu) + bstrs(ids)


def fetch_shuffle_blocks(app, execu, shuffle, map_ids, reduce_ids, batch):
    return (bytes([FETCH_SHUFFLE_BLOCKS]) + bstr(app) + bstr(execu) + struct.pack(">i", shuffle) +
            bi64s(map_ids) + struct.pack(">i", len(reduce_ids)) + b"".join(bi32s(r) for r in reduce_ids) +
            bytes([1 if batch else 0]))


def remove_blocks(app, execu, ids):
    return bytes([REMOVE_BLOCKS]) + bstr(app) + bstr(execu) + bstrs(ids)


def diagnose(app, execu, shuffle, mapid, reduce, checksum, algo):
    return (bytes([DIAGNOSE]) + bstr(app) + bstr(execu) + struct.pack(">iqiq", shuffle, mapid, reduce, checksum) +
            bstr(algo))


class RpcFailed(Fail):
    """An RpcFailure answer; uncaught, a failed check."""

    def __init__(self, error):
        super().__init__("RpcFailure: " + error)
        self.error = error


class Closed(Fail):
    pass


class BlockConn:
    """A reducer's connection: frames of serving.md section 1, one request at a time."""

    def __init__(self, addr, timeout=20):
        self.s = socket.create_connection(addr, timeout=timeout)
        self.next_id = 1

    def close(self):
        self.s.close()

    layer = None  # a SASL auth-conf security layer once negotiated (SaslConf)

    def send(self, typ, fields):
        data = frame(typ, fields)
        self.s.sendall(self.layer.wrap_frame(data) if self.layer else data)

    def raw_recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.s.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise Closed("connection closed after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def recv_exact(self, n):
        if not self.layer:
            return self.raw_recv(n)
        while len(self.layer.plain) < n:
            self.layer.plain += self.layer.unwrap(self.raw_recv, n - len(self.layer.plain))
        out = bytes(self.layer.plain[:n])
        del self.layer.plain[:n]
        return out

    def recv_frame(self):
        length, typ = struct.unpack(">qB", self.recv_exact(9))
        check(9 <= length <= (1 << 31), "the daemon sent a frame length %d" % length)
        body = self.recv_exact(length - 9)
        if self.layer and self.layer.framed:
            # serving-auth.md "After the handshake": SASL blocks do not span frames.
            check(not self.layer.plain, "a SASL block spans the end of a frame (%d bytes past it)" % len(self.layer.plain))
        return typ, body

    def rpc_raw(self, body):
        rid = self.next_id
        self.next_id += 1
        self.send(RPC_REQUEST, struct.pack(">qi", rid, len(body)) + body)
        return rid

    def rpc_result(self, rid):
        typ, f = self.recv_frame()
        r = BReader(f)
        if typ == RPC_FAILURE:
            check(r.i64() == rid, "RpcFailure for another request id")
            err = r.str()
            r.done()
            raise RpcFailed(err)
        check(typ == RPC_RESPONSE, "answer of type %d to an RpcRequest" % typ)
        check(r.i64() == rid, "RpcResponse for another request id")
        n = r.i32()
        body = r.rest()
        check(len(body) == n, "RpcResponse body_size %d, %d bytes follow" % (n, len(body)))
        return body

    def rpc(self, body):
        return self.rpc_result(self.rpc_raw(body))

    def stream(self, body):
        """OpenBlocks or FetchShuffleBlocks: the StreamHandle's (stream_id, num_chunks)."""
        r = BReader(self.rpc(body))
        check(r.u8() == STREAM_HANDLE, "answer is not a StreamHandle")
        sid, n = r.i64(), r.i32()
        r.done()
        return sid, n

    def chunk(self, sid, k):
        """ChunkFetchRequest: ('ok', bytes) or ('fail', error)."""
        self.send(CHUNK_FETCH_REQUEST, struct.pack(">qi", sid, k))
        typ, f = self.recv_frame()
        r = BReader(f)
        check(typ in (CHUNK_FETCH_SUCCESS, CHUNK_FETCH_FAILURE), "answer of type %d to a ChunkFetchRequest" % typ)
        check((r.i64(), r.i32()) == (sid, k), "chunk answer names another stream or chunk")
        if typ == CHUNK_FETCH_SUCCESS:
            return "ok", r.rest()
        err = r.str()
        r.done()
        return "fail", err

    def fetch_all(self, body):
        sid, n = self.stream(body)
        out = []
        for k in range(n):
            st, b = self.chunk(sid, k)
            check(st == "ok", "chunk %d of %d failed: %s" % (k, n, b))
            out.append(b)
        return sid, out

    def closed(self, wait=10):
        """True when the daemon closes the connection (EOF or reset) within wait seconds with
        nothing sent; a frame that arrives instead is a failure."""
        self.s.settimeout(wait)
        try:
            got = self.s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        check(not got, "the daemon sent %r where it should close the connection" % got[:64])
        return True


# ---------------------------------------------------------------------------
# SASL DIGEST-MD5, qop auth (serving-auth.md)

SASL_USER = base64.b64encode(b"sparkSaslUser").decode()


def netty_base64(b):
    s = base64.b64encode(b).decode()
    return "\n".join(s[i:i + 76] for i in range(0, len(s), 76))


def sasl_message(app, payload):
    return b"\xea" + bstr(app) + struct.pack(">i", len(payload)) + payload


def parse_directives(tok):
    return {k: (v[1:-1] if v.startswith('"') else v)
            for k, v in re.findall(r'([a-zA-Z-]+)=("[^"]*"|[^,]*)', tok)}


def md5(b):
    return hashlib.md5(b).digest()


def hexmd5(b):
    return hashlib.md5(b).hexdigest()


def sasl_auth(c, app, secret, conf=False):
    """Runs the client side of the handshake, qop auth, or auth-conf with cipher rc4 (then every
    later byte of c goes through the security layer); raises RpcFailed if refused."""
    ch = c.rpc(sasl_message(app, b"")).decode()
    d = parse_directives(ch)
    check(d.get("realm") == "default" and d.get("qop") == "auth-conf,auth" and d.get("algorithm") == "md5-sess"
          and d.get("cipher") == "3des,rc4" and d.get("charset") == "utf-8" and len(d.get("nonce", "")) == 40,
          "digest-challenge %r, not as serving-auth.md lays it out" % ch)
    nonce, cnonce, nc, uri = d["nonce"], base64.b64encode(os.urandom(30)).decode(), "00000001", "null/default"
    qop, tail = ("auth-conf", ":" + "0" * 32) if conf else ("auth", "")
    ha1 = md5(md5(("%s:default:%s" % (SASL_USER, netty_base64(secret))).encode()) + (":%s:%s" % (nonce, cnonce)).encode())
    kd = lambda a2: hexmd5(("%s:%s:%s:%s:%s:%s" % (ha1.hex(), nonce, nc, cnonce, qop, hexmd5(a2.encode()))).encode())
    resp = ('charset=utf-8,username="%s",realm="default",nonce="%s",nc=%s,cnonce="%s",digest-uri="%s",'
            'maxbuf=65536,response=%s,qop=%s' % (SASL_USER, nonce, nc, cnonce, uri, kd("AUTHENTICATE:" + uri + tail), qop))
    if conf:
        resp += ',cipher="rc4"'
    got = c.rpc(sasl_message(app, resp.encode())).decode()
    want = "rspauth=" + kd(":" + uri + tail)
    check(got == want, "rspauth %r, want %r" % (got, want))
    if conf:
        c.layer = SaslConf(ha1)


class Rc4:
    def __init__(self, key):
        S = list(range(256))
        j = 0
        for i in range(256):
            j = (j + S[i] + key[i % len(key)]) & 255
            S[i], S[j] = S[j], S[i]
        self.S, self.i, self.j = S, 0, 0

    def crypt(self, data):
        S, i, j = self.S, self.i, self.j
        out = bytearray(len(data))
        for k, x in enumerate(data):
            i = (i + 1) & 255
            j = (j + S[i]) & 255
            S[i], S[j] = S[j], S[i]
            out[k] = x ^ S[(S[i] + S[j]) & 255]
        self.i, self.j = i, j
        return bytes(out)


class SaslConf:
    """DIGEST-MD5's security layer with rc4 (RFC 2831 2.3, 2.4), framed as serving-auth.md says:
    u64 length (+8), RC4(msg || HMAC-MD5(Ki, seq || msg)[0:10]), u16 1, u32 seq."""

    BLOCK = 64 << 10
    framed = True

    def __init__(self, ha1):
        k = lambda what: md5(ha1 + what.encode())
        self.kic = k("Digest session key to client-to-server signing key magic constant")
        self.kis = k("Digest session key to server-to-client signing key magic constant")
        self.enc = Rc4(k("Digest H(A1) to client-to-server sealing key magic constant"))
        self.dec = Rc4(k("Digest H(A1) to server-to-client sealing key magic constant"))
        self.seq_out = self.seq_in = 0
        self.plain = bytearray()
        self.max_block = 0

    def wrap_frame(self, data):
        out = b""
        for i in range(0, len(data), self.BLOCK):
            msg = data[i:i + self.BLOCK]
            seq = struct.pack(">I", self.seq_out)
            mac = hmac.new(self.kic, seq + msg, hashlib.md5).digest()[:10]
            body = self.enc.crypt(msg + mac) + struct.pack(">H", 1) + seq
            out += struct.pack(">Q", len(body) + 8) + body
            self.seq_out += 1
        return out

    def unwrap(self, recv, need):
        n = struct.unpack(">Q", recv(8))[0]
        check(8 + 16 <= n <= 8 + (1 << 20) + 16, "SASL block length %d" % n)
        body = recv(n - 8)
        plain = self.dec.crypt(body[:-6])
        msg, mac = plain[:-10], plain[-10:]
        typ, seq = struct.unpack(">HI", body[-6:])
        check(typ == 1 and seq == self.seq_in, "SASL block type %d seq %d, want 1 and %d" % (typ, seq, self.seq_in))
        want = hmac.new(self.kis, struct.pack(">I", seq) + msg, hashlib.md5).digest()[:10]
        check(hmac.compare_digest(mac, want), "SASL block %d: the MAC does not verify" % seq)
        check(len(msg) <= self.BLOCK, "a SASL block of %d plaintext bytes, over 64 KiB" % len(msg))
        self.max_block = max(self.max_block, len(msg))
        self.seq_in += 1
        return msg


# ---------------------------------------------------------------------------
# AuthEngine (serving-auth.md "AuthEngine"), AES/CTR/NoPadding after it

class CtrLayer:
    """Each direction one AES-CTR keystream over the byte stream, no framing."""
    framed = False

    def __init__(self, key, iv_out, iv_in):
        self.enc, self.dec = CTR(key, iv_out), CTR(key, iv_in)
        self.plain = bytearray()

    def wrap_frame(self, data):
        return self.enc.crypt(data)

    def unwrap(self, recv, need):
        return self.dec.crypt(recv(need))


class GcmLayer:
    """AES/GCM/NoPadding (GcmTransportCipher): every message its own Tink AesGcmHkdfStreaming
    stream, laid out as serving-auth.md says (the header apart, every segment but the last 32768
    bytes: 32752 of plaintext and the tag)."""
    framed = False
    SEG = 32768

    def __init__(self, key):
        self.key = key
        self.hl = 1 + len(key) + 7
        self.plain = bytearray()
        self.segments = 0  # the most segments one message from the daemon had

    def wrap_frame(self, data):
        kl = len(self.key)
        segs = [data[i:i + self.SEG - 16] for i in range(0, len(data), self.SEG - 16)]
        total = 8 + self.hl + sum(len(x) + 16 for x in segs)
        lenb = struct.pack(">Q", total)
        salt, prefix = os.urandom(kl), os.urandom(7)
        sk = hkdf(self.key, salt, lenb, kl)
        out = lenb + bytes([self.hl]) + salt + prefix
        for i, seg in enumerate(segs):
            out += gcm_seal(sk, prefix + struct.pack(">IB", i, i == len(segs) - 1), seg, b"")
        return out

    def unwrap(self, recv, need):
        kl = len(self.key)
        lenb = recv(8)
        total = struct.unpack(">Q", lenb)[0]
        check(8 + self.hl <= total <= (1 << 31), "GCM message length %d" % total)
        hl = recv(1)[0]
        check(hl == self.hl, "GCM header length %d, want %d" % (hl, self.hl))
        salt, prefix = recv(kl), recv(7)
        body = recv(total - 8 - hl)
        sk = hkdf(self.key, salt, lenb, kl)
        out = []
        for i, pos in enumerate(range(0, len(body), self.SEG)):
            seg = body[pos:pos + self.SEG]
            check(len(seg) > 16, "a GCM segment of %d bytes" % len(seg))
            plain = gcm_open(sk, prefix + struct.pack(">IB", i, pos + self.SEG >= len(body)), seg, b"")
            check(plain is not None, "GCM segment %d of a %d-byte message does not authenticate" % (i, total))
            out.append(plain)
        self.segments = max(self.segments, len(out))
        return b"".join(out)


def auth_message(app, salt, ct):
    return b"\xfb" + bstr(app) + bstr(salt) + bstr(ct)


def auth_engine(c, app, secret, version=1, gcm=False):
    """The client side of the AuthEngine handshake, then AES/CTR on c; raises RpcFailed if refused."""
    app_b = app.encode()

    def kek(salt, transcript):
        return hkdf(secret, salt, app_b + salt + transcript, 16)
    priv = os.urandom(32)
    salt_c = os.urandom(16)
    iv = os.urandom(12)
    mine = auth_message(app, salt_c, iv + gcm_seal(kek(salt_c, b""), iv, x25519(priv, X25519_BASE), app_b + salt_c))
    check(len(mine) == 1 + 4 + len(app_b) + 4 + 16 + 4 + 60, "AuthMessage of %d bytes" % len(mine))
    theirs = c.rpc(mine)
    r = BReader(theirs)
    check(r.u8() == 0xFB, "the server's answer is not an AuthMessage")
    check(r.str() == app, "the server's AuthMessage names another application")
    salt_s = r.take(r.i32())
    ct = r.take(r.i32())
    r.done()
    check(len(salt_s) == 16 and len(ct) == 60, "server AuthMessage salt %d bytes, ciphertext %d" % (len(salt_s), len(ct)))
    peer = gcm_open(kek(salt_s, mine), ct[:12], ct[12:], app_b + salt_s + mine)
    check(peer is not None, "the server's sealed key does not open with transcript = the client's message as encoded")
    shared = x25519(priv, peer)
    transcript = mine + theirs
    key = shared if version == 1 else hkdf(shared, transcript, b"derivedKey", 16)
    if gcm:
        c.layer = GcmLayer(key)
    else:
        c.layer = CtrLayer(key, hkdf(shared, transcript, b"outputIv", 16), hkdf(shared, transcript, b"inputIv", 16))


# ---------------------------------------------------------------------------
# The checks

def segments(where, shuffle, mapid):
    """The data file's partitions per its index (format.md section 9)."""
    base = "shuffle_%d_%d_0" % (shuffle, mapid)
    with open(where(base + ".index"), "rb") as f:
        idx = f.read()
    offs = struct.unpack(">%dq" % (len(idx) // 8), idx)
    with open(where(base + ".data"), "rb") as f:
        data = f.read()
    return [data[offs[p]:offs[p + 1]] for p in range(len(offs) - 1)]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def metric(port, name):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Serving:
    """serving.md against a daemon of the suite's own, started with --serve-addr."""

    def __init__(self, suite, start_daemon, stop_daemon):
        self.suite, self.start, self.stop = suite, start_daemon, stop_daemon
        self.ok = suite.ok

    def run(self):
        """Runs every serving check but the idle bound's, whose connection finish() watches to
        its end (120 s): the suite runs other cases meanwhile."""
        args = self.suite.args
        self.procs = []
        selftest()
        if not args.daemon:
            self.suite.skipped.append("serving (needs --daemon)")
            return
        spark = os.path.join(args.tmp, "serve-spark")
        self.local = os.path.join(spark, "blockmgr-serve")
        os.makedirs(self.local)
        self.mport = free_port()
        sock, proc = self.start(args.daemon, args.tmp, "serve",
                                ["--allowed-roots", spark, "--serve-addr", "127.0.0.1:0",
                                 "--metrics-addr", "127.0.0.1:%d" % self.mport])
        self.procs.append(proc)
        try:
            ra_sock, ra_proc = self.start(args.daemon, args.tmp, "serve-auth",
                                          ["--serve-addr", "127.0.0.1:0", "--serve-require-auth"])
            self.procs.append(ra_proc)
            self.sock = sock
            self.registration()
            self.idle = self.start_idle()
            self.stale = self.start_stale()
            self.sock = ra_sock
            ra = self.conn("ra-open", "e1")
            self.ra_addr = (ra.serve[0], ra.serve[1])
            ra.close()
            timers = self.start_timers()
            self.sock = sock
            self.fetches()
            self.chunk_rules()
            self.local_dirs()
            self.nothing_here()
            self.corruption()
            self.who_reads()
            self.auth()
            self.hostile()
            self.bounds()
            self.removal()
            self.require_auth(ra_sock)
            self.join_timers(timers)
            self.connection_cap()
            self.stop_all(self.procs[1:])
            self.restart()
            self.advertise()
        except BaseException:
            self.stop_all(self.procs)
            raise

    def stop_all(self, procs):
        rcs = []
        for p in list(procs):
            self.procs.remove(p)
            rcs.append(self.stop(p))
        check(not any(rcs), "serving daemons exited %r on SIGTERM" % rcs)

    def finish(self):
        """The idle bound (section 6, 120 s), then the main serving daemon stops."""
        if not self.procs:
            return
        try:
            thread, result, t_start = self.idle
            thread.join(max(0, t_start + 150 - time.time()))
            got = result.get("idle")
            check(got and got[0] == "closed" and 118 <= got[1] <= 135,
                  "a connection idle after its last answer: %r, want closed 120 s later (serving.md section 6)" % (got,))
            self.ok("serving: a connection idle for 120 s after its last answer closed (%.1f s)" % got[1])
            thread, result, t_start = self.stale
            thread.join(max(0, t_start + 170 - time.time()))
            got = result.get("stale")
            check(got == "ok", "streams no chunk was asked of for 120 s, at the bound of 256: %r" % (got,))
            self.ok("serving: 256 streams open, the next RpcFailure; 120 s later (the connection kept busy) "
                    "a new stream opens, the unfetched ones closed first")
        finally:
            self.stop_all(self.procs)

    def start_stale(self):
        """Section 2 and 6: at the bound of 256 open streams, streams no chunk was asked of for
        120 s are closed first. A connection of its own, kept from idling by chunk requests of an
        unknown stream."""
        result = {}
        c = self.conn("srv-stale", "e1")
        self.write(c, self.suite.flat(c), 1, 0, 2, plan=[(0, 2, [10])])
        body = open_blocks("srv-stale", "e1", ["shuffle_1_0_0"])

        def watch():
            try:
                b = BlockConn(self.addr, timeout=30)
                sids = [b.stream(body)[0] for _ in range(256)]
                try:
                    b.stream(body)
                    result["stale"] = "stream 257 opened at once"
                    return
                except RpcFailed:
                    pass
                t0 = time.time()
                while time.time() - t0 < 125:
                    time.sleep(min(20, max(0, 125 - (time.time() - t0))))
                    check(b.chunk(-1, 0)[0] == "fail", "a chunk of stream -1 served")
                sid, _ = b.stream(body)
                check(sid not in sids, "a new stream has an old stream's id")
                check(b.chunk(sids[0], 0)[0] == "fail", "an unfetched stream still open after it was reclaimed")
                result["stale"] = "ok"
                b.close()
            except Exception as e:
                result["stale"] = repr(e)
            finally:
                c.close()
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        return t, result, time.time()

    def start_idle(self):
        result = {}

        def watch():
            try:
                s = socket.create_connection(self.addr, timeout=150)
                s.sendall(frame(CHUNK_FETCH_REQUEST, struct.pack(">qi", 1, 0)))
                hdr = s.recv(9, socket.MSG_WAITALL)
                ln = struct.unpack(">q", hdr[:8])[0]
                s.recv(ln - 9, socket.MSG_WAITALL)
                t0 = time.time()
                try:
                    got = s.recv(1)
                    result["idle"] = ("closed", time.time() - t0) if not got else ("answered", got)
                except ConnectionResetError:
                    result["idle"] = ("closed", time.time() - t0)
                s.close()
            except Exception as e:
                result["idle"] = ("error", repr(e))
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        return t, result, time.time()

    def start_timers(self):
        """Connections that the bounds of section 6 close after 30 s (or must not), watched from
        threads while the other checks run."""
        results = {}

        def watch(name, addr, first, keep_sending=None):
            t0 = time.time()
            try:
                s = socket.create_connection(addr, timeout=5)
                if first:
                    s.sendall(first)
                if name == "sasl-started":  # the digest-challenge comes first
                    s.settimeout(20)
                    hdr = s.recv(9, socket.MSG_WAITALL)
                    check(len(hdr) == 9 and hdr[8] == RPC_RESPONSE, "SASL's first message answered %r" % hdr)
                    s.recv(struct.unpack(">q", hdr[:8])[0] - 9, socket.MSG_WAITALL)
                    s.settimeout(5)
                while True:
                    try:
                        got = s.recv(65536)
                        if not got:
                            break
                        results[name] = ("answered", got[:40])
                        return
                    except socket.timeout:
                        if keep_sending:
                            s.sendall(keep_sending)
                    except (ConnectionResetError, BrokenPipeError):
                        break
                    if time.time() - t0 > 45:
                        results[name] = ("open", 45)
                        s.close()
                        return
                results[name] = ("closed", time.time() - t0)
                s.close()
            except Exception as e:
                results[name] = ("error", repr(e))

        specs = [
            ("frame-incomplete", self.addr, struct.pack(">qB", 100, RPC_REQUEST) + b"\0" * 10, None),
            ("sasl-started", self.addr, frame(RPC_REQUEST, struct.pack(">qi", 1, len(sasl_message("srv-secret", b""))) + sasl_message("srv-secret", b"")), None),
            ("require-auth-silent", self.ra_addr, b"", None),
            ("require-auth-oneway", self.ra_addr, b"", frame(ONE_WAY, struct.pack(">i", 1) + b"x")),
        ]
        threads = [threading.Thread(target=watch, args=sp) for sp in specs]
        for t in threads:
            t.start()
        plain = BlockConn(self.addr, timeout=60)  # no secret, no handshake: only the idle bound (120 s)
        return threads, results, plain, time.time()

    def join_timers(self, timers):
        threads, results, plain, t0 = timers
        for t in threads:
            t.join(60)
        for name, (lo, hi) in (("frame-incomplete", (29, 40)), ("sasl-started", (29, 40)),
                               ("require-auth-silent", (29, 40)), ("require-auth-oneway", (29, 40))):
            got = results.get(name)
            check(got and got[0] == "closed" and lo <= got[1] <= hi,
                  "%s: %r, want closed %d to %d s after connecting (serving.md section 6)" % (name, got, lo, hi))
        check(time.time() - t0 < 110, "the timers took over 110 s")
        plain.send(CHUNK_FETCH_REQUEST, struct.pack(">qi", 12345, 0))
        typ, _ = plain.recv_frame()
        check(typ == CHUNK_FETCH_FAILURE, "a connection without a handshake, silent %.0f s, answered type %d" % (time.time() - t0, typ))
        plain.close()
        self.ok("serving: a frame's bytes not all there closed after 30 s; a handshake begun and not finished "
                "closed 30 s after connecting; with --serve-require-auth a silent connection, and one sending "
                "OneWayMessages, closed 30 s after connecting; a connection with no handshake (no secret) "
                "still served after %.0f s" % (time.time() - t0))

    def conn(self, app, execu, secret=b"", **kw):
        c = Conn(self.sock)
        h = c.do_hello()
        check(h["features"] & FEAT_SERVE, "ServerHello features %#x lack bit 7 (serving)" % h["features"])
        c.dirs, host, port, flags = register_serving(c, app, execu, secret, **kw)
        c.serve = (host, port, flags)
        return c

    def tcp(self):
        return BlockConn(self.addr)

    # --- registration and the serve tail ---------------------------------------

    def registration(self):
        s = self.suite
        c = self.conn("srv-open", "e1")
        host, port, flags = c.serve
        check(host == "127.0.0.1" and 1 <= port <= 65535 and flags == 0,
              "Registered's serve tail %r for --serve-addr 127.0.0.1:0, want 127.0.0.1, the bound port, flags 0" % (c.serve,))
        self.addr = self.main_addr = (host, port)
        self.open = c
        self.open_where = s.flat(c)
        # An executor with Spark local dirs, and one of an application with a secret.
        sub = 4
        d = self.conn("srv-open", "e2", local_dirs=[self.local], sub_dirs=sub)
        check(d.serve == c.serve, "serve tail %r of a second registration differs" % (d.serve,))
        self.spark_conn = d
        self.spark_where = lambda name: spark_path([self.local], sub, name)
        self.secret = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        a = self.conn("srv-secret", "e1", secret=self.secret)
        check(a.serve == c.serve, "serve tail of an application with a secret %r" % (a.serve,))
        self.sec = a
        self.sec_where = s.flat(a)
        # One secret per application: another one, or none, is InvalidArgument.
        x = Conn(self.sock)
        x.do_hello()
        expect_error("InvalidArgument", register_serving, x, "srv-secret", "e9", b"other")
        expect_error("InvalidArgument", register_serving, x, "srv-secret", "e9", b"")
        # protocol.md's example bytes, both ways.
        check(register_payload("a", "e", b"xyz") == bytes.fromhex("0100 61 0100 65 00000000 00000000 0000 0300 78797a"),
              "protocol.md's RegisterExecutor example")
        check(registered(Reader(bytes.fromhex("01000000 0200 2f64 0100 68 a91c0000 01"))) == (["/d"], "h", 7337, 1),
              "protocol.md's Registered example")
        # Malformed tails: InvalidArgument, naming the field where the docs say so.
        base = register_payload("srv-bad", "e1")[:-4]
        expect_error("InvalidArgument", x.call, 2, base + u16(0))  # key length 0, no auth tail
        expect_error("InvalidArgument", x.call, 2, base + u16(0) + u16(1025) + b"s" * 1025, field="auth_secret")
        expect_error("InvalidArgument", x.call, 2, base + u16(0) + u16(1) + b"s" + b"\0")  # bytes after the tail
        # Without the auth tail: Registered has no serve tail (protocol.md "Serving").
        dirs = x.register("srv-old", "e1")
        check(len(dirs) == 1, "Registered without the auth tail: dirs %r" % dirs)
        self.old = x
        self.old_where = lambda name: os.path.join(dirs[0], name)
        self.ok("serving: feature bit 7; Registered's serve tail names 127.0.0.1 and the port bound for "
                "--serve-addr 127.0.0.1:0, flags 0; a second secret or none for an application with one "
                "InvalidArgument; a key length 0 without the auth tail, a secret over 1024 bytes, bytes after the tail "
                "InvalidArgument; protocol.md's example bytes; without the auth tail, no serve tail")

    # --- fetching -------------------------------------------------------------------

    def write(self, c, where, shuffle, mapid, nparts, codec="lz4", algo="ADLER32", plan=None):
        plan = plan or [(0, nparts, [1, 100, 3000]), (nparts // 2, nparts, [70000, 5])]
        self.suite.map_output(c, where, shuffle, mapid, nparts, codec, algo, plan)
        return segments(where, shuffle, mapid)

    def fetches(self):
        c, where = self.open, self.open_where
        np = 12
        segs = {m: self.write(c, where, 1, m, np, codec=("lz4", "snappy", "none")[m % 3],
                              algo=("ADLER32", "CRC32", "CRC32C")[m % 3]) for m in range(3)}
        self.segs = segs
        b = self.tcp()
        # OpenBlocks, one partition each, of several map outputs, empty ones included.
        ids = [(m, p) for m in range(3) for p in (0, 5, np - 1, 3)]
        sid, got = b.fetch_all(open_blocks("srv-open", "e1", ["shuffle_1_%d_%d" % mp for mp in ids]))
        for (m, p), blk in zip(ids, got):
            check(blk == segs[m][p], "OpenBlocks shuffle_1_%d_%d: %d bytes, the data file's segment has %d" % (m, p, len(blk), len(segs[m][p])))
        # OpenBlocks batch ids: shuffle_S_M_start_end.
        _, got = b.fetch_all(open_blocks("srv-open", "e1", ["shuffle_1_0_2_9", "shuffle_1_2_0_%d" % np]))
        check(got == [b"".join(segs[0][2:9]), b"".join(segs[2])], "OpenBlocks batch ids: bytes differ from the data file's range")
        # FetchShuffleBlocks without batch fetch: map by map, reduce ids in the order listed.
        maps, reduces = [2, 0, 1], [[7, 1], [11], [0, 6, 5]]
        sid2, got = b.fetch_all(fetch_shuffle_blocks("srv-open", "e1", 1, maps, reduces, False))
        want = [segs[m][p] for m, rs in zip(maps, reduces) for p in rs]
        check(got == want, "FetchShuffleBlocks (no batch): %d blocks differ from the data file's segments" % len(want))
        check(sid2 != sid, "two streams with the same id %d" % sid)
        # With batch fetch: one [start, end) range per map, one chunk each.
        maps, reduces = [0, 1, 2], [[0, np], [3, 4], [6, 11]]
        _, got = b.fetch_all(fetch_shuffle_blocks("srv-open", "e1", 1, maps, reduces, True))
        want = [b"".join(segs[m][s:e]) for m, (s, e) in zip(maps, reduces)]
        check(got == want, "FetchShuffleBlocks (batch): ranges differ from the data file's bytes")
        # The executor with Spark local dirs, read through the server.
        d = self.spark_conn
        ssegs = self.spark_segs = self.write(d, self.spark_where, 2, 0, 5, codec="lz4", algo="CRC32C")
        _, got = b.fetch_all(fetch_shuffle_blocks("srv-open", "e2", 2, [0], [[0, 1, 2, 3, 4]], False))
        check(got == ssegs, "blocks of an executor with Spark local dirs differ")
        # Pipelined: two requests sent before either answer is read, answered in order.
        r1 = b.rpc_raw(open_blocks("srv-open", "e1", ["shuffle_1_1_5"]))
        r2 = b.rpc_raw(open_blocks("srv-open", "e1", ["shuffle_1_1_6"]))
        h1, h2 = BReader(b.rpc_result(r1)), BReader(b.rpc_result(r2))
        for h, p in ((h1, 5), (h2, 6)):
            check(h.u8() == STREAM_HANDLE, "pipelined answer")
            s_, n_ = h.i64(), h.i32()
            check(n_ == 1 and b.chunk(s_, 0) == ("ok", segs[1][p]), "pipelined OpenBlocks, partition %d" % p)
        b.close()
        # The byte example of section 1.
        check(frame(CHUNK_FETCH_REQUEST, struct.pack(">qi", 5, 2)) == bytes.fromhex("00000000 00000015 00 00000000 00000005 00000002")
              and frame(CHUNK_FETCH_SUCCESS, struct.pack(">qi", 5, 2) + b"abc") ==
              bytes.fromhex("00000000 00000018 01 00000000 00000005 00000002 616263"), "section 1's byte examples")
        self.ok("serving: OpenBlocks (single and batch ids) and FetchShuffleBlocks (map by map; batch fetch of "
                "[start, end) ranges), StreamHandle, ChunkFetchSuccess bytes equal the data file's segments per "
                "the index (lz4, snappy, none; empty partitions; flat and Spark local dirs); pipelined requests")

    def chunk_rules(self):
        b = self.tcp()
        segs = self.segs
        sid, n = b.stream(open_blocks("srv-open", "e1", ["shuffle_1_0_1", "shuffle_1_0_2", "shuffle_1_0_3"]))
        check(n == 3, "num_chunks %d for 3 blocks" % n)
        # A chunk asked out of order fails and does not move the stream: the next is still expected.
        check(b.chunk(sid, 1)[0] == "fail", "chunk 1 before chunk 0 served")
        check(b.chunk(sid, 0) == ("ok", segs[0][1]), "chunk 0 after an out-of-order chunk 1")
        check(b.chunk(sid, 2)[0] == "fail", "chunk 2 before chunk 1 served")
        check(b.chunk(sid, 0)[0] == "fail", "chunk 0 served twice")
        check(b.chunk(sid, 1) == ("ok", segs[0][2]), "chunk 1 after out-of-order requests")
        check(b.chunk(sid, 2) == ("ok", segs[0][3]), "chunk 2 after out-of-order requests")
        st, _ = b.chunk(sid, 3)
        check(st == "fail", "a chunk past the stream's end served")
        # Unknown stream; a stream of another connection.
        st, _ = b.chunk(sid + 1000, 0)
        check(st == "fail", "a chunk of an unknown stream served")
        sid, n = b.stream(open_blocks("srv-open", "e1", ["shuffle_1_0_4"]))
        other = self.tcp()
        st, _ = other.chunk(sid, 0)
        check(st == "fail", "another connection's stream served")
        other.close()
        check(b.chunk(sid, 0) == ("ok", segs[0][4]), "the stream after another connection tried it")
        check(b.chunk(sid, 0)[0] == "fail", "a stream after its last chunk")
        # Not committed, partitions past the end: StreamHandle, then the chunk fails.
        # A chunk that fails for its block counts as fetched: the next one is served.
        sid, n = b.stream(open_blocks("srv-open", "e1", ["shuffle_1_77_0", "shuffle_1_2_12", "shuffle_1_0_12",
                                                          "shuffle_1_0_5_13", "shuffle_1_0_6"]))
        for k in range(n - 1):
            check(b.chunk(sid, k)[0] == "fail", "chunk %d of a missing block served" % k)
        check(b.chunk(sid, n - 1) == ("ok", segs[0][6]), "a block after 4 chunks that failed for their blocks")
        # An executor not seen registering since the start: looked up in every set of local dirs
        # the application registered (section 3), not in another executor's directory of the root.
        sid, n = b.stream(open_blocks("srv-open", "e-none", ["shuffle_1_0_0"]))
        check(n == 1 and b.chunk(sid, 0)[0] == "fail", "e1's block (the daemon's root) served as e-none's")
        sid, n = b.stream(open_blocks("srv-open", "e-none", ["shuffle_2_0_%d" % p for p in range(5)]))
        check([b.chunk(sid, k) for k in range(n)] == [("ok", x) for x in self.spark_segs],
              "e2's blocks (Spark local dirs) not served to a reducer naming an executor not seen registering")
        sid, n = b.stream(fetch_shuffle_blocks("srv-open", "e1", 9, [0], [[0]], False))
        check(n == 1 and b.chunk(sid, 0)[0] == "fail", "a block of a shuffle never written served")
        sid, n = b.stream(fetch_shuffle_blocks("srv-open", "e1", 1, [0], [[11, 12]], False))
        check(b.chunk(sid, 0) == ("ok", segs[0][11]) and b.chunk(sid, 1)[0] == "fail", "partition 12 of 12")
        # Requests the docs answer RpcFailure, the connection going on.
        bad = [
            open_blocks("srv-open", "e1", []),
            open_blocks("srv-open", "e1", ["shuffle_1_0_1", "shuffle_2_0_1"]),
            open_blocks("srv-open", "e1", ["rdd_1_2"]),
            open_blocks("srv-open", "e1", ["shuffleChunk_1_0_0_0"]),
            open_blocks("srv-open", "e1", ["shuffle_1_-1_0"]),
            open_blocks("srv-open", "e1", ["shuffle_1_0_5_5"]),
            open_blocks("srv-open", "../e1", ["shuffle_1_0_0"]),
            open_blocks("..", "e1", ["shuffle_1_0_0"]),
            open_blocks("srv-none", "e1", ["shuffle_1_0_0"]),
            open_blocks("srv-old", "e1", ["shuffle_1_0_0"]),
            fetch_shuffle_blocks("srv-open", "e1", 1, [0, 1], [[0]], False),
            fetch_shuffle_blocks("srv-open", "e1", 1, [], [], False),
            fetch_shuffle_blocks("srv-open", "e1", 1, [0], [[3, 1]], True),
            fetch_shuffle_blocks("srv-open", "e1", 1, [0], [[1, 2, 3]], True),
            fetch_shuffle_blocks("srv-open", "e1", -1, [0], [[0]], False),
            fetch_shuffle_blocks("srv-open", "e1", 1, [0], [[-1]], False),
            open_blocks("srv-open", "e1", ["shuffle_1_0_0"])[:-3],  # does not decode
            bytes([99]) + bstr("srv-open"),                      # a type nobody defines
            b"",                                                 # no type byte
            bytes([OPEN_BLOCKS]) + bstr("srv-open") + bstr("e1") + struct.pack(">i", -1),
            bytes([OPEN_BLOCKS]) + bstr("srv-open") + bstr("e1") + struct.pack(">i", 10 ** 9),
            bytes([OPEN_BLOCKS]) + bstr("srv-open") + bstr("e1") + struct.pack(">ii", 1, 2) + b"\xff\xfe",
            open_blocks("srv-open", "e1", ["shuffle_1_0_0"]) + b"\0",  # trailing bytes in the body
            bytes([2]) + bstr("srv-open") + bstr("e1"),          # RegisterExecutor: not served
            bytes([5]) + bstr("srv-open"),                       # Heartbeat: not served
        ]
        for k, body in enumerate(bad):
            try:
                b.rpc(body)
            except RpcFailed:
                continue
            raise Fail("request %d of the refused ones (%s) answered RpcResponse" % (k, body[:60]))
        _, got = b.fetch_all(open_blocks("srv-open", "e1", ["shuffle_1_0_5"]))
        check(got == [segs[0][5]], "the connection after %d RpcFailures" % len(bad))
        # The bound on streams a connection: 256 open, the next RpcFailure; fetching gives one back.
        sids = [b.stream(open_blocks("srv-open", "e1", ["shuffle_1_1_1"]))[0] for _ in range(256)]
        try:
            b.stream(open_blocks("srv-open", "e1", ["shuffle_1_1_1"]))
            raise Fail("stream 257 of a connection opened")
        except RpcFailed:
            pass
        check(b.chunk(sids[0], 0) == ("ok", segs[1][1]), "a stream at the bound")
        sid, _ = b.stream(open_blocks("srv-open", "e1", ["shuffle_1_1_1"]))
        check(b.chunk(sid, 0) == ("ok", segs[1][1]), "a stream opened after one was fetched")
        b.close()
        self.ok("serving: chunks in order (out of order, past the end, unknown, another connection's stream: "
                "ChunkFetchFailure; a failed chunk counts as fetched); missing map outputs and partitions past "
                "the end fail their chunk; %d malformed or refused requests RpcFailure, the connection going on; "
                "256 open streams a connection" % len(bad))

    def nothing_here(self):
        """Section 3: an executor none of whose directories exists on this node (registered
        without local dirs, nothing committed yet; or a name nobody registered, of an application
        without local dirs) is answered RpcFailure, DiagnoseCorruption UNKNOWN_ISSUE."""
        c = self.conn("srv-empty", "e1")
        b = self.tcp()
        for ex in ("e1", "e-nobody"):
            for body in (open_blocks("srv-empty", ex, ["shuffle_1_0_0"]),
                         fetch_shuffle_blocks("srv-empty", ex, 1, [0], [[0]], False),
                         remove_blocks("srv-empty", ex, ["shuffle_1_0_0.data"])):
                try:
                    b.rpc(body)
                    raise Fail("a request for executor %s with nothing on this node answered" % ex)
                except RpcFailed as e:
                    check("has no map outputs on this node" in e.error,
                          "RpcFailure %r, want `… has no map outputs on this node`" % e.error)
            r = BReader(b.rpc(diagnose("srv-empty", ex, 1, 0, 0, 0, "ADLER32")))
            check((r.u8(), r.u8()) == (CORRUPTION_CAUSE, UNKNOWN_ISSUE), "DiagnoseCorruption of executor %s" % ex)
        b.close()
        c.close()
        self.ok("serving: an executor with no directory on this node (registered, nothing committed; or "
                "unknown): OpenBlocks, FetchShuffleBlocks, RemoveBlocks RpcFailure (`has no map outputs on this "
                "node`), DiagnoseCorruption UNKNOWN_ISSUE")

    def local_dirs(self):
        b = self.tcp()
        r = BReader(b.rpc(bytes([GET_LOCAL_DIRS]) + bstr("srv-open") + bstrs(["e2"])))
        check(r.u8() == LOCAL_DIRS, "answer is not LocalDirsForExecutors")
        execs, counts, dirs = r.strs(), r.i32s(), r.strs()
        r.done()
        check((execs, counts, dirs) == (["e2"], [1], [os.path.realpath(self.local)]),
              "LocalDirsForExecutors %r, want e2's one dir %s" % ((execs, counts, dirs), self.local))
        for ex in (["e1"], ["e2", "e1"], ["nobody"]):
            try:
                b.rpc(bytes([GET_LOCAL_DIRS]) + bstr("srv-open") + bstrs(ex))
                raise Fail("GetLocalDirsForExecutors %r answered" % ex)
            except RpcFailed:
                pass
        b.close()
        self.ok("serving: GetLocalDirsForExecutors: an executor's registered local dirs; one without local dirs "
                "or unknown: RpcFailure for the whole request")

    def corruption(self):
        c, where = self.open, self.open_where
        segs = self.write(c, where, 3, 0, 4, codec="none", algo="CRC32", plan=[(0, 4, [500, 900])])
        crc = CHECKSUMS["CRC32"]
        b = self.tcp()

        def cause(reduce, checksum, algo="CRC32", mapid=0):
            r = BReader(b.rpc(diagnose("srv-open", "e1", 3, mapid, reduce, checksum, algo)))
            check(r.u8() == CORRUPTION_CAUSE, "answer is not CorruptionCause")
            v = r.u8()
            r.done()
            return v
        p = next(k for k in range(4) if segs[k])
        good = crc(segs[p])
        got = [cause(p, good), cause(p, good ^ 1), cause(p, good, "MD5"), cause(p, good, "ADLER32"),
               cause(p, good, mapid=9), cause(9, good), cause(p, good | (1 << 40)), cause(p, good - (1 << 32))]
        check(got == [CHECKSUM_VERIFY_PASS, NETWORK_ISSUE, UNSUPPORTED_ALGO, UNKNOWN_ISSUE, UNKNOWN_ISSUE, UNKNOWN_ISSUE,
                      NETWORK_ISSUE, NETWORK_ISSUE],
              "CorruptionCause %r, want pass, network, unsupported, unknown (no such checksum file, map output, "
              "partition), network (high bits set; the value less 2^32)" % got)
        # Flip a byte of the partition in the data file: its checksum no longer matches the file's.
        with open(where("shuffle_3_0_0.index"), "rb") as f:
            start = struct.unpack(">q", f.read()[8 * p:8 * p + 8])[0]
        with open(where("shuffle_3_0_0.data"), "r+b") as f:
            f.seek(start + 3)
            x = f.read(1)
            f.seek(start + 3)
            f.write(bytes([x[0] ^ 0x40]))
        check(cause(p, good) == DISK_ISSUE, "a flipped byte in the data file: want DISK_ISSUE")
        bad = segs[p][:3] + bytes([segs[p][3] ^ 0x40]) + segs[p][4:]
        check(cause(p, crc(bad)) == DISK_ISSUE, "a flipped byte, the reader's checksum of the bytes it got: want DISK_ISSUE")
        _, got = b.fetch_all(open_blocks("srv-open", "e1", ["shuffle_3_0_%d" % p]))
        check(got == [bad], "the block served is not the bytes on disk")
        b.close()
        self.ok("serving: DiagnoseCorruption: CHECKSUM_VERIFY_PASS, NETWORK_ISSUE (reader's checksum), "
                "UNSUPPORTED_CHECKSUM_ALGORITHM, UNKNOWN_ISSUE (no checksum file of the algorithm, no map output, "
                "no partition), DISK_ISSUE after a byte of the data file is flipped")

    def who_reads(self):
        s = self.suite
        a, where = self.sec, self.sec_where
        segs = self.write(a, where, 1, 0, 6, codec="none", algo="ADLER32",
                          plan=[(0, 6, [1, 100, 3000]), (3, 4, [70000])])  # partition 3 over 64 KiB
        self.sec_segs = segs
        b = self.tcp()
        for body in (open_blocks("srv-secret", "e1", ["shuffle_1_0_0"]),
                     fetch_shuffle_blocks("srv-secret", "e1", 1, [0], [[0, 6]], True),
                     remove_blocks("srv-secret", "e1", ["shuffle_1_0_0.data"]),
                     bytes([GET_LOCAL_DIRS]) + bstr("srv-secret") + bstrs(["e1"]),
                     bytes([REMOVE_OUTPUTS]) + bstr("srv-secret") + struct.pack(">i", -1)):
            try:
                b.rpc(body)
                raise Fail("a request for an application with a secret answered without a handshake")
            except RpcFailed:
                pass
        for sid in range(0, 8):
            check(b.chunk(sid, 0)[0] == "fail", "a chunk of stream %d served without a handshake" % sid)
        # Another application's executor, or its blocks under this application's name.
        # Another application's blocks under this one's name: srv-open's e1 has a shuffle_1_0_0
        # too (its own); srv-secret's is never what comes back.
        _, got = b.fetch_all(open_blocks("srv-open", "e1", ["shuffle_1_0_%d" % p for p in range(6)]))
        check(got == self.segs[0][:6] and got != segs, "srv-open's blocks %r" % [len(x) for x in got])
        b.close()
        check(os.path.exists(where("shuffle_1_0_0.data")), "a RemoveBlocks without a handshake removed a file")
        self.ok("serving: an application with a secret, without a handshake: OpenBlocks, FetchShuffleBlocks, "
                "RemoveBlocks, GetLocalDirsForExecutors, RemoveOutputs RpcFailure, chunks fail, nothing removed")

    def auth(self):
        segs = self.sec_segs
        b = self.tcp()
        sasl_auth(b, "srv-secret", self.secret)
        _, got = b.fetch_all(fetch_shuffle_blocks("srv-secret", "e1", 1, [0], [[0, 6]], True))
        check(got == [b"".join(segs)], "blocks after SASL auth differ")
        _, got = b.fetch_all(open_blocks("srv-secret", "e1", ["shuffle_1_0_%d" % p for p in range(6)]))
        check(got == segs, "blocks after SASL auth differ")
        try:
            b.rpc(open_blocks("srv-open", "e1", ["shuffle_1_0_0"]))
            raise Fail("a connection authenticated for srv-secret read srv-open")
        except RpcFailed as e:
            check("not authorized" in e.error, "RpcFailure %r, serving.md says `not authorized`" % e.error)
        # auth-conf (rc4): every later byte through the security layer; blocks over 64 KiB in
        # several SASL blocks.
        c2 = self.tcp()
        sasl_auth(c2, "srv-secret", self.secret, conf=True)
        _, got = c2.fetch_all(open_blocks("srv-secret", "e1", ["shuffle_1_0_%d" % p for p in range(6)] + ["shuffle_1_0_0_6"]))
        check(got == segs + [b"".join(segs)], "blocks through SASL auth-conf (rc4) differ")
        check(len(b"".join(segs)) > 64 << 10 and c2.layer.max_block == 64 << 10,
              "largest SASL block %d bytes for a %d-byte block" % (c2.layer.max_block, len(b"".join(segs))))
        try:
            c2.rpc(open_blocks("srv-open", "e1", ["shuffle_1_0_0"]))
            raise Fail("a connection authenticated (auth-conf) for srv-secret read srv-open")
        except RpcFailed as e:
            check("not authorized" in e.error, "RpcFailure %r, serving.md says `not authorized`" % e.error)
        c2.close()
        # AuthEngine, versions 1 and 2, AES/CTR after it (pure Python AES: small blocks only).
        small = sorted(range(len(segs)), key=lambda p: len(segs[p]))[:3]
        for version in (1, 2):
            c3 = self.tcp()
            auth_engine(c3, "srv-secret", self.secret, version)
            _, got = c3.fetch_all(open_blocks("srv-secret", "e1", ["shuffle_1_0_%d" % p for p in small]))
            check(got == [segs[p] for p in small], "blocks through AuthEngine version %d (CTR) differ" % version)
            c3.close()
        # GCM: a block over one 32 KiB segment (pure Python AES: one such block).
        big = max(range(len(segs)), key=lambda p: len(segs[p]))
        check(len(segs[big]) > 32752, "no block over one GCM segment to fetch")
        for version in (2, 1):
            c3 = self.tcp()
            auth_engine(c3, "srv-secret", self.secret, version, gcm=True)
            _, got = c3.fetch_all(open_blocks("srv-secret", "e1", ["shuffle_1_0_%d" % p for p in (small[0], big)]))
            check(got == [segs[small[0]], segs[big]], "blocks through AuthEngine version %d (GCM) differ" % version)
            check(c3.layer.segments >= 2, "a %d-byte block in one GCM segment" % len(segs[big]))
            c3.close()
        c3 = self.tcp()
        try:
            auth_engine(c3, "srv-secret", b"not the secret")
            raise Fail("AuthEngine with a wrong secret succeeded")
        except RpcFailed as e:
            check(e.error == "authentication failed; closing the connection", "refused AuthEngine's error %r" % e.error)
        check(c3.closed(), "a refused AuthEngine handshake did not close the connection")
        # RemoveOutputs of the whole application, from the authenticated connection: it forgets
        # the application's secret and registrations (section 2).
        listed = self.sec.shuffles("srv-secret")
        b2 = self.tcp()
        sasl_auth(b2, "srv-secret", self.secret)
        r = BReader(b2.rpc(bytes([REMOVE_OUTPUTS]) + bstr("srv-secret") + struct.pack(">i", -1)))
        got = (r.i64(), r.i64())
        r.done()
        check(got == (sum(m for _, m, _ in listed), sum(x for _, _, x in listed)) and got[0] > 0,
              "RemoveOutputs -1 of srv-secret: %r, ListShuffles said %r" % (got, listed))
        try:
            b2.rpc(open_blocks("srv-secret", "e1", ["shuffle_1_0_0"]))
            raise Fail("an application removed with RemoveOutputs -1 still served")
        except RpcFailed as e:
            check("has not registered with this daemon since it started" in e.error, "after RemoveOutputs -1: %r" % e.error)
        b2.close()
        x = Conn(self.sock)
        x.do_hello()
        register_serving(x, "srv-secret", "e5", b"another secret")
        x.close()
        # A second handshake: RpcFailure, closed.
        self.refused(b, b.rpc_raw(sasl_message("srv-secret", b"")), "already authenticated", "a second handshake")
        # A wrong secret: RpcFailure `Authentication failed.`, then closed.
        for app, secret in (("srv-secret", b"wrong"), ("srv-open", b""), ("srv-none", b"x")):
            b = self.tcp()
            try:
                sasl_auth(b, app, secret)
                raise Fail("SASL with a wrong secret (%s) succeeded" % app)
            except RpcFailed as e:
                check(e.error == "authentication failed; closing the connection", "refused handshake's error %r" % e.error)
            check(b.closed(), "a refused handshake did not close the connection")
        for what, body in (("a truncated SaslMessage", b"\xea" + bstr("srv-secret")),
                           ("an AuthMessage with a wrong key", b"\xfb" + bstr("srv-secret") + bstr(b"s" * 16) + bstr(b"c" * 60))):
            b = self.tcp()
            self.refused(b, b.rpc_raw(body), "authentication failed; closing the connection", what)
        # During a handshake, another request: RpcFailure, closed; a ChunkFetchRequest: closed.
        b = self.tcp()
        b.rpc(sasl_message("srv-secret", b""))
        self.refused(b, b.rpc_raw(open_blocks("srv-secret", "e1", ["shuffle_1_0_0"])), "authentication in progress",
                     "a request in the middle of a handshake")
        b = self.tcp()
        b.rpc(sasl_message("srv-secret", b""))
        b.send(CHUNK_FETCH_REQUEST, struct.pack(">qi", 0, 0))
        check(b.closed(), "a ChunkFetchRequest in the middle of a handshake: not closed, or answered")
        self.ok("serving: SASL DIGEST-MD5 (qop auth, and auth-conf with rc4: every byte through the security "
                "layer, blocks in SASL blocks of at most 64 KiB not spanning frames) and AuthEngine (versions 1 "
                "and 2, AES/CTR and AES/GCM, a block over one GCM segment; a wrong secret refused) with the registered secret, then blocks; that connection "
                "may not read another application (`not authorized`); a second handshake, a wrong secret, an "
                "application without one, an unknown one, a request mid-handshake close the connection; RemoveOutputs -1 after "
                "the handshake removes the application and forgets its secret")

    def restart(self):
        """serving.md section 5: after a restart an application is refused until one of its
        executors registers with the auth tail; then its outputs, those of executors gone since
        (Spark local dirs and the daemon's root) included, are served again, with its secret."""
        args = self.suite.args
        spark = os.path.join(args.tmp, "serve-restart-spark")
        local = os.path.join(spark, "blockmgr-r")
        os.makedirs(local)
        flags = ["--allowed-roots", spark, "--serve-addr", "127.0.0.1:0"]
        sock, proc = self.start(args.daemon, args.tmp, "serve-restart", flags)
        try:
            self.sock = sock
            secret = b"restart-secret"
            f = self.conn("srv-r", "e-flat", secret=secret)
            fw = self.suite.flat(f)
            flat = self.write(f, fw, 1, 0, 4)
            d = self.conn("srv-r", "e-spark", secret=secret, local_dirs=[local], sub_dirs=8)
            spark_segs = self.write(d, lambda name: spark_path([local], 8, name), 1, 1, 4)
            addr = (f.serve[0], f.serve[1])
            f.close()
            d.close()
            proc.kill()
            proc.wait()
            os.remove(sock)
            sock, proc = self.start(args.daemon, args.tmp, "serve-restart", flags)
            self.sock = sock
            # The same address? Not promised with port 0: learn it again from a registration
            # of another application.
            o = self.conn("srv-r-other", "e1")
            addr = (o.serve[0], o.serve[1])
            b = BlockConn(addr)
            try:
                b.rpc(open_blocks("srv-r", "e-flat", ["shuffle_1_0_0"]))
                raise Fail("an application not registered since the restart served")
            except RpcFailed as e:
                check("has not registered with this daemon since it started" in e.error,
                      "RpcFailure %r, want `has not registered with this daemon since it started`" % e.error)
            b.close()
            n = self.conn("srv-r", "e-new", secret=secret)
            b = BlockConn(addr)
            try:
                b.rpc(open_blocks("srv-r", "e-flat", ["shuffle_1_0_0"]))
                raise Fail("an application with a secret served without a handshake after the restart")
            except RpcFailed:
                pass
            b = BlockConn(addr)
            sasl_auth(b, "srv-r", secret)
            _, got = b.fetch_all(open_blocks("srv-r", "e-spark", ["shuffle_1_1_%d" % p for p in range(4)]))
            check(got == spark_segs, "blocks of an executor gone since the restart (Spark local dirs)")
            sid, k = b.stream(open_blocks("srv-r", "e-flat", ["shuffle_1_0_%d" % p for p in range(4)]))
            got = [b.chunk(sid, j) for j in range(k)]
            check(got == [("ok", x) for x in flat], "blocks of an executor gone since the restart (daemon's root)")
            # GetLocalDirsForExecutors of an executor registered before the last start: RpcFailure.
            try:
                b.rpc(bytes([GET_LOCAL_DIRS]) + bstr("srv-r") + bstrs(["e-spark"]))
                raise Fail("GetLocalDirsForExecutors answered for an executor registered before the restart")
            except RpcFailed:
                pass
            b.close()
            n.close()
            o.close()
        finally:
            rc = self.stop(proc)
        check(rc == 0, "the restarted serving daemon exited %d on SIGTERM" % rc)
        self.ok("serving, restart: an application refused (`has not registered with this daemon since it "
                "started`) until an executor registers again; then, after SASL with its secret, the blocks of an "
                "executor gone since (Spark local dirs, the daemon's root) served, its local dirs not "
                "(GetLocalDirsForExecutors RpcFailure)")

    def advertise(self):
        """protocol.md "Serving" and operations.md "Serving map outputs": a daemon without
        --serve-addr answers the serve tail "" and 0; --serve-advertise-host names the host;
        listening on every address, the node's host name; a port it cannot bind fails the start."""
        args = self.suite.args
        c = Conn(self.suite.sock)
        h = c.do_hello()
        check(h["features"] & FEAT_SERVE, "ServerHello of a daemon without --serve-addr lacks bit 7")
        got = register_serving(c, "srv-noserve", "e1")[1:]
        check(got == ("", 0, 0), "serve tail %r of a daemon without --serve-addr, want (\"\", 0, 0)" % (got,))
        c.close()
        for name, flags, want in (("serve-adv", ["--serve-addr", "127.0.0.1:0", "--serve-advertise-host", "shuffle.example"],
                                   "shuffle.example"),
                                  ("serve-any", ["--serve-addr", ":0"], socket.gethostname())):
            sock, proc = self.start(args.daemon, args.tmp, name, flags)
            try:
                c = Conn(sock)
                c.do_hello()
                _, host, port, fl = register_serving(c, "srv-adv", "e1")
                check((host, fl) == (want, 0) and 1 <= port <= 65535,
                      "%s: serve tail %r, want host %s" % (" ".join(flags), (host, port, fl), want))
                b = BlockConn(("127.0.0.1", port))
                b.send(CHUNK_FETCH_REQUEST, struct.pack(">qi", 1, 0))
                check(b.recv_frame()[0] == CHUNK_FETCH_FAILURE, "%s: the advertised port does not serve" % " ".join(flags))
                b.close()
                c.close()
            finally:
                rc = self.stop(proc)
            check(rc == 0, "the %s daemon exited %d on SIGTERM" % (name, rc))
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        r = subprocess.run([args.daemon, "serve", "--socket", os.path.join(args.tmp, "serve-busy.sock"),
                            "--root", os.path.join(args.tmp, "serve-busy-root"),
                            "--serve-addr", "127.0.0.1:%d" % busy.getsockname()[1]],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        busy.close()
        check(r.returncode == 1, "a --serve-addr port already bound: exit status %d, want 1" % r.returncode)
        self.ok("serving: without --serve-addr the serve tail is \"\" and 0; --serve-advertise-host names the "
                "host; listening on every address (:0) the node's host name; a port already bound fails the "
                "start with status 1")

    def refused(self, b, rid, text, what):
        """The next frame is RpcFailure for rid whose error starts with text; then closed."""
        try:
            typ, f = b.recv_frame()
        except Closed:
            raise Fail("%s: closed without the RpcFailure `%s`" % (what, text))
        r = BReader(f)
        check(typ == RPC_FAILURE and r.i64() == rid, "%s: answered type %d, want RpcFailure" % (what, typ))
        err = r.str()
        check(err.startswith(text), "%s: RpcFailure %r, want `%s`" % (what, err, text))
        check(b.closed(), "%s: the connection was not closed after its RpcFailure" % what)

    def hostile(self):
        good = open_blocks("srv-open", "e1", ["shuffle_1_0_5"])
        want = self.segs[0][5]

        def alive(b):
            _, got = b.fetch_all(good)
            check(got == [want], "the connection no longer serves")
        cases = [
            ("an HTTP request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            ("a huge length", struct.pack(">qB", 1 << 40, RPC_REQUEST) + b"\0" * 16),
            ("a length over 16 MiB", struct.pack(">qB", MAX_FRAME + 1, RPC_REQUEST)),
            ("a negative length", struct.pack(">qB", -5, RPC_REQUEST)),
            ("a length below 9", struct.pack(">q", 8) + b"\0" * 8),
            ("an unknown type", frame(42, b"\0" * 12)),
            ("type 13", frame(13, b"\0" * 12)),
            ("a response type", frame(RPC_RESPONSE, struct.pack(">qi", 1, 0))),
            ("a ChunkFetchSuccess", frame(CHUNK_FETCH_SUCCESS, struct.pack(">qi", 1, 0) + b"x")),
            ("a body_size too small", frame(RPC_REQUEST, struct.pack(">qi", 1, len(good) - 1) + good)),
            ("a body_size too large", frame(RPC_REQUEST, struct.pack(">qi", 1, len(good) + 1) + good)),
            ("trailing bytes", frame(CHUNK_FETCH_REQUEST, struct.pack(">qi", 1, 0) + b"\0")),
            ("a short ChunkFetchRequest", frame(CHUNK_FETCH_REQUEST, struct.pack(">q", 1))),
            ("a string past the frame", frame(STREAM_REQUEST, struct.pack(">i", 100) + b"abc")),
            ("a string not UTF-8", frame(STREAM_REQUEST, struct.pack(">i", 2) + b"\xff\xfe")),
            ("a negative string length", frame(STREAM_REQUEST, struct.pack(">i", -1))),
            ("a negative body_size", frame(RPC_REQUEST, struct.pack(">qi", 1, -1) + b"abc")),
            ("a OneWayMessage's body_size too large", frame(ONE_WAY, struct.pack(">i", 5) + b"abc")),
            ("random bytes", bytes([0x9c, 0x41, 0x07, 0xee, 0x10, 0x00, 0x5a, 0x33]) * 8),
        ]
        for what, raw in cases:
            b = self.tcp()
            try:
                b.s.sendall(raw)
            except (ConnectionResetError, BrokenPipeError):
                pass
            check(b.closed(), "%s: the connection was not closed within 10 s" % what)
            b.close()
        # Garbage of a plausible length that never arrives: closed at the frame timeout (30 s) is
        # too long to wait for here; an HTTP request's length is past the cap, closed at once above.
        # Answers that keep the connection.
        b = self.tcp()
        b.send(STREAM_REQUEST, bstr("stream-x"))
        typ, f = b.recv_frame()
        r = BReader(f)
        check(typ == STREAM_FAILURE and r.str() == "stream-x", "StreamRequest answered type %d" % typ)
        r.str()
        r.done()
        alive(b)
        b.send(ONE_WAY, struct.pack(">i", 3) + b"abc")
        alive(b)  # the OneWayMessage got no answer: the next answer is the fetch's
        b.send(MERGED_META_REQUEST, struct.pack(">q", 7) + bstr("srv-open") + struct.pack(">iii", 1, 0, 0))
        typ, f = b.recv_frame()
        check(typ == RPC_FAILURE and struct.unpack_from(">q", f)[0] == 7, "MergedBlockMetaRequest answered type %d" % typ)
        alive(b)
        # A frame split byte by byte.
        raw = frame(RPC_REQUEST, struct.pack(">qi", 99, len(good)) + good)
        b.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for k in range(len(raw)):
            b.s.sendall(raw[k:k + 1])
            time.sleep(0.002)
        typ, f = b.recv_frame()
        r = BReader(f)
        check(typ == RPC_RESPONSE and r.i64() == 99, "a frame sent byte by byte answered type %d" % typ)
        r.i32()
        h = BReader(r.rest())
        check(h.u8() == STREAM_HANDLE, "a frame sent byte by byte")
        sid, n = h.i64(), h.i32()
        check(b.chunk(sid, 0) == ("ok", want), "the chunk of a stream opened byte by byte")
        # UploadStream: RpcFailure, then closed.
        b.send(UPLOAD_STREAM, struct.pack(">qi", 5, 1) + b"m" + struct.pack(">q", 3))
        b.s.sendall(b"xyz")
        typ, f = b.recv_frame()
        check(typ == RPC_FAILURE and struct.unpack_from(">q", f)[0] == 5, "UploadStream answered type %d" % typ)
        check(b.closed(), "UploadStream did not close the connection")
        self.ok("serving: %d hostile frames (HTTP, huge, negative and short lengths, unknown and response types, "
                "body_size and field mismatches, bad strings) close the connection unanswered; StreamRequest "
                "StreamFailure, OneWayMessage dropped, MergedBlockMetaRequest RpcFailure, the connection going "
                "on; a frame split byte by byte served; UploadStream RpcFailure then closed" % len(cases))

    def bounds(self):
        """Section 6: a request frame of 16 MiB exactly is read; stream state of 16 bytes a block,
        16 MiB a connection: a stream past it RpcFailure, the connection going on."""
        b = self.tcp()
        body = b"\0" * (MAX_FRAME - 9 - 4)
        b.s.sendall(frame(ONE_WAY, struct.pack(">i", len(body)) + body))
        _, got = b.fetch_all(open_blocks("srv-open", "e1", ["shuffle_1_0_5"]))
        check(got == [self.segs[0][5]], "the connection after a 16 MiB OneWayMessage")
        fits = ((16 << 20) - 256) // 16
        for n, ok in ((fits + 1, False), (fits, True)):
            rid = b.rpc_raw(fetch_shuffle_blocks("srv-open", "e1", 1, [0], [[0] * n], False))
            try:
                h = BReader(b.rpc_result(rid))
                check(ok, "a stream of %d blocks (%d bytes of state) opened on one connection" % (n, 16 * n + 256))
                check(h.u8() == STREAM_HANDLE, "StreamHandle")
                sid, k = h.i64(), h.i32()
                check(k == n, "num_chunks %d for %d blocks" % (k, n))
                check(b.chunk(sid, 0) == ("ok", self.segs[0][0]), "chunk 0 of the stream at the bound")
            except RpcFailed:
                check(not ok, "a stream of %d blocks (%d bytes of state, the bound 16 MiB) refused" % (n, 16 * n + 256))
        b.close()
        self.ok("serving: a 16 MiB request frame read; stream state: %d blocks (16 MiB) open, one more "
                "RpcFailure, the connection going on" % fits)

    def removal(self):
        c, where = self.open, self.open_where
        self.write(c, where, 5, 0, 3, algo="CRC32C")
        self.write(c, where, 5, 1, 3, algo="none")
        self.write(c, where, 6, 0, 3)
        b = self.tcp()
        ids = ["shuffle_5_0_0.data", "shuffle_5_0_0.index", "shuffle_5_0_0.checksum.CRC32C",
               "shuffle_5_1_0.index", "shuffle_5_9_0.data", "rdd_1_1", "shuffle_5_0_0"]
        r = BReader(b.rpc(remove_blocks("srv-open", "e1", ids)))
        check(r.u8() == BLOCKS_REMOVED, "answer is not BlocksRemoved")
        n = r.i32()
        r.done()
        check(n == 4, "BlocksRemoved %d, want 4 (three ids of map output 0, one of map output 1)" % n)
        left = [f for f in os.listdir(os.path.dirname(where("x"))) if f.startswith("shuffle_5_")]
        check(left == [], "files left after RemoveBlocks: %r" % left)
        sid, k = b.stream(open_blocks("srv-open", "e1", ["shuffle_5_0_0"]))
        check(b.chunk(sid, 0)[0] == "fail", "a removed block served")
        # RemoveOutputs (100): a shuffle, then the whole application.
        want6 = sum(os.path.getsize(where(f)) for f in os.listdir(os.path.dirname(where("x"))) if f.startswith("shuffle_6_"))
        r = BReader(b.rpc(bytes([REMOVE_OUTPUTS]) + bstr("srv-open") + struct.pack(">i", 6)))
        got = (r.i64(), r.i64())
        r.done()
        check(got == (1, want6), "RemoveOutputs shuffle 6: %r, want (1, %d)" % (got, want6))
        # A map output in flight on the socket when the application is removed: aborted, and the
        # executor's registration ends (protocol.md "Lifecycle").
        h = self.open.open(5, 7, 4)
        self.open.batch_opaque(h, [0, 2, 2, 3, 3], b"abc", flags=BATCH_LAST)
        listed = self.open.shuffles("srv-open")
        check(all(s != 6 for s, _, _ in listed) and listed, "ListShuffles after RemoveOutputs: %r" % listed)
        r = BReader(b.rpc(bytes([REMOVE_OUTPUTS]) + bstr("srv-open") + struct.pack(">i", -1)))
        got = (r.i64(), r.i64())
        r.done()
        check(got == (sum(m for _, m, _ in listed), sum(x for _, _, x in listed)),
              "RemoveOutputs -1: %r, ListShuffles said %r" % (got, listed))
        check(self.open.shuffles("srv-open") == [], "shuffles left after RemoveOutputs -1")
        expect_error("Aborted", self.open.commit, h)
        expect_error("FailedPrecondition", self.open.open, 5, 8, 1)
        try:
            b.rpc(open_blocks("srv-open", "e1", ["shuffle_1_0_0"]))
            raise Fail("an application removed with RemoveOutputs -1 still served")
        except RpcFailed:
            pass
        b.close()
        self.ok("serving: RemoveBlocks counts the named ids of map outputs there and removes them whole; "
                "RemoveOutputs (100) of a shuffle and of the application, counts as ListShuffles; the "
                "application is no longer served, its map output in flight Aborted, its executor's registration "
                "ended (OpenMapOutput FailedPrecondition)")

    def connection_cap(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard < 4096 + 200:
            self.suite.skipped.append("serving connection cap (RLIMIT_NOFILE %d)" % hard)
            return
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        before = metric(self.mport, "shuffled_serve_connections_refused_total")
        conns = []
        # The suite's own connections: the idle and stale-stream watchers', once the daemon has
        # seen the others close.
        deadline = time.time() + 20
        while metric(self.mport, "shuffled_serve_connections") != 2:
            check(time.time() < deadline, "shuffled_serve_connections %d, want 2 (the watchers'; %r %r)" %
                  (metric(self.mport, "shuffled_serve_connections"), self.idle[1], self.stale[1]))
            time.sleep(0.1)
        try:
            for _ in range(4096 - 3):
                s = socket.create_connection(self.addr, timeout=20)
                conns.append(s)
            deadline = time.time() + 20
            while metric(self.mport, "shuffled_serve_connections") < 4096 - 1:
                check(time.time() < deadline, "shuffled_serve_connections below %d" % (4096 - 1))
                time.sleep(0.1)
            last = self.tcp()  # the 4096th
            extra = self.tcp()  # one past
            check(extra.closed(), "connection 4097 was not closed at accept")
            check(metric(self.mport, "shuffled_serve_connections_refused_total") == before + 1,
                  "serve_connections_refused_total did not count the refused connection")
            for k in range(0, 4093, 511):
                s = conns[k]
                s.sendall(frame(CHUNK_FETCH_REQUEST, struct.pack(">qi", 1, 0)))
                hdr = s.recv(9, socket.MSG_WAITALL)
                check(len(hdr) == 9 and hdr[8] == CHUNK_FETCH_FAILURE, "idle connection %d no longer served" % k)
                ln = struct.unpack(">q", hdr[:8])[0]
                s.recv(ln - 9, socket.MSG_WAITALL)
            last.close()
            extra.close()
        finally:
            for s in conns:
                s.close()
        self.ok("serving: 4096 idle connections served, the next closed at accept and counted in "
                "shuffled_serve_connections_refused_total")

    def require_auth(self, sock):
        self.sock = sock
        c = self.conn("ra-open", "e1")
        host, port, flags = c.serve
        check(flags == 1 and port > 0, "serve tail %r with --serve-require-auth, want flags 1" % (c.serve,))
        self.addr = (host, port)
        a = self.conn("ra-secret", "e1", secret=b"s3cret")
        where = self.suite.flat(a)
        segs = self.write(a, where, 1, 0, 4)
        b = self.tcp()
        self.refused(b, b.rpc_raw(open_blocks("ra-open", "e1", ["shuffle_1_0_0"])), "authentication required",
                     "a request without a handshake under --serve-require-auth")
        b = self.tcp()
        b.send(CHUNK_FETCH_REQUEST, struct.pack(">qi", 0, 0))
        check(b.closed(), "a ChunkFetchRequest first: not closed (or answered)")
        # Messages that read nothing are answered as ever, and a handshake may follow them.
        b = self.tcp()
        b.send(STREAM_REQUEST, bstr("s"))
        typ, _ = b.recv_frame()
        check(typ == STREAM_FAILURE, "a StreamRequest first under --serve-require-auth: type %d" % typ)
        b.send(ONE_WAY, struct.pack(">i", 1) + b"x")
        b.send(MERGED_META_REQUEST, struct.pack(">q", 7) + bstr("ra-secret") + struct.pack(">iii", 1, 0, 0))
        typ, f = b.recv_frame()
        check(typ == RPC_FAILURE and struct.unpack_from(">q", f)[0] == 7,
              "a MergedBlockMetaRequest first under --serve-require-auth: type %d" % typ)
        sasl_auth(b, "ra-secret", b"s3cret")
        _, got = b.fetch_all(fetch_shuffle_blocks("ra-secret", "e1", 1, [0], [[0, 1, 2, 3]], False))
        check(got == segs, "blocks after SASL under --serve-require-auth")
        b.close()
        c.close()
        a.close()
        self.addr = self.main_addr
        self.ok("serving --serve-require-auth: serve_flags 1; a request first RpcFailure `authentication "
                "required` and closed; a ChunkFetchRequest first closed unanswered; StreamRequest, OneWayMessage, "
                "MergedBlockMetaRequest answered as ever, then SASL and blocks")
