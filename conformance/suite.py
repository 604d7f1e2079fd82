#!/usr/bin/env python3
"""docconform: a client and reader of shuffled written from its documents alone.

It speaks the wire protocol of docs/protocol.md to a running daemon, writes map outputs
(opaque batches inline and through sealed memfds, columnar batches of every column type, read
back as docs/format.md's blocks and kudo tables), commits them, and reads the committed files back as docs/format.md section 9
describes them: the index file, the checksum file (Adler-32, CRC32, CRC32C), the data file and
every partition's codec streams (lz4-java's LZ4Block framing with its xxhash32 checksums,
zstd frames, snappy-java's stream framing, none). Each decoded partition must equal the bytes
sent for it, in send order. It also checks error answers the protocol promises, and Batch's
LAST flag (feature bit 5): the same bytes as without it, a Batch after it refused and its map
output aborted, unknown flag bits refused. It checks the bounds of OpenMapOutput: 4096 map
outputs open on one connection, and (on a daemon started with small ones) `--max-open-outputs`
and `--partition-state-limit` with their Stats figures, each charge given back by Commit, Abort and
the connection's end; and 32 connections writing map outputs of several runs at once. Run as
root with --daemon, it runs peers as other uids against a daemon of its own started with
--allowed-uids: a uid not allowed is refused at accept; RegisterExecutor refuses another uid's
local dir; a hashed sub-dir that is a symbolic link is refused and nothing lands behind it; an
application's uid is fixed by its first registration, and only that uid may list or remove it.
With --daemon it also kills a daemon of its own with a map output in flight and restarts it: the
committed outputs (in Spark local dirs and in its root) are listed, read back and removed, the
registry file names the application, the output in flight is gone with its temp files, and (as
root) the owner is kept. And a daemon whose root disk is below --disk-low-watermark (a size, a
percentage) refuses Open, naming the disk and its free bytes; one started with --retention 1s
removes an application without a connection within its 30 s rounds (about 30 s of the run) and
keeps one still connected. As root able to mount, it gives a daemon an 8 MiB tmpfs root and fills
and frees it: Open refused below --disk-low-watermark, still refused until free space is back
above --disk-high-watermark. With --daemon it acts as a Spark reducer of the block server
(docs/serving.md; serving.py): daemons started with --serve-addr 127.0.0.1:0 (one with
--serve-require-auth) announce their address in Registered's serve tail; OpenBlocks and
FetchShuffleBlocks (single and batch) are fetched chunk by chunk and compared with the data
file's segments; GetLocalDirsForExecutors, DiagnoseCorruption (a flipped byte), RemoveBlocks and
RemoveOutputs; SASL DIGEST-MD5 (qop auth, auth-conf with rc4) and AuthEngine (CTR, GCM) with a
registered secret; hostile frames, the time and
size bounds, 4096 connections, and a restart.

Standard library only, except the `zstandard` package for zstd frames (the zstd cases are
left out, said so, when it is missing, unless --require-zstd). Bare section numbers are
docs/protocol.md's. The protocol is in wire.py, the checksums and codec streams in codec.py,
the committed files and columnar layouts in layout.py (conformance/README.md).

    suite.py --daemon PATH/TO/shuffled      # starts its own daemon in a temp dir
    suite.py --socket S [--allowed-root D]   # a running daemon; D under its --allowed-roots
"""

import argparse
import fcntl
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from fail import Fail, check
from wire import (
    BATCH, BATCH_LAST, CODE, COMMIT, Conn, DaemonError, ERROR, FEAT_COLUMNAR, FEAT_CUDA, FEAT_KUDO,
    FEAT_LAST, FEAT_LIFECYCLE, FEAT_MEMFD, KIND_COLUMNAR, KIND_OPAQUE, LIST_SHUFFLES, OPEN, PING,
    PLANE_INLINE, PLANE_MEMFD, REMOVE_APP, REMOVE_SHUFFLE, RESPONSE, Reader, STATS, expect_error,
    i32, i64, lst, sealed_memfd, string, u16, u32, u64, u8,
)
from codec import zstandard
from serving import Serving
from layout import (
    COLUMNS, NESTED, TABLES, build_columnar, build_nested, decode_blocks, decode_kudo,
    decode_nested_blocks, decode_nested_kudo, make_bytes, read_output, read_registry, spark_path,
)


# ---------------------------------------------------------------------------
# Workloads

RECORD = 1 << 20  # the daemon's record size (protocol.md, Batch)


def make_batch(rng, nparts, lo, hi, sizes):
    """A batch whose non-empty partitions lie in [lo, hi); returns (offsets, payload, slices)."""
    slices = []
    for p in range(nparts):
        n = 0
        if lo <= p < hi and (p == lo or rng.random() < 0.8):
            n = rng.choice(sizes)
        slices.append(make_bytes(rng, n) if n else b"")
    offs = [0]
    for s in slices:
        offs.append(offs[-1] + len(s))
    return offs, b"".join(slices), slices


def count_runs(batches):
    """Runs per the docs: a batch whose first (non-empty) partition comes before the previous
    batch's last one starts a new run."""
    runs, last = 0, None
    for slices in batches:
        ne = [p for p, s in enumerate(slices) if s]
        if not ne:
            continue
        if last is None or ne[0] < last:
            runs += 1
        last = ne[-1]
    return runs


class Suite:
    def __init__(self, args):
        self.args = args
        self.sock = args.socket
        self.rng = random.Random(args.seed)
        self.passed = []
        self.skipped = []

    def ok(self, what):
        self.passed.append(what)
        if self.args.verbose:
            print("ok   " + what)

    def conn(self, app=None, execu="exec-1", **kw):
        c = Conn(self.sock)
        c.do_hello()
        if app:
            c.dirs = c.register(app, execu, **kw)
        return c

    # --- one map output, written and read back -----------------------------

    def map_output(self, c, where, shuffle, mapid, nparts, codec, algo, plan, block_size=0,
                   level=0, plane=PLANE_INLINE, pipeline=False, last=False, made=None):
        """plan: list of (lo, hi, sizes) per batch. Writes, commits, reads back, compares.
        pipeline: every Batch and the Commit are sent before any response is read (memfd
        batches too, their descriptors closed right after sending); plane memfd: every other
        batch through a memfd. last: the final Batch carries LAST. made: the batches
        (make_batch's results) to send instead of making them from plan."""
        h = c.open(shuffle, mapid, nparts, codec=codec, checksum=algo, block_size=block_size, level=level)
        if made is None:
            made = [make_batch(self.rng, nparts, lo, hi, sizes) for lo, hi, sizes in plan]
        batches = []
        rids = []
        for k, (offs, payload, slices) in enumerate(made):
            flags = BATCH_LAST if last and k == len(made) - 1 else 0
            if plane == PLANE_MEMFD and k % 2 == 0:
                pad = (0, 4096, 100)[(k // 2) % 3]  # offsets need no alignment
                fd = sealed_memfd(payload, pad=pad)
                if pipeline:
                    rids.append(c.send_batch(h, offs, payload, PLANE_MEMFD, (fd, pad), flags))
                else:
                    c.batch_opaque(h, offs, payload, plane=PLANE_MEMFD, memfd=(fd, pad), flags=flags)
                os.close(fd)  # sent (or accepted): the client may close its descriptor
            elif pipeline:
                rids.append(c.send_batch(h, offs, payload, flags=flags))
            else:
                c.batch_opaque(h, offs, payload, flags=flags)
            batches.append(slices)
        if pipeline:
            crid = c.send(COMMIT, u64(h))
            for rid in reversed(rids):
                c.result(BATCH, rid).done()
            res = c.commit_result(c.result(COMMIT, crid))
        else:
            res = c.commit(h)
        self.verify_output(where, shuffle, mapid, nparts, codec, algo, block_size, batches, res)
        return h, res

    def verify_output(self, where, shuffle, mapid, nparts, codec, algo, block_size, batches, res):
        """Checks a CommitResult and the committed files against the batches' slices, in send
        order: runs, lengths, checksums, the decoded partitions and their codec streams."""
        sent = [[s for s in (slices[p] for slices in batches) if s] for p in range(nparts)]
        check(res["existing"] == 0, "existing = 1 for a new map output")
        check(len(res["lengths"]) == nparts, "lengths count")
        check(len(res["checksums"]) == (0 if algo == "none" else nparts), "checksums count")
        want_runs = count_runs(batches)
        check(res["runs"] == want_runs, "runs %d, want %d" % (res["runs"], want_runs))
        bs = block_size or (32 << 10)
        parts, streams = read_output(where, shuffle, mapid, nparts, codec, algo, bs, res)
        for p in range(nparts):
            want = b"".join(sent[p])
            check(parts[p] == want, "partition %d: decoded %d bytes differ from the %d sent" % (p, len(parts[p]), len(want)))
            if not want:
                check(res["lengths"][p] == 0, "empty partition %d has %d bytes" % (p, res["lengths"][p]))
            if streams[p] is not None:
                # One stream per (batch, partition) slice, a slice over the record size cut in several.
                want_streams = sum((len(s) + RECORD - 1) // RECORD for s in sent[p])
                check(streams[p] == want_streams,
                      "partition %d: %d codec streams, want %d (slices %s)" % (p, streams[p], want_streams, [len(s) for s in sent[p]]))

    def flat(self, c):
        d = c.dirs
        check(len(d) == 1, "Registered dirs %r for an executor without local dirs" % d)
        return lambda name: os.path.join(d[0], name)

    # --- the cases -------------------------------------------------------------

    def run(self):
        self.serving_part = None
        try:
            if self.args.only:
                self.handshake()
                getattr(self, self.args.only)()
            else:
                self.all_cases()
        except BaseException:
            if self.serving_part:
                self.serving_part.stop_all(list(self.serving_part.procs))
            raise
        if self.serving_part:
            self.serving_part.finish()

    def all_cases(self):
        self.handshake()
        self.outputs()
        self.memfd()
        self.local_dirs()
        self.errors()
        self.last_outputs()
        self.after_last()
        self.batch_flags()
        self.register_errors()
        self.lifecycle()
        self.many_connections()
        self.connection_bound()
        self.small_frames()
        self.open_bounds()
        self.uid_shares()
        self.peer_uids()
        self.restart()
        self.serving()
        self.watermark()
        self.retention()
        self.high_watermark()

    def handshake(self):
        c = Conn(self.sock)
        h = c.do_hello()
        check(h["features"] & FEAT_LIFECYCLE, "no lifecycle feature bit")
        self.features = h["features"]
        # Pipelined requests, answered by request id.
        ids = [c.send(PING, b""), c.send(STATS, b""), c.send(PING, b"")]
        for rid, typ in zip(reversed(ids), (PING, STATS, PING)[::-1]):
            c.result(typ, rid)
        st = c.stats()
        for name in ("bytes_in_flight", "bytes_in_flight_limit", "open_map_outputs", "connections",
                     "partition_state_bytes", "partition_state_limit", "commits_total", "aborts_total"):
            check(name in st, "Stats lacks %s" % name)
        # Ping needs no registration; Open does.
        expect_error("FailedPrecondition", c.open, 1, 1, 4)
        c.close()
        self.ok("handshake: ServerHello fields, pipelined Ping/Stats, Stats names, Open before Register")
        check(h["features"] & FEAT_LAST, "ServerHello features %#x lack bit 5 (last-batch)" % h["features"])
        self.ok("handshake: ServerHello announces feature bit 5 (last-batch)")

        # Section 9's bytes exactly (Hello, then an Open before registering).
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.sock)
        s.sendall(bytes.fromhex("5348010000000000 0100000009000000 010001000300 6a766d"))
        hdr = s.recv(16, socket.MSG_WAITALL)
        check(hdr[:2] == b"SH" and struct.unpack_from("<HHHI", hdr, 2) == (0x8001, 0, 0, 1), "section 9 Hello answer %r" % hdr)
        s.recv(struct.unpack_from("<I", hdr, 12)[0], socket.MSG_WAITALL)
        s.close()
        self.ok("handshake: section 9's Hello bytes")

        # Version mismatch: Error then close.
        c = Conn(self.sock)
        e = expect_error("VersionMismatch", c.do_hello, lo=2, hi=3)
        self.assert_closed(c)
        # A frame other than Hello first.
        c = Conn(self.sock)
        expect_error("FailedPrecondition", c.ping)
        self.assert_closed(c)
        # Request id 0: Error with id 0, then close.
        c = Conn(self.sock)
        c.do_hello()
        c.send(PING, b"", rid=0)
        typ, rid, payload = c.recv_frame()
        check(typ == ERROR and rid == 0, "request id 0 answered type %#x id %d" % (typ, rid))
        check(struct.unpack_from("<I", payload)[0] == CODE["InvalidArgument"], "request id 0: code")
        self.assert_closed(c)
        self.ok("handshake: VersionMismatch (%s), non-Hello first, request id 0 close the connection" % e.message[:40])

        # Section 3's order of checks: a known request type whose payload does not decode
        # fails at step 5 (InvalidArgument) before step 6 (not Hello: FailedPrecondition).
        c = Conn(self.sock)
        c.send(OPEN, b"\x01\x02\x03")
        typ, rid, payload = c.recv_frame()
        check(typ == ERROR and struct.unpack_from("<I", payload)[0] == CODE["InvalidArgument"],
              "a malformed OpenMapOutput first: type %#x code %r, want InvalidArgument" % (typ, payload[:4]))
        self.assert_closed(c)
        # A response type first: step 3, FailedPrecondition.
        c = Conn(self.sock)
        c.send(PING | 0x8000, b"")
        typ, rid, payload = c.recv_frame()
        check(typ == ERROR and struct.unpack_from("<I", payload)[0] == CODE["FailedPrecondition"],
              "a response type first: type %#x code %r, want FailedPrecondition" % (typ, payload[:4]))
        self.assert_closed(c)
        self.ok("handshake: the first frame's checks in section 3's order")

        if getattr(self.args, "hello_timeout", None):
            # Section 8: no whole Hello within --hello-timeout: an id-0 InvalidArgument naming it.
            c = Conn(self.sock)
            t0 = time.time()
            c.s.settimeout(self.args.hello_timeout + 20)
            typ, rid, payload = c.recv_frame()
            waited = time.time() - t0
            code = struct.unpack_from("<I", payload)[0] if typ == ERROR else None
            check(typ == ERROR and rid == 0 and code == CODE["InvalidArgument"] and b"--hello-timeout" in payload,
                  "a silent connection got type %#x id %d %r, want an id-0 InvalidArgument naming --hello-timeout" % (typ, rid, payload[:80]))
            check(waited >= self.args.hello_timeout * 0.9, "a silent connection closed after %.1f s, before --hello-timeout" % waited)
            self.assert_closed(c)
            self.ok("handshake: a connection silent for --hello-timeout (%g s) is closed with an id-0 InvalidArgument" % self.args.hello_timeout)

    def send_oversized(self, c, typ, payload):
        """Sends a frame the daemon refuses by its header: the daemon may close the
        connection before the payload is all written (EPIPE, ECONNRESET), which is what
        the check expects; assert_closed follows."""
        try:
            c.send(typ, payload)
        except (ConnectionResetError, BrokenPipeError):
            pass

    def assert_closed(self, c):
        try:
            while True:
                c.s.settimeout(10)
                if not c.s.recv(65536):
                    break
        except (ConnectionResetError, BrokenPipeError):
            pass
        c.close()

    def outputs(self):
        nparts = 300
        c = self.conn("app-docconform", "exec-1")
        where = self.flat(c)
        small = [1, 7, 100, 1000, 5000]
        plan = [
            (0, 300, small),            # run 1: everything
            (150, 300, small),          # backwards: run 2
            (0, 120, small),            # backwards: run 3
            (120, 121, [2 * RECORD + 12345]),  # a slice over the record size, same run
            (120, 140, small),          # starts at the previous batch's last partition: same run
            (0, 0, small),              # an empty batch
            (10, 290, small),           # backwards: run 4
        ]
        cases = [("lz4", "ADLER32", 0, 0), ("lz4", "CRC32C", 4096, 0), ("none", "CRC32", 0, 0),
                 ("lz4", "none", 1 << 16, 0), ("snappy", "ADLER32", 0, 0), ("snappy", "CRC32C", 5000, 0),
                 ("zstd", "CRC32", 0, 0), ("zstd", "CRC32C", 0, 5), ("zstd", "ADLER32", 0, 0)]
        for m, (codec, algo, bs, level) in enumerate(cases):
            if codec == "zstd" and zstandard is None:
                if self.args.require_zstd:
                    raise Fail("zstandard is not installed")
                self.skipped.append("zstd %s (no zstandard package)" % algo)
                continue
            _, res = self.map_output(c, where, 1, m, nparts, codec, algo, plan, block_size=bs, level=level,
                                     pipeline=m % 2 == 1)
            self.ok("map output %s/%s block_size %d level %d%s: %d partitions, %d runs, %d bytes read back"
                    % (codec, algo, bs, level, ", pipelined" if m % 2 else "", nparts, res["runs"], sum(res["lengths"])))
        # A second attempt of a committed (shuffle, map): existing = 1, the first one's lengths win.
        h = c.open(1, 0, nparts, codec="lz4", checksum="ADLER32")
        offs, payload, _ = make_batch(self.rng, nparts, 0, nparts, small)
        c.batch_opaque(h, offs, payload)
        base = where("shuffle_1_0_0.data")
        before = open(base, "rb").read()
        res = c.commit(h)
        check(res["existing"] == 1 and res["runs"] == 0, "second commit: existing %d runs %d" % (res["existing"], res["runs"]))
        check(open(base, "rb").read() == before, "second commit changed the data file")
        read_output(where, 1, 0, nparts, "lz4", "ADLER32", 32 << 10, res)
        expect_error("NotFound", c.commit, h)
        self.ok("second commit of a map output: existing = 1, first attempt's files and lengths; handle gone")
        # Codec and checksum names are case-insensitive; the checksum file takes Spark's spelling.
        h = c.open(2, 5, 3, codec="LZ4", checksum="crc32c")
        c.batch_opaque(h, [0, 1, 1, 3], b"abc")
        parts, _ = read_output(where, 2, 5, 3, "lz4", "CRC32C", 32 << 10, c.commit(h))
        check(parts == [b"a", b"", b"bc"], "LZ4/crc32c output %r" % parts)
        # A map output with only empty partitions, and one of 1 partition.
        self.map_output(c, where, 2, 0, 5, "lz4", "ADLER32", [(0, 0, small)])
        self.map_output(c, where, 2, 1, 1, "zstd" if zstandard else "lz4", "CRC32", [(0, 1, small), (0, 1, small)])
        self.ok("map outputs with only empty partitions, and with 1 partition")
        if self.features & FEAT_COLUMNAR:
            self.columnar(c, where)
            self.columnar_nested(c, where)
        else:
            self.skipped.append("columnar (no feature bit 2)")
        c.close()

    def memfd(self):
        if not self.features & FEAT_MEMFD:
            self.skipped.append("memfd (no feature bit 0)")
            return
        c = self.conn("app-docconform", "exec-memfd")
        where = self.flat(c)
        plan = [(0, 64, [10, 300, 4000]), (32, 64, [10, 300]), (0, 64, [5000, 70000]), (0, 16, [123]),
                (16, 64, [9, 99]), (10, 20, [1000])]
        _, res = self.map_output(c, where, 3, 0, 64, "lz4", "CRC32", plan, plane=PLANE_MEMFD)
        # Unsealed memfd, memfd smaller than offset + length: InvalidArgument, map output aborted.
        for seal, pad, short, what in ((False, 0, 0, "unsealed"), (True, 0, 10, "too small")):
            h = c.open(3, 1 + short, 4)
            payload = b"abcdefgh" * 100
            fd = sealed_memfd(payload[:len(payload) - short], pad=pad, seal=seal)
            expect_error("InvalidArgument", c.batch_opaque, h, [0, 100, 200, 300, 800], payload,
                         plane=PLANE_MEMFD, memfd=(fd, 0))
            os.close(fd)
            expect_error("Aborted", c.commit, h)  # the Commit takes the handle
            expect_error("NotFound", c.commit, h)
        # One memfd passed twice, two regions of it; then a memfd whose region has a hole.
        h = c.open(3, 20, 2, codec="none", checksum="CRC32")
        fd = sealed_memfd(b"first-aa" + b"second-bb")
        c.batch_opaque(h, [0, 5, 8], b"first-aa", plane=PLANE_MEMFD, memfd=(fd, 0))
        c.batch_opaque(h, [0, 6, 9], b"second-bb", plane=PLANE_MEMFD, memfd=(fd, 8))
        os.close(fd)
        res = c.commit(h)
        parts, _ = read_output(where, 3, 20, 2, "none", "CRC32", 0, res)
        check(parts == [b"firstsecond", b"-aa-bb"], "one memfd twice: %r" % parts)
        h = c.open(3, 21, 1)
        fd = os.memfd_create("docconform-sparse", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
        os.ftruncate(fd, 1 << 16)
        os.pwrite(fd, b"x" * 100, 0)  # the first page written, the rest a hole
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        expect_error("InvalidArgument", c.call, BATCH, u64(h) + u8(KIND_OPAQUE) + u8(PLANE_MEMFD) + b"\0\0" +
                     lst([0, 1 << 16], i64) + i64(0) + i64(1 << 16), fd=fd)
        os.close(fd)
        expect_error("Aborted", c.commit, h)
        # An FD flag on a frame other than a memfd Batch: InvalidArgument, connection stays.
        fd = sealed_memfd(b"x")
        expect_error("InvalidArgument", c.call, PING, b"", fd=fd)
        os.close(fd)
        c.ping()
        c.close()
        self.ok("memfd data plane: sealed memfds at offsets 0/4096/100 mixed with inline, %d bytes; "
                "unsealed and too-small memfds refused; FD flag on Ping refused" % sum(res["lengths"]))

    def local_dirs(self):
        """Spark local dirs: files land where ExecutorDiskUtils hashes them."""
        base = self.args.allowed_root
        if not base:
            self.skipped.append("Spark local dirs (no --allowed-root)")
            return
        dirs = [os.path.join(base, "blockmgr-%d" % i) for i in range(3)]
        for d in dirs:
            os.makedirs(d, exist_ok=True)
        sub = 7
        c = self.conn("app-localdirs", "exec-9", local_dirs=dirs, sub_dirs=sub)
        check([os.path.realpath(d) for d in c.dirs] == [os.path.realpath(d) for d in dirs],
              "Registered dirs %r, want %r" % (c.dirs, dirs))
        where = lambda name: spark_path(dirs, sub, name)
        for m, algo in enumerate(("ADLER32", "CRC32", "CRC32C")):
            self.map_output(c, where, 4, 100 + m, 40, "lz4", algo, [(0, 40, [10, 500]), (5, 30, [77])])
            for ext in (".data", ".index", ".checksum." + algo):
                check(os.path.exists(where("shuffle_4_%d_0%s" % (100 + m, ext))), "hashed path of %s" % ext)
        c.close()
        self.ok("Spark local dirs: 3 dirs x %d sub-dirs, data/index/checksum at ExecutorDiskUtils' paths" % sub)

    def errors(self):
        c = self.conn("app-docconform", "exec-err")
        where = self.flat(c)
        n = 50
        # A map output that stays open across every error below, then commits.
        good = c.open(5, 0, n, codec="lz4", checksum="CRC32")
        sent = [[] for _ in range(n)]

        def good_batch(lo, hi):
            offs, payload, slices = make_batch(self.rng, n, lo, hi, [3, 300])
            c.batch_opaque(good, offs, payload)
            for p, s in enumerate(slices):
                if s:
                    sent[p].append(s)

        good_batch(0, n)
        expect_error("AlreadyExists", c.register, "app-docconform", "exec-err")
        # Open: num_partitions out of range, bad codec and parameters.
        expect_error("InvalidArgument", c.open, 5, 1, 0, field="num_partitions")
        expect_error("InvalidArgument", c.open, 5, 1, (1 << 20) + 1, field="num_partitions")
        expect_error("InvalidArgument", c.open, -1, 1, 4, field="shuffle_id")
        expect_error("InvalidArgument", c.open, 5, -1, 4, field="map_id")
        expect_error("Unsupported", c.open, 5, 1, 4, codec="bogus", field="bogus")
        expect_error("Unsupported", c.open, 5, 1, 4, checksum="MD5", field="MD5")
        expect_error("InvalidArgument", c.open, 5, 1, 4, codec="zstd", block_size=4096, field="block_size")
        expect_error("InvalidArgument", c.open, 5, 1, 4, codec="lz4", level=3, field="level")
        expect_error("InvalidArgument", c.open, 5, 1, 4, codec="lz4", block_size=32, field="block_size")
        expect_error("InvalidArgument", c.open, 5, 1, 4, codec="zstd", level=23, field="level")
        # kudo: opaque kind, a type not written yet, a name that is no type; a batch off the schema.
        if self.features & FEAT_KUDO:
            expect_error("InvalidArgument", c.open, 5, 1, 4, kind=KIND_OPAQUE, fmt=1, schema=[])
            expect_error("Unsupported", c.open, 5, 1, 4, kind=KIND_COLUMNAR, fmt=1,
                         schema=[("a", "int"), ("xs", "array<varchar(3)>")], field="xs")
            expect_error("InvalidArgument", c.open, 5, 1, 4, kind=KIND_COLUMNAR, fmt=1,
                         schema=[("q", "integr")], field="q")
            h = c.open(5, 1, 1, kind=KIND_COLUMNAR, fmt=1, schema=[("a", " INT "), ("b", "bigint")])
            head = u64(h) + u8(KIND_COLUMNAR) + u8(PLANE_INLINE) + b"\0\0"
            col = lambda typ, name, d: u8(typ) + u8(0) + u16(0) + i32(0) + i32(0) + string(name) + i64(0) * 4 + i64(d) + i64(8)
            expect_error("InvalidArgument", c.call, BATCH, head + i64(2) + u32(2) + col(4, "a", 0) + col(4, "b", 0) +
                         lst([0, 2], i64) + u32(16) + b"\1" * 16, field="b")
            expect_error("Aborted", c.commit, h)
        good_batch(n // 2, n)
        # Batch errors: each aborts its own map output only.
        bad_cases = [
            ("FailedPrecondition", ("partition_offsets", "num_partitions"), [0, 1, 2, 4], b"abcd"),  # 3 partitions for 4
            ("FailedPrecondition", ("partition_offsets", "num_partitions"), [0, 1, 2, 3, 4, 4], b"abcd"),  # 5 partitions for 4
            ("InvalidArgument", "partition_offsets", [0, 3, 2, 3, 4], b"abcd"),       # decreasing
            ("InvalidArgument", "partition_offsets", [1, 2, 3, 3, 4], b"abcd"),       # [0] != 0
            ("InvalidArgument", "partition_offsets", [0, 1, 2, 3, 3], b"abcd"),       # last != payload length
            ("InvalidArgument", "partition_offsets", [0, -1, 2, 3, 4], b"abcd"),      # negative
        ]
        for k, (code, field, offs, payload) in enumerate(bad_cases):
            h = c.open(5, 10 + k, 4)
            expect_error(code, c.batch_opaque, h, offs, payload, field=field)
            expect_error("Aborted", c.batch_opaque, h, [0, 1, 2, 3, 4], b"abcd")
            expect_error("Aborted", c.batch_opaque, h, [0, 1, 2, 3, 4], b"abcd")
            if k % 2:
                expect_error("Aborted", c.commit, h)  # the Commit takes the handle
                expect_error("NotFound", c.commit, h)
            else:
                c.abort(h)  # Abort of a map output aborted by an error answers Aborted (the response)
            expect_error("NotFound", c.abort, h)
            good_batch(k * 7, n)
        # Batch kind other than the map output's: FailedPrecondition.
        h = c.open(5, 20, 4)
        head = u64(h) + u8(KIND_COLUMNAR) + u8(PLANE_INLINE) + b"\0\0"
        col = i64(4) + u32(0) + lst([0, 1, 2, 3, 4], i64) + u32(0)
        expect_error("FailedPrecondition", c.call, BATCH, head + col)
        c.abort(h)
        # A columnar batch of 2 partitions for 4.
        h = c.open(5, 22, 4, kind=KIND_COLUMNAR)
        head = u64(h) + u8(KIND_COLUMNAR) + u8(PLANE_INLINE) + b"\0\0"
        expect_error("FailedPrecondition", c.call, BATCH, head + i64(0) + u32(0) + lst([0, 0, 0], i64) + u32(0),
                     field=("partition_rows", "num_partitions"))
        expect_error("Aborted", c.commit, h)
        # Unknown handles; unknown plane; unknown type; a response type; trailing bytes.
        expect_error("NotFound", c.commit, 0xDEADBEEF)
        expect_error("NotFound", c.abort, 0xDEADBEEF)
        expect_error("InvalidArgument", c.commit, 0)
        h = c.open(5, 21, 1)
        expect_error("Unsupported", c.call, BATCH, u64(h) + u8(1) + u8(9) + b"\0\0" + lst([0, 1], i64) + u32(1) + b"x")
        expect_error("Aborted", c.commit, h)  # a Batch that does not decode aborts the handle it names
        h = c.open(5, 24, 1)
        expect_error("InvalidArgument", c.call, BATCH, u64(h) + u8(1) + u8(1) + b"\0\0" + lst([0, 1], i64) + u32(1) + b"xy")
        expect_error("Aborted", c.commit, h)
        if not self.features & FEAT_CUDA:  # CUDA IPC in a CPU build
            cuda = b"\0" * 64 + u32(0) + u32(0) + i64(0) + i64(1)
            h = c.open(5, 23, 1)
            expect_error("Unsupported", c.call, BATCH, u64(h) + u8(1) + u8(3) + b"\0\0" + lst([0, 1], i64) + cuda)
            expect_error("Aborted", c.commit, h)
        expect_error("Unsupported", c.call, 0x0100, b"whatever")
        expect_error("InvalidArgument", c.call, PING | RESPONSE, b"")
        expect_error("InvalidArgument", c.call, PING, b"x")
        c.ping()
        good_batch(0, 10)
        res = c.commit(good)
        parts, _ = read_output(where, 5, 0, n, "lz4", "CRC32", 32 << 10, res)
        for p in range(n):
            check(parts[p] == b"".join(sent[p]), "surviving map output: partition %d differs" % p)
        # Connection end aborts what is open on it; other connections' outputs are not touched.
        other = self.conn("app-docconform", "exec-err2")
        keep = other.open(5, 30, 3)
        other.batch_opaque(keep, [0, 1, 2, 3], b"xyz")
        h = c.open(5, 31, 3)
        c.batch_opaque(h, [0, 1, 2, 3], b"abc")
        aborts = other.stats()["aborts_total"]
        c.close()
        deadline = time.time() + 10
        while other.stats()["aborts_total"] < aborts + 1:
            check(time.time() < deadline, "closing a connection did not abort its map output")
            time.sleep(0.05)
        check(not os.path.exists(where("shuffle_5_31_0.index")), "closed connection's output committed")
        res = other.commit(keep)
        parts, _ = read_output(self.flat(other), 5, 30, 3, "lz4", "ADLER32", 32 << 10, res)
        check(parts == [b"x", b"y", b"z"], "other connection's map output after a close")
        other.close()
        self.ok("errors: Open bounds name their field, bad offsets abort only their map output "
                "(Aborted, then Abort answers, then NotFound), unknown type/plane/handle, response "
                "type, trailing bytes; an open map output and the connection survive all of them; "
                "a closed connection aborts its map outputs only")

    # --- Batch.flags: LAST (protocol.md, Batch, the paragraph on LAST) -------------

    def last_outputs(self):
        """LAST "is a hint for speed and changes no byte of the output": each plan is sent to two
        map outputs, without and with LAST on its final batch; their files and CommitResults must
        be the same bytes, and decode to the batches' slices."""
        c = self.conn("app-last", "exec-1")
        where = self.flat(c)
        n = 40
        full = [(0, n, [1, 40, 900, 6000])] * 4  # every batch spans all partitions: 4 runs
        # zstd (C decoder): ~7 MB of runs, then a LAST batch of one 2 MiB slice (3 records),
        # so that merging may start while the last batch is still being compressed.
        zstd, big = ("zstd", [1, 900, 30000, 150000]) if zstandard else ("lz4", [1, 40, 900, 6000])
        cases = [  # codec, checksum, block_size, plane, pipeline, plan; memfd: batches 0, 2, 4 through memfds
            ("lz4", "CRC32C", 4096, PLANE_INLINE, False, full),                     # LAST inline
            (zstd, "CRC32", 0, PLANE_MEMFD, True, [(0, n, big)] * 4 + [(n // 2, n // 2 + 1, [2 * RECORD + 5])]),
            ("snappy", "ADLER32", 0, PLANE_INLINE, True, full + [(0, 0, [1])]),     # LAST with no non-empty slice
            ("lz4", "CRC32", 0, PLANE_MEMFD, False, full[:1]),                      # 1 run, LAST memfd
            ("none", "none", 0, PLANE_INLINE, False, [(0, 0, [1])]),                # only an empty LAST batch
        ]
        if not self.features & FEAT_MEMFD:
            cases = [x[:3] + (PLANE_INLINE,) + x[4:] for x in cases]
        what = []
        for m, (codec, algo, bs, plane, pipeline, plan) in enumerate(cases):
            made = [make_batch(self.rng, n, lo, hi, sizes) for lo, hi, sizes in plan]
            res = []
            for mapid, last in ((2 * m, False), (2 * m + 1, True)):
                _, r = self.map_output(c, where, 11, mapid, n, codec, algo, None, block_size=bs, plane=plane,
                                       pipeline=pipeline, last=last, made=made)
                res.append(r)
            check(res[0] == res[1], "%s/%s: CommitResult with LAST %r differs from without %r" % (codec, algo, res[1], res[0]))
            exts = [".data", ".index"] + ([".checksum." + algo] if algo != "none" else [])
            for ext in exts:
                a, b = (open(where("shuffle_11_%d_0%s" % (mapid, ext)), "rb").read() for mapid in (2 * m, 2 * m + 1))
                check(a == b, "%s/%s: %s file with LAST (%d bytes) differs from without (%d bytes)" % (codec, algo, ext, len(b), len(a)))
            what.append("%s/%s %s%s %d run%s" % (codec, algo, "memfd" if plane == PLANE_MEMFD else "inline",
                                                   " pipelined" if pipeline else "", res[0]["runs"], "" if res[0]["runs"] == 1 else "s"))
        c.close()
        self.ok("LAST on the final batch changes no byte: data, index, checksum files and CommitResult equal "
                "to the same batches without LAST, read back (%s; an empty LAST batch twice)" % ", ".join(what))

    def after_last(self):
        """A Batch on the handle after one with LAST is FailedPrecondition and aborts the map
        output, as any failed batch does: later Batches get Aborted, Commit gets Aborted and takes
        the handle, nothing of it is committed; other map outputs and the connection go on."""
        c = self.conn("app-last", "exec-2")
        where = self.flat(c)
        n, abc = 6, [0, 1, 2, 3, 4]
        keep = c.open(13, 0, n, codec="lz4", checksum="CRC32")
        kept = []

        def keep_batch(lo, hi, flags=0):
            offs, payload, slices = make_batch(self.rng, n, lo, hi, [5, 700])
            c.batch_opaque(keep, offs, payload, flags=flags)
            kept.append(slices)

        keep_batch(0, n)
        aborts = c.stats()["aborts_total"]
        # LAST, then a Batch: FailedPrecondition; then Aborted as often as sent; Commit Aborted, then NotFound.
        h = c.open(12, 0, 4)
        c.batch_opaque(h, abc, b"abcd", flags=BATCH_LAST)
        expect_error("FailedPrecondition", c.batch_opaque, h, abc, b"efgh")
        c.ping()
        keep_batch(2, n)
        expect_error("Aborted", c.batch_opaque, h, abc, b"ijkl")
        expect_error("Aborted", c.batch_opaque, h, [0] * 5, b"", flags=BATCH_LAST)
        expect_error("Aborted", c.commit, h)  # the Commit takes the handle
        expect_error("NotFound", c.commit, h)
        expect_error("NotFound", c.batch_opaque, h, abc, b"mnop")
        # A LAST batch with no non-empty slice, then a Batch (memfd when served, LAST itself):
        # FailedPrecondition; Abort answers Aborted (the response) and takes the handle.
        h = c.open(12, 1, 4)
        c.batch_opaque(h, [0] * 5, b"", flags=BATCH_LAST)
        if self.features & FEAT_MEMFD:
            fd = sealed_memfd(b"abcd")
            expect_error("FailedPrecondition", c.batch_opaque, h, abc, b"abcd", plane=PLANE_MEMFD, memfd=(fd, 0),
                         flags=BATCH_LAST)
            os.close(fd)
        else:
            expect_error("FailedPrecondition", c.batch_opaque, h, abc, b"abcd", flags=BATCH_LAST)
        c.abort(h)
        expect_error("NotFound", c.abort, h)
        # Pipelined: LAST batch, Batch, Commit before any answer; applied in the order sent.
        h = c.open(12, 2, 4)
        rids = [c.send_batch(h, abc, b"abcd", flags=BATCH_LAST), c.send_batch(h, abc, b"efgh"), c.send(COMMIT, u64(h))]
        expect_error("Aborted", c.result, COMMIT, rids[2])
        expect_error("FailedPrecondition", c.result, BATCH, rids[1])
        c.result(BATCH, rids[0]).done()
        keep_batch(0, 3, flags=BATCH_LAST)
        res = c.commit(keep)
        self.verify_output(where, 13, 0, n, "lz4", "CRC32", 0, kept, res)
        self.assert_gone(c, where, "app-last", 12, aborts + 3)
        c.close()
        self.ok("a Batch after a LAST one (inline, memfd, pipelined): FailedPrecondition, then Aborted; Commit "
                "Aborted or Abort answered, then NotFound; no file left (ShuffleList), aborts_total counts them; "
                "the connection and its other map output go on")

    def assert_gone(self, c, where, app, shuffle, aborts):
        """Every map output of shuffle was aborted: nothing of it is committed and no file of it
        stays (ShuffleList counts temp files of outputs in flight too); aborts_total has reached
        aborts. Polled: the docs do not say that files go before the answer."""
        d = os.path.dirname(where("x"))
        deadline = time.time() + 10
        while True:
            left = [f for f in os.listdir(d) if f.startswith("shuffle_%d_" % shuffle)]
            r = c.call(LIST_SHUFFLES, string(app))
            got = {s: (m, b) for s, m, b in r.lst(lambda: (r.i32(), r.i64(), r.i64()))}
            r.done()
            st = c.stats()["aborts_total"]
            if not left and got.get(shuffle, (0, 0)) == (0, 0) and st >= aborts:
                return
            check(time.time() < deadline, "10 s after aborting shuffle %d's map outputs: files %s, ShuffleList %r, "
                  "aborts_total %d, want >= %d" % (shuffle, left, got.get(shuffle), st, aborts))
            time.sleep(0.05)

    def batch_flags(self):
        """Batch.flags bits other than LAST, and Batch's reserved byte, must be 0: a malformed
        Batch is a message error (InvalidArgument, the connection stays) that aborts the open map
        output its first 8 bytes name."""
        c = self.conn("app-last", "exec-3")
        where = self.flat(c)
        keep = c.open(14, 0, 3)
        c.batch_opaque(keep, [0, 1, 2, 3], b"xyz")
        aborts = c.stats()["aborts_total"]
        cases = [(0x02, 0, PLANE_INLINE), (0x03, 0, PLANE_INLINE), (0x80, 0, PLANE_INLINE), (0, 1, PLANE_INLINE)]
        if self.features & FEAT_MEMFD:
            cases.append((0x02, 0, PLANE_MEMFD))
        for m, (flags, reserved, plane) in enumerate(cases):
            h = c.open(15, m, 3)
            if m % 2:
                c.batch_opaque(h, [0, 1, 2, 3], b"abc")
            fd = sealed_memfd(b"abc") if plane == PLANE_MEMFD else None
            expect_error("InvalidArgument", c.batch_opaque, h, [0, 1, 2, 3], b"abc", plane=plane, memfd=(fd, 0),
                         flags=flags, reserved=reserved, field="flags" if flags else "reserved")
            if fd is not None:
                os.close(fd)
            c.ping()
            expect_error("Aborted", c.batch_opaque, h, [0, 1, 2, 3], b"abc")
            expect_error("Aborted", c.commit, h)
            expect_error("NotFound", c.commit, h)
        c.batch_opaque(keep, [0, 1, 2, 3], b"XYZ", flags=BATCH_LAST)
        parts, _ = read_output(where, 14, 0, 3, "lz4", "ADLER32", 32 << 10, c.commit(keep))
        check(parts == [b"xX", b"yY", b"zZ"], "map output open across the malformed Batches: %r" % parts)
        self.assert_gone(c, where, "app-last", 15, aborts + len(cases))
        c.close()
        self.ok("Batch flags 0x02, 0x03, 0x80 (inline%s) and reserved 1: InvalidArgument naming the field, the map "
                "output aborted (Aborted, then NotFound), the connection and another map output go on"
                % (", memfd" if self.features & FEAT_MEMFD else ""))

    def register_errors(self):
        c = self.conn()
        expect_error("InvalidArgument", c.register, ".shuffled-registry", "e")
        expect_error("InvalidArgument", c.register, ".shuffled-registry.log", "e")
        expect_error("InvalidArgument", c.register, ".shuffled.lock", "e")
        expect_error("InvalidArgument", c.register, ".anything", "e")
        expect_error("InvalidArgument", c.register, "app", ".e")
        expect_error("InvalidArgument", c.register, "a/b", "e", field="app_id")
        expect_error("InvalidArgument", c.register, "..", "e", field="app_id")
        expect_error("InvalidArgument", c.register, "app", "e\x01", field="executor_id")
        expect_error("InvalidArgument", c.register, "app", "")
        if self.args.allowed_root:
            expect_error("InvalidArgument", c.register, "app-r", "e",
                         local_dirs=[os.path.join(self.args.allowed_root, "missing")], sub_dirs=64)
            expect_error("PermissionDenied", c.register, "app-r", "e", local_dirs=[tempfile.gettempdir()], sub_dirs=64)
            d = os.path.join(self.args.allowed_root, "blockmgr-r")
            os.makedirs(d, exist_ok=True)
            expect_error("InvalidArgument", c.register, "app-r", "e", local_dirs=[d], sub_dirs=0, field="sub_dirs")
            expect_error("InvalidArgument", c.register, "app-r", "e", local_dirs=["relative/dir"], sub_dirs=64)
        expect_error("InvalidArgument", c.register, "app-r", "e", sub_dirs=64, field="sub_dirs")
        # A registration that failed leaves the connection unregistered: it may register now.
        c.dirs = c.register("app-r", "e")
        h = c.open(9, 0, 1)
        c.batch_opaque(h, [0, 2], b"ok")
        read_output(self.flat(c), 9, 0, 1, "lz4", "ADLER32", 32 << 10, c.commit(h))
        c.close()
        self.ok("RegisterExecutor refusals (reserved, not plain, missing, outside the allowed roots, sub_dirs, "
                "relative) keep the connection, which then registers")

    def daemon_tree(self, name, *locals_):
        """A directory of its own for a daemon started by one case: tmp/name, with tmp/name/spark
        (for --allowed-roots) holding the Spark local dirs named locals_. Returns tmp, spark and
        the local dirs' paths."""
        tmp = os.path.join(self.args.tmp, name)
        spark = os.path.join(tmp, "spark")
        os.makedirs(spark)
        dirs = [os.path.join(spark, d) for d in locals_]
        for d in dirs:
            os.makedirs(d)
        return tmp, spark, dirs

    def as_peer(self, uid, gid, fn):
        """Runs fn() in a child process with uid and gid (and no other groups); returns what fn
        returns (JSON), or raises Fail with the child's failure."""
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rd)
            try:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
                out = {"ok": fn()}
            except BaseException as e:  # reported to the parent, which fails the check
                out = {"err": "%s: %s" % (type(e).__name__, e)}
            os.write(wr, json.dumps(out).encode())
            os._exit(0)
        os.close(wr)
        with os.fdopen(rd, "rb") as f:
            out = json.loads(f.read() or b'{"err": "the peer process wrote nothing"}')
        os.waitpid(pid, 0)
        if "err" in out:
            raise Fail("as uid %d: %s" % (uid, out["err"]))
        return out["ok"]

    def peer_uids(self):
        """Peers of other uids: section 8's refusal at accept (--allowed-uids), RegisterExecutor's
        dirs of another uid and hashed sub-dirs that are symlinks, an application's uid fixed by
        its first registration, removal by the owner only."""
        if not self.args.daemon:
            self.skipped.append("peer uids (needs --daemon)")
            return
        if os.geteuid() != 0:
            self.skipped.append("peer uids (needs root, to run a peer as another uid)")
            return
        owner, other, refused, group = 65534, 65533, 65532, 65534
        # Every uid must reach the socket: search permission down to it, the socket's group.
        os.chmod(self.args.tmp, 0o711)
        tmp, spark, (mine, roots) = self.daemon_tree("peers", "blockmgr-owner", "blockmgr-root")
        os.chmod(tmp, 0o711)
        os.chmod(spark, 0o755)
        os.chown(mine, owner, group)
        os.chmod(roots, 0o777)  # writable by all, but root's
        sub = 16
        # A hashed sub-dir that none of shuffle 1's files use, and a shuffle whose data file
        # hashes to it: a symbolic link there before the daemon meets it.
        used = {os.path.dirname(spark_path([mine], sub, "shuffle_1_0_0" + ext))
                for ext in (".data", ".index", ".checksum.CRC32C")}
        bad = next(n for n in range(2, 1000)
                   if os.path.dirname(spark_path([mine], sub, "shuffle_%d_0_0.data" % n)) not in used)
        evil = os.path.dirname(spark_path([mine], sub, "shuffle_%d_0_0.data" % bad))
        elsewhere = os.path.join(tmp, "elsewhere")
        os.makedirs(elsewhere)
        os.symlink(elsewhere, evil)
        sock, proc = start_daemon(self.args.daemon, tmp, "peers",
                                  ["--allowed-uids", "%d,%d" % (owner, other), "--allowed-roots", spark])
        os.chown(sock, -1, group)
        try:
            def refused_peer():
                c = Conn(sock)
                typ, rid, payload = c.recv_frame()
                r = Reader(payload)
                code, msg = r.u32(), r.string()
                r.done()
                check(typ == ERROR and rid == 0, "frame type %#x, request id %d: want an Error with request id 0" % (typ, rid))
                check(code == CODE["PermissionDenied"], "code %d (%s), want PermissionDenied" % (code, msg))
                check(str(refused) in msg and str(group) in msg, "message %r names neither uid %d nor gid %d" % (msg, refused, group))
                try:
                    more = c.s.recv(1)
                except OSError:
                    more = b""
                check(more == b"", "the connection stayed open after the refusal")
                c.close()
                return True
            self.as_peer(refused, group, refused_peer)
            self.ok("peer uids: a uid not allowed gets one Error (request id 0, PermissionDenied, its uid and gid), then EOF")

            def owner_peer():
                c = Conn(sock)
                c.do_hello()
                expect_error("PermissionDenied", c.register, "app-peers", "e1", local_dirs=[roots], sub_dirs=sub,
                             field=roots)
                c.dirs = c.register("app-peers", "e1", local_dirs=[mine], sub_dirs=sub)
                where = lambda name: spark_path([mine], sub, name)
                self.map_output(c, where, 1, 0, 8, "lz4", "CRC32C", [(0, 8, [10, 300])])
                # That shuffle's data file hashes to the symlinked sub-dir: refused at Open or Commit.
                try:
                    h = c.open(bad, 0, 1, codec="lz4", checksum="ADLER32")
                except DaemonError as e:
                    check(e.code == CODE["PermissionDenied"] and os.path.basename(evil) in e.message,
                          "Open with a symlinked sub-dir: %s" % e)
                else:
                    c.batch_opaque(h, [0, 5], b"hello")
                    expect_error("PermissionDenied", c.commit, h, field=os.path.basename(evil))
                c.close()
                return True
            self.as_peer(owner, group, owner_peer)
            check(os.listdir(elsewhere) == [], "files in the dir behind the symlinked sub-dir: %r" % os.listdir(elsewhere))
            self.ok("peer uids: RegisterExecutor refuses another uid's dir, takes the peer's own; "
                    "a hashed sub-dir that is a symlink is refused and nothing lands behind it")

            def other_peer():
                c = Conn(sock)
                c.do_hello()
                expect_error("PermissionDenied", c.register, "app-peers", "e2", local_dirs=[mine], sub_dirs=sub)
                expect_error("PermissionDenied", c.call, REMOVE_APP, string("app-peers"))
                expect_error("PermissionDenied", c.call, LIST_SHUFFLES, string("app-peers"))
                c.close()
                return True
            self.as_peer(other, group, other_peer)
            check(os.path.exists(spark_path([mine], sub, "shuffle_1_0_0.data")), "another uid's calls removed the owner's output")

            def owner_removes():
                c = Conn(sock)
                c.do_hello()
                r = c.call(REMOVE_APP, string("app-peers"))
                removed = [r.i64(), r.i64()]
                r.done()
                c.close()
                return removed
            outputs, freed = self.as_peer(owner, group, owner_removes)
            check(outputs == 1 and freed > 0, "ApplicationRemoved map_outputs %d, bytes %d: want its 1 map output" % (outputs, freed))
            check(not os.path.exists(spark_path([mine], sub, "shuffle_1_0_0.data")), "the owner's output remains")
            self.ok("peer uids: an application's uid is fixed by its first registration; another uid may not "
                    "register into it, list or remove it; its owner removes it")
        finally:
            rc = stop_daemon(proc)
            check(rc == 0, "the peers daemon exited %d on SIGTERM" % rc)

    def restart(self):
        """What survives a restart (protocol.md, after ListShuffles): committed outputs, in the
        Spark local dirs and in the daemon's root, and the registry file; an output open at a
        crash is never committed and its temp files are swept before the daemon serves; the
        application's owner is kept."""
        if not self.args.daemon:
            self.skipped.append("restart (needs --daemon)")
            return
        tmp, spark, (local,) = self.daemon_tree("restart", "blockmgr-restart")
        root = os.path.join(tmp, "restart-root")  # start_daemon's --root
        flags = ["--allowed-roots", spark]
        other, group = 65533, 65534
        peers = os.geteuid() == 0
        if peers:
            flags += ["--allowed-uids", str(other)]
        sub = 8
        where = lambda name: spark_path([local], sub, name)

        def temps():
            return [os.path.join(d, f) for base in (local, root) for d, _, fs in os.walk(base)
                    for f in fs if f.endswith(".shuffled-tmp")]

        def size(paths):
            return sum(os.path.getsize(p) for p in paths)

        sock, proc = start_daemon(self.args.daemon, tmp, "restart", flags)
        try:
            c = Conn(sock)
            c.do_hello()
            c.dirs = c.register("app-restart", "e1", local_dirs=[local], sub_dirs=sub)
            plan = [(0, 6, [10, 400]), (2, 6, [5, 50])]
            _, res = self.map_output(c, where, 3, 0, 6, "lz4", "CRC32C", plan)
            before, _ = read_output(where, 3, 0, 6, "lz4", "CRC32C", 32 << 10, res)
            d = Conn(sock)
            d.do_hello()
            d.dirs = d.register("app-flat", "e1")
            flat = self.flat(d)
            _, fres = self.map_output(d, flat, 5, 0, 3, "none", "ADLER32", [(0, 3, [1, 100])])
            fbefore, _ = read_output(flat, 5, 0, 3, "none", "ADLER32", 32 << 10, fres)
            # A map output in flight at the crash: a batch accepted, never committed. Marked as
            # its last (LAST), its one run streams to its temp file (without the mark the daemon
            # may keep it in memory until Commit).
            h = c.open(3, 1, 6, codec="lz4", checksum="CRC32C")
            offs, payload, _ = make_batch(self.rng, 6, 0, 6, [2000, 5000])
            c.batch_opaque(h, offs, payload, flags=BATCH_LAST)
            check(temps(), "no temp file (*.shuffled-tmp) of the map output in flight")
            registry = os.path.join(root, ".shuffled-registry")
            check(os.path.exists(registry), "no registry file %s" % registry)
            apps = read_registry(registry)
            check("app-restart" in apps and any(os.path.realpath(local) in s["dirs"] and s["sub_dirs"] == sub
                                                for s in apps["app-restart"].get("local", [])),
                  "the registry files do not name app-restart with its dir %s: %r" % (local, apps.get("app-restart")))
            check("app-flat" in apps and not apps["app-flat"].get("local") and "removed" not in apps["app-flat"],
                  "the registry files do not name app-flat, of the daemon's root alone: %r" % apps.get("app-flat"))
            proc.kill()  # a crash: no drain
            proc.wait()
            c.close()
            d.close()
            os.remove(sock)
            sock, proc = start_daemon(self.args.daemon, tmp, "restart", flags)
            e = Conn(sock)
            e.do_hello()
            check(temps() == [], "temp files left after the restart: %r" % temps())
            check(not os.path.exists(where("shuffle_3_1_0.data")), "the map output open at the crash was committed")
            files = [where("shuffle_3_0_0" + x) for x in (".data", ".index", ".checksum.CRC32C")]
            got = e.shuffles("app-restart")
            check(got == [(3, 1, size(files))], "ShuffleList after the restart %r, want [(3, 1, %d)]" % (got, size(files)))
            after, _ = read_output(where, 3, 0, 6, "lz4", "CRC32C", 32 << 10, res)
            check(after == before, "the committed map output reads back otherwise after the restart")
            ffiles = [flat("shuffle_5_0_0" + x) for x in (".data", ".index", ".checksum.ADLER32")]
            got = e.shuffles("app-flat")
            check(got == [(5, 1, size(ffiles))], "ShuffleList of the daemon-root application after the restart %r" % got)
            fafter, _ = read_output(flat, 5, 0, 3, "none", "ADLER32", 32 << 10, fres)
            check(fafter == fbefore, "the daemon-root map output reads back otherwise after the restart")
            if peers:
                os.chmod(self.args.tmp, 0o711)
                os.chmod(tmp, 0o711)
                os.chown(sock, -1, group)

                def other_lists():
                    o = Conn(sock)
                    o.do_hello()
                    expect_error("PermissionDenied", o.call, LIST_SHUFFLES, string("app-restart"))
                    expect_error("PermissionDenied", o.call, REMOVE_APP, string("app-restart"))
                    o.close()
                    return True
                self.as_peer(other, group, other_lists)
            for app, want in (("app-restart", size(files)), ("app-flat", size(ffiles))):
                r = e.call(REMOVE_APP, string(app))
                removed = (r.i64(), r.i64())
                r.done()
                check(removed == (1, want), "ApplicationRemoved %r for %s after the restart, want (1, %d)" % (removed, app, want))
            check(not any(os.path.exists(f) for f in files + ffiles), "files left after RemoveApplication")
            e.close()
            self.ok("restart: committed outputs (Spark local dirs and the daemon's root) listed, read back and removed; "
                    "the registry file names the application and its dir; an output open at a crash never "
                    "committed, its temp files swept; %s" % (
                        "the owner kept (another uid may not list or remove)" if peers else "(owner not checked: not root)"))
        finally:
            rc = stop_daemon(proc)
            check(rc == 0, "the restarted daemon exited %d on SIGTERM" % rc)

    def serving(self):
        """docs/serving.md: a reducer's side of the block server (serving.py); its idle bound is
        watched to its end (run's finally) while the other cases run."""
        self.serving_part = Serving(self, start_daemon, stop_daemon)
        self.serving_part.run()

    def watermark(self):
        """README "Lifecycle and disks": a root disk below --disk-low-watermark (a size or a
        percentage of the disk) refuses new map outputs, ResourceExhausted naming the disk and
        its free bytes; the connection stays."""
        if not self.args.daemon:
            self.skipped.append("disk low watermark (needs --daemon)")
            return
        for name, mark in (("wm-size", "1000TiB"), ("wm-pct", "100%")):
            sock, proc = start_daemon(self.args.daemon, self.args.tmp, name, ["--disk-low-watermark", mark])
            try:
                c = Conn(sock)
                c.do_hello()
                c.dirs = c.register("app-" + name, "e1")
                root = os.path.join(self.args.tmp, name + "-root")
                e = expect_error("ResourceExhausted", c.open, 1, 0, 4)
                check(root in e.message, "--disk-low-watermark %s: message %r does not name the disk %s" % (mark, e.message, root))
                free = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize
                nums = [int(x) for x in re.findall(r"\d+", e.message)]
                check(any(abs(n - free) <= max(free // 100, 1 << 20) for n in nums),
                      "--disk-low-watermark %s: message %r names no free byte count near statvfs's %d" % (mark, e.message, free))
                c.ping()
                c.close()
            finally:
                rc = stop_daemon(proc)
                check(rc == 0, "the %s daemon exited %d on SIGTERM" % (name, rc))
        self.ok("disk low watermark (a size, a percentage): Open refused ResourceExhausted naming the disk and "
                "its free bytes, the connection kept")

    def retention(self):
        """protocol.md (after ListShuffles): an application with no connection for longer than
        --retention is removed, looked for at start and every 30 s; one still connected stays."""
        if not self.args.daemon:
            self.skipped.append("retention (needs --daemon)")
            return
        tmp, spark, (local,) = self.daemon_tree("retention", "blockmgr-ret")
        sock, proc = start_daemon(self.args.daemon, tmp, "retention", ["--allowed-roots", spark, "--retention", "1s"])
        try:
            gone = Conn(sock)
            gone.do_hello()
            gone.dirs = gone.register("app-gone", "e1", local_dirs=[local], sub_dirs=4)
            self.map_output(gone, lambda n: spark_path([local], 4, n), 1, 0, 3, "lz4", "ADLER32", [(0, 3, [10, 99])])
            kept = Conn(sock)
            kept.do_hello()
            kept.dirs = kept.register("app-kept", "e1")
            self.map_output(kept, self.flat(kept), 2, 0, 3, "lz4", "ADLER32", [(0, 3, [10, 99])])
            gone.close()
            t0 = time.time()
            watch = Conn(sock)  # no registration: not a connection of either application
            watch.do_hello()
            while watch.shuffles("app-gone"):
                check(time.time() - t0 < 45, "app-gone still listed %.0f s after its last connection closed "
                      "(--retention 1s, looked for every 30 s)" % (time.time() - t0))
                time.sleep(0.5)
            waited = time.time() - t0
            check(not os.path.exists(spark_path([local], 4, "shuffle_1_0_0.data")), "app-gone's files remain")
            check(watch.shuffles("app-kept") and len(kept.shuffles("app-kept")) == 1, "app-kept, still connected, was removed")
            kept.close()
            watch.close()
            self.ok("retention 1s: an application without a connection removed %.0f s after it closed (within the "
                    "30 s rounds), one still connected kept" % waited)
        finally:
            rc = stop_daemon(proc)
            check(rc == 0, "the retention daemon exited %d on SIGTERM" % rc)

    def high_watermark(self):
        """README "Lifecycle and disks": a root disk below --disk-low-watermark refuses new map
        outputs until its free space is back above --disk-high-watermark. The root is a small
        tmpfs (root with CAP_SYS_ADMIN to mount it), filled and freed with a ballast file."""
        if not self.args.daemon:
            self.skipped.append("disk high watermark (needs --daemon)")
            return
        mnt = os.path.join(self.args.tmp, "hw-root")  # start_daemon's --root for "hw"
        os.makedirs(mnt)
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
            self.skipped.append("disk high watermark (needs root and CAP_SYS_ADMIN to mount a tmpfs)")
            return
        proc = None
        try:
            free = lambda: os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
            ballast = os.path.join(mnt, "ballast")

            def ballast_to(left):  # the ballast's size such that about left bytes stay free
                with open(ballast, "ab") as f:
                    size = os.path.getsize(ballast)
                    want = max(0, size + free() - left)
                    if want > size:
                        os.posix_fallocate(f.fileno(), 0, want)
                    else:
                        f.truncate(want)

            sock, proc = start_daemon(self.args.daemon, self.args.tmp, "hw",
                                      ["--disk-low-watermark", "3MiB", "--disk-high-watermark", "5MiB"])
            c = Conn(sock)
            c.do_hello()
            c.dirs = c.register("app-hw", "e1")
            c.abort(c.open(1, 0, 2))  # 8 MiB free: above both
            # The daemon reads statfs again once its figure is older than half a second (README):
            # each change of the ballast is given that long to show.
            settle = lambda: time.sleep(0.6)
            ballast_to(2 << 20)
            settle()
            expect_error("ResourceExhausted", c.open, 1, 1, 2, field=mnt)
            ballast_to(4 << 20)  # between the watermarks: still refused
            check(3 << 20 < free() < 5 << 20, "free %d, want between the watermarks" % free())
            settle()
            expect_error("ResourceExhausted", c.open, 1, 2, 2, field=mnt)
            os.remove(ballast)  # back above the high watermark
            settle()
            h = c.open(1, 3, 2)
            c.batch_opaque(h, [0, 1, 2], b"hw")
            read_output(self.flat(c), 1, 3, 2, "lz4", "ADLER32", 32 << 10, c.commit(h))
            c.close()
            self.ok("disk watermarks on an 8 MiB tmpfs root (low 3 MiB, high 5 MiB): Open refused below the low "
                    "one naming the disk, still refused between them, taken again above the high one")
        finally:
            try:
                if proc:
                    rc = stop_daemon(proc)
                    check(rc == 0, "the hw daemon exited %d on SIGTERM" % rc)
            finally:
                subprocess.run(["umount", mnt])

    def small_frames(self):
        """A daemon with --max-frame 65536: max_inline, frame and num_partitions bounds."""
        if not self.args.daemon:
            self.skipped.append("small max_frame (needs --daemon)")
            return
        sock, proc = start_daemon(self.args.daemon, self.args.tmp, "small", ["--max-frame", "65536"])
        try:
            c = Conn(sock)
            h = c.do_hello()
            check(h["max_frame"] == 65536 and h["max_inline"] == 32768, "max_frame %d max_inline %d" % (h["max_frame"], h["max_inline"]))
            c.dirs = c.register("app-small", "e")
            # CommitResult of 16 + 16 n bytes must fit max_frame: n = 4095 fits, 4096 does not.
            c.abort(c.open(1, 0, 4095))
            expect_error("InvalidArgument", c.open, 1, 0, 4096, field="num_partitions")
            # Inline payload over max_inline (in a frame that fits max_frame): ResourceExhausted.
            h = c.open(1, 1, 1)
            payload = b"y" * 40000
            expect_error("ResourceExhausted", c.batch_opaque, h, [0, len(payload)], payload)
            expect_error("Aborted", c.commit, h)
            h = c.open(1, 2, 1)
            c.batch_opaque(h, [0, 32768], b"z" * 32768)
            read_output(self.flat(c), 1, 2, 1, "lz4", "ADLER32", 32 << 10, c.commit(h))
            # A frame over max_frame is a framing error: the connection closes.
            self.send_oversized(c, PING, b"\0" * 65537)
            self.assert_closed(c)
            # SIGTERM drains: no new map outputs (Unavailable), open ones finish, exit 0.
            c = Conn(sock)
            c.do_hello()
            c.dirs = c.register("app-small", "e2")
            h = c.open(2, 0, 2)
            c.batch_opaque(h, [0, 1, 2], b"ab")
            proc.send_signal(signal.SIGTERM)
            deadline = time.time() + 10
            while True:
                try:
                    c.abort(c.open(2, 1, 1))
                except DaemonError as e:
                    check(e.code == CODE["Unavailable"], "Open while draining: %s" % e)
                    break
                check(time.time() < deadline, "Open still served 10 s after SIGTERM")
                time.sleep(0.05)
            c.batch_opaque(h, [0, 1, 2], b"cd")
            parts, _ = read_output(self.flat(c), 2, 0, 2, "lz4", "ADLER32", 32 << 10, c.commit(h))
            check(parts == [b"ac", b"bd"], "map output committed while draining: %r" % parts)
        finally:
            rc = stop_daemon(proc)
        check(rc == 0, "daemon exit status %d on SIGTERM" % rc)
        self.ok("--max-frame 65536: max_inline 32768, num_partitions 4096 refused, inline over max_inline "
                "ResourceExhausted, a frame over max_frame closes the connection; SIGTERM: Open Unavailable, "
                "the open map output commits, exit 0")

    def many_connections(self):
        """32 connections at once, each writing 3 small map outputs of several runs concurrently
        (interleaved batches, two codecs), all open together; Stats counts the connections."""
        n, per, nparts = 32, 3, 8
        codecs = [("lz4", "ADLER32"), ("none", "CRC32"), ("snappy", "CRC32C")]
        plan = [(0, nparts, [1, 30, 200]), (2, nparts, [50]), (0, 5, [1, 90]), (0, nparts, [7])]
        # Batches made up front: the suite's generator stays in one thread and one order.
        work = [[make_batch(self.rng, nparts, lo, hi, sizes) for lo, hi, sizes in plan]
                for _ in range(n * per)]
        opened = threading.Barrier(n + 1, timeout=30)
        done = threading.Barrier(n + 1, timeout=30)
        errors = []

        def one(i):
            try:
                c = self.conn("app-many", "exec-%d" % i)
                where = self.flat(c)
                outs = []
                for k in range(per):
                    codec, algo = codecs[(i + k) % len(codecs)]
                    outs.append((c.open(3, i * per + k, nparts, codec=codec, checksum=algo), codec, algo))
                for b in range(len(plan)):  # one batch of each output in turn
                    for k, (h, _, _) in enumerate(outs):
                        offs, payload, _ = work[i * per + k][b]
                        c.batch_opaque(h, offs, payload)
                opened.wait()
                done.wait()
                for k, (h, codec, algo) in enumerate(outs):
                    self.verify_output(where, 3, i * per + k, nparts, codec, algo, 0,
                                       [sl for _, _, sl in work[i * per + k]], c.commit(h))
                c.close()
            except Exception as e:  # reported by the main thread
                errors.append("connection %d: %r" % (i, e))
                opened.abort()
                done.abort()

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        watch = self.conn()
        try:
            opened.wait()
            st = watch.stats()
            done.wait()
        except threading.BrokenBarrierError:
            st = None
        for t in threads:
            t.join(60)
        check(not errors, "; ".join(errors[:3]))
        check(st["connections"] >= n + 1, "Stats connections %d with %d connections open" % (st["connections"], n + 1))
        check(st["open_map_outputs"] >= n * per, "Stats open_map_outputs %d with %d open" % (st["open_map_outputs"], n * per))
        # Once the 32 are closed, connections falls by 32 (closing is the daemon's to notice).
        deadline = time.time() + 5
        while watch.stats()["connections"] > st["connections"] - n:
            check(time.time() < deadline, "Stats connections still over %d 5 s after 32 closed" % (st["connections"] - n))
            time.sleep(0.02)
        watch.close()
        self.ok("%d connections at once, %d map outputs of %d runs each written concurrently, committed and "
                "read back; Stats connections %d and open_map_outputs %d while open, connections down by %d after"
                % (n, n * per, count_runs([sl for _, _, sl in work[0]]), st["connections"], st["open_map_outputs"], n))

    def connection_bound(self):
        """At most 4096 map outputs open on one connection: the next Open is ResourceExhausted,
        naming the bound, the connection and its open map outputs stay; an Abort gives a slot back."""
        c = self.conn("app-bound", "exec-1")
        where = self.flat(c)
        handles = []
        for lo in range(0, 4096, 256):  # pipelined, a window at a time
            rids = [c.send(OPEN, i32(4) + i64(m) + i32(1) + u8(KIND_OPAQUE) + u8(0) + b"\0\0" +
                           string("") + string("") + u32(0) + i32(0)) for m in range(lo, lo + 256)]
            for rid in rids:
                r = c.result(OPEN, rid)
                handles.append(r.u64())
                r.done()
        check(len(set(handles)) == 4096 and 0 not in handles, "4096 distinct handles")
        other = self.conn("app-bound", "exec-2")  # the bound is per connection
        other.abort(other.open(4, 9999, 1))
        other.close()
        e = expect_error("ResourceExhausted", c.open, 4, 4096, 1)
        check("4096" in e.message, "error message %r does not name the bound 4096" % e.message)
        c.ping()
        c.batch_opaque(handles[0], [0, 3], b"abc")
        parts, _ = read_output(where, 4, 0, 1, "lz4", "ADLER32", 32 << 10, c.commit(handles[0]))
        check(parts == [b"abc"], "map output committed after the refusal: %r" % parts)
        c.abort(handles[1])
        c.abort(c.open(4, 4096, 1))
        c.abort(c.open(4, 4097, 1))
        c.close()
        self.ok("4096 map outputs open on one connection: the next Open ResourceExhausted naming the bound, "
                "another connection unaffected, the connection and its map outputs stay, Commit and Abort each "
                "give a slot back")

    def uid_shares(self):
        """Section 4's per-uid shares: by default one peer uid holds at most half of
        --max-open-outputs and of --partition-state-limit; past either, ResourceExhausted
        naming the per-uid bound."""
        if not self.args.daemon:
            self.skipped.append("--max-open-outputs-per-uid (needs --daemon)")
            return
        sock, proc = start_daemon(self.args.daemon, self.args.tmp, "shares",
                                  ["--max-open-outputs", "4", "--partition-state-limit", "48KiB"])
        norm = lambda s: s.replace("_", "").replace("-", "").lower()
        try:
            c = Conn(sock)
            c.do_hello()
            c.dirs = c.register("app-shares", "e1")
            h1 = c.open(1, 1, 500)  # 24000 bytes: the whole 24 KiB share but 576
            e = expect_error("ResourceExhausted", c.open, 1, 2, 13)
            check("partitionstatelimitperuid" in norm(e.message), "error message %r does not name "
                  "--partition-state-limit-per-uid" % e.message)
            h2 = c.open(1, 2, 12)
            e = expect_error("ResourceExhausted", c.open, 1, 3, 1)
            check("maxopenoutputsperuid" in norm(e.message), "error message %r does not name "
                  "--max-open-outputs-per-uid" % e.message)
            c.abort(h2)
            c.abort(c.open(1, 3, 1))
            c.abort(h1)
            c.close()
        finally:
            rc = stop_daemon(proc)
        check(rc == 0, "the shares daemon exited %d" % rc)
        self.ok("open bounds: one uid holds half of --max-open-outputs and of --partition-state-limit by "
                "default, refused past either naming the per-uid flag")

    def open_bounds(self):
        """A daemon with --max-open-outputs 3 --partition-state-limit 48KiB (one uid's shares set to
        all of them): Opens past either bound are ResourceExhausted naming it, and Commit and Abort
        give the charge back."""
        if not self.args.daemon:
            self.skipped.append("--max-open-outputs, --partition-state-limit (needs --daemon)")
            return
        limit = 48 << 10  # 1024 partitions of 48 bytes
        sock, proc = start_daemon(self.args.daemon, self.args.tmp, "bounds",
                                  ["--max-open-outputs", "3", "--partition-state-limit", "48KiB", "--drain-timeout", "2s",
                                   "--max-open-outputs-per-uid", "3", "--partition-state-limit-per-uid", "48KiB"])
        norm = lambda s: s.replace("_", "").replace("-", "").lower()
        try:
            c = Conn(sock)
            c.do_hello()
            c.dirs = c.register("app-bounds", "e1")
            where = self.flat(c)

            def figures(want_open, want_bytes, when):
                st = c.stats()
                got = (st["open_map_outputs"], st["partition_state_bytes"], st["partition_state_limit"])
                check(got == (want_open, want_bytes, limit), "Stats open_map_outputs, partition_state_bytes, "
                      "partition_state_limit %r %s, want %r" % (got, when, (want_open, want_bytes, limit)))

            figures(0, 0, "before any Open")
            h1 = c.open(1, 1, 1000)
            figures(1, 48000, "with 1000 partitions open")
            # 1000 + 25 partitions are over 1024; 1000 + 24 are exactly the limit ("at most").
            e1 = expect_error("ResourceExhausted", c.open, 1, 2, 25)
            check("partitionstatelimit" in norm(e1.message), "error message %r does not name "
                  "--partition-state-limit" % e1.message)
            figures(1, 48000, "after a refused Open")
            h2 = c.open(1, 2, 24)
            figures(2, limit, "at the limit")
            expect_error("ResourceExhausted", c.open, 1, 3, 1)
            c.ping()
            c.abort(h2)
            figures(1, 48000, "after an Abort")
            h2 = c.open(1, 2, 24)
            c.batch_opaque(h1, [0] + [1] * 1000, b"x")
            parts, _ = read_output(where, 1, 1, 1000, "lz4", "ADLER32", 32 << 10, c.commit(h1))
            check(parts[0] == b"x" and not any(parts[1:]), "the map output open across the refusals")
            figures(1, 24 * 48, "after a Commit")
            # Now the count: 3 open at most, daemon-wide.
            h3, h4 = c.open(1, 3, 2), c.open(1, 4, 2)
            figures(3, 28 * 48, "with 3 open")
            e2 = expect_error("ResourceExhausted", c.open, 1, 5, 1)
            check("maxopenoutputs" in norm(e2.message), "error message %r does not name --max-open-outputs" % e2.message)
            d = Conn(sock)
            d.do_hello()
            d.dirs = d.register("app-bounds", "e2")
            e = expect_error("ResourceExhausted", d.open, 2, 0, 1)
            check("maxopenoutputs" in norm(e.message), "error message %r does not name --max-open-outputs" % e.message)
            d.ping()
            c.batch_opaque(h3, [0, 2, 2], b"ab")
            parts, _ = read_output(where, 1, 3, 2, "lz4", "ADLER32", 32 << 10, c.commit(h3))
            check(parts == [b"ab", b""], "map output 3: %r" % parts)
            figures(2, 26 * 48, "after a Commit at the count")
            hd = d.open(2, 0, 1)
            expect_error("ResourceExhausted", c.open, 1, 5, 1)
            c.abort(h4)
            c.abort(c.open(1, 5, 1))
            d.batch_opaque(hd, [0, 1], b"d")
            parts, _ = read_output(self.flat(d), 2, 0, 1, "lz4", "ADLER32", 32 << 10, d.commit(hd))
            check(parts == [b"d"], "the second connection's map output: %r" % parts)
            c.abort(h2)
            figures(0, 0, "after all committed or aborted")
            # A connection's end gives its charge back too.
            for m in range(3):
                d.open(3, m, 100)
            d.close()
            deadline = time.time() + 5
            while c.stats()["open_map_outputs"]:
                check(time.time() < deadline, "map outputs of a closed connection still open after 5 s")
                time.sleep(0.02)
            figures(0, 0, "after a connection with 3 open map outputs closed")
            c.close()
        finally:
            rc = stop_daemon(proc)
        check(rc == 0, "daemon exit status %d on SIGTERM" % rc)
        self.ok("--max-open-outputs 3 --partition-state-limit 48KiB: Opens past either bound (48 bytes a "
                "partition, at most the limit; 3 daemon-wide, from two connections) ResourceExhausted naming it, "
                "connections and open map outputs kept, Commit, Abort and a connection's end give the charge "
                "back; Stats open_map_outputs, partition_state_bytes, partition_state_limit follow each step")

    def lifecycle(self):
        c = self.conn("app-life", "exec-1")
        where = self.flat(c)
        self.map_output(c, where, 7, 0, 10, "lz4", "ADLER32", [(0, 10, [100])])
        self.map_output(c, where, 7, 1, 10, "none", "none", [(0, 10, [100])])
        self.map_output(c, where, 8, 0, 10, "lz4", "CRC32", [(0, 10, [100])])
        r = c.call(LIST_SHUFFLES, string("app-life"))
        got = r.lst(lambda: (r.i32(), r.i64(), r.i64()))
        r.done()
        d = os.path.dirname(where("x"))
        size = lambda s: sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.startswith("shuffle_%d_" % s))
        check(got == [(7, 2, size(7)), (8, 1, size(8))], "ShuffleList %r" % got)
        r = c.call(REMOVE_SHUFFLE, string("app-life") + i32(7))
        removed = (r.i64(), r.i64())
        r.done()
        check(removed == (2, got[0][2]), "ShuffleRemoved %r" % (removed,))
        check(not any(f.startswith("shuffle_7_") for f in os.listdir(d)), "shuffle 7's files remain")
        r = c.call(REMOVE_SHUFFLE, string("app-life") + i32(7))
        check((r.i64(), r.i64()) == (0, 0), "removing again")
        r = c.call(REMOVE_APP, string("app-life"))
        check((r.i64(), r.i64()) == (1, got[1][2]), "ApplicationRemoved")
        c.close()
        self.ok("lifecycle: ListShuffles counts and bytes, RemoveShuffle, idempotent, RemoveApplication")

        if self.args.allowed_root:
            # The same dirs registered twice, with other sub_dirs: each file counts once.
            dirs = [os.path.join(self.args.allowed_root, "blockmgr-dup-%d" % i) for i in range(2)]
            for d in dirs:
                os.makedirs(d, exist_ok=True)
            conns = []
            for k, sub in enumerate((64, 3)):
                c = self.conn("app-dup", "exec-%d" % k, local_dirs=dirs, sub_dirs=sub)
                where = lambda name, c=c, sub=sub: spark_path(c.dirs, sub, name)
                for m in range(3):
                    self.map_output(c, where, 4, 10 * k + m, 5, "lz4", "ADLER32", [(0, 5, [50])])
                conns.append(c)
            got = conns[0].shuffles("app-dup")
            r = conns[1].call(REMOVE_SHUFFLE, string("app-dup") + i32(4))
            removed = (r.i64(), r.i64())
            r.done()
            check(len(got) == 1 and got[0][1] == 6 and removed == (got[0][1], got[0][2]),
                  "ShuffleList %r and ShuffleRemoved %r of dirs registered twice, want 6 map outputs in both, the same bytes" % (got, removed))
            for c in conns:
                c.close()
            self.ok("lifecycle: dirs registered twice with other sub_dirs: ListShuffles counts what RemoveShuffle removes")

    def columnar(self, c, where):
        """Columnar batches (protocol.md Batch kind 2) read back as SHFC blocks (format.md 2)
        and, when the daemon has feature bit 4, as kudo tables (format.md 7)."""
        fmts = [(0, "shfc")] + ([(1, "kudo")] if self.features & FEAT_KUDO else [])
        if not self.features & FEAT_KUDO:
            self.skipped.append("kudo (no feature bit 4)")
        for fmt, name in fmts:
            nparts = 20
            schema = [(n, t) for n, _, t in COLUMNS] if fmt == 1 else None
            h = c.open(6, fmt, nparts, kind=KIND_COLUMNAR, fmt=fmt, codec="lz4", checksum="CRC32C",
                       schema=schema)
            want = [[] for _ in range(nparts)]  # rows per partition, in order
            slices = [0] * nparts
            for bno, (rows, align, pspan) in enumerate(((150, 64, nparts), (0, 8, nparts), (200, 1, nparts // 2), (60000, 8, 1))):
                layout, payload, per_part = build_columnar(self.rng, nparts, rows, align, pspan)
                head = u64(h) + u8(KIND_COLUMNAR) + u8(PLANE_INLINE) + b"\0\0"
                c.call(BATCH, head + layout + u32(len(payload)) + payload).done()
                for p in range(nparts):
                    want[p].extend(per_part[p])
                    slices[p] += bool(per_part[p])
            res = c.commit(h)
            parts, _ = read_output(where, 6, fmt, nparts, "lz4", "CRC32C", 32 << 10, res)
            for p in range(nparts):
                try:
                    got = decode_blocks(parts[p]) if fmt == 0 else decode_kudo(parts[p])
                except (Fail, struct.error) as e:
                    raise Fail("%s partition %d: %s" % (name, p, e))
                check(got == want[p], "%s partition %d: %d rows decoded differ from the %d sent" % (name, p, len(got), len(want[p])))
                # One table per slice; the big batch's slice, over the record size, in several.
                check(TABLES[0] == slices[p] if p else TABLES[0] > slices[p],
                      "%s partition %d: %d tables for %d slices" % (name, p, TABLES[0], slices[p]))
                check(bool(parts[p]) == bool(want[p]), "%s partition %d: bytes without rows" % (name, p))
            self.ok("columnar %s: every type of protocol.md's table (bool8, int8 to int64, float32 and 64, date32, "
                    "timestamp_us, decimal32, 64 and 128, string, binary), 9 of the 14 columns with nulls; buffers "
                    "aligned to 64, 8 and 1; an empty batch; a batch over the record size; read back" % name)

    def columnar_nested(self, c, where):
        """Nested, interval and void columns (protocol.md "Nested columns") read back as SHFC
        blocks and kudo tables (format.md sections 2 and 7, "Flattened columns", "Slices")."""
        fmts = [(0, "shfc")] + ([(1, "kudo")] if self.features & FEAT_KUDO else [])
        for fmt, name in fmts:
            nparts = 6
            schema = [(n["name"], n["spark"]) for n in NESTED] if fmt == 1 else None
            h = c.open(8, fmt, nparts, kind=KIND_COLUMNAR, fmt=fmt, codec="lz4", checksum="CRC32C", schema=schema)
            want = [[] for _ in range(nparts)]
            for rows, align in ((97, 8), (1, 1), (300, 64)):
                layout, payload, per_part = build_nested(self.rng, nparts, rows, align)
                head = u64(h) + u8(KIND_COLUMNAR) + u8(PLANE_INLINE) + b"\0\0"
                c.call(BATCH, head + layout + u32(len(payload)) + payload).done()
                for p in range(nparts):
                    want[p].extend(per_part[p])
            res = c.commit(h)
            parts, _ = read_output(where, 8, fmt, nparts, "lz4", "CRC32C", 32 << 10, res)
            for p in range(nparts):
                try:
                    got = decode_nested_blocks(parts[p]) if fmt == 0 else decode_nested_kudo(parts[p])
                except (Fail, struct.error, IndexError) as e:
                    raise Fail("nested %s partition %d: %s" % (name, p, e))
                check(got == want[p], "nested %s partition %d: %d rows decoded differ from the %d sent" % (name, p, len(got), len(want[p])))
            self.ok("columnar %s, nested: array<int>, struct<x:smallint,y:string>, map<string,bigint>, "
                    "array<binary>, array<array<int>>, the intervals, void; nulls at every level, empty "
                    "lists, slices at odd rows; read back" % name)


def start_daemon(binary, tmp, name, extra):
    """Starts `shuffled serve` as README.md says, its socket and root in tmp."""
    sock = os.path.join(tmp, name + ".sock")
    log = open(os.path.join(tmp, name + ".log"), "wb")
    proc = subprocess.Popen([binary, "serve", "--socket", sock, "--root", os.path.join(tmp, name + "-root"),
                             "--limit", "64MiB", "--disk-low-watermark", "1MiB"] + extra,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while not os.path.exists(sock):
        if proc.poll() is not None or time.time() > deadline:
            print(open(os.path.join(tmp, name + ".log")).read())
            sys.exit("docconform: the daemon did not start")
        time.sleep(0.05)
    return sock, proc


def stop_daemon(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise Fail("the daemon did not stop on SIGTERM within 30 s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", help="shuffled binary to start in a temp dir")
    ap.add_argument("--socket", help="socket of a running daemon")
    ap.add_argument("--allowed-root", help="a dir under the daemon's --allowed-roots for the local-dirs case")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--require-zstd", action="store_true", help="fail, not skip, without zstandard")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--only", help="run the handshake and this one case (a Suite method, e.g. serving)")
    args = ap.parse_args()
    tmp, proc = None, None
    if args.daemon:
        tmp = tempfile.mkdtemp(prefix="docconform.")
        args.allowed_root = os.path.join(tmp, "spark")
        os.makedirs(args.allowed_root)
        args.hello_timeout = 2
        args.socket, proc = start_daemon(args.daemon, tmp, "main", ["--allowed-roots", args.allowed_root,
                                                                   "--hello-timeout", "%ds" % args.hello_timeout])
        args.tmp = tmp
    elif not args.socket:
        ap.error("--daemon or --socket")
    suite = Suite(args)
    status = 0
    t0 = time.time()
    try:
        suite.run()
    except (Fail, DaemonError, ConnectionError, OSError) as e:
        import traceback
        traceback.print_exc()
        print("docconform: FAIL: %s" % e)
        status = 1
    finally:
        if proc:
            rc = stop_daemon(proc)
            if rc != 0 and not status:
                print("docconform: FAIL: the daemon exited %d on SIGTERM, want 0" % rc)
                status = 1
            if status:
                print(open(os.path.join(tmp, "main.log")).read()[-4000:])
            shutil.rmtree(tmp, ignore_errors=True)
    for s in suite.skipped:
        print("docconform: skipped: " + s)
    print("docconform: %d checks passed in %.1f s%s" % (len(suite.passed), time.time() - t0, "" if status else ", all passed"))
    sys.exit(status)


if __name__ == "__main__":
    main()
