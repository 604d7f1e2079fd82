package dev.shuffled.client;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The encoding of docs/protocol.md, version 1: frame headers and every message, both directions.
 * Encoders assume valid fields (the client checks them first, see {@link Check}); decoders check
 * every bound and refuse trailing bytes, so a message that decodes is one a peer could have sent.
 */
final class Wire {
  private Wire() {}

  static final int HEADER_SIZE = 16;
  static final int FLAG_FD = 1;
  static final int MIN_VERSION = 1;
  static final int MAX_VERSION = 1;

  static final int HELLO = 0x0001;
  static final int REGISTER = 0x0002;
  static final int OPEN = 0x0003;
  static final int BATCH = 0x0004;
  static final int COMMIT = 0x0005;
  static final int ABORT = 0x0006;
  static final int PING = 0x0007;
  static final int STATS = 0x0008;
  static final int REMOVE_SHUFFLE = 0x0009;
  static final int REMOVE_APPLICATION = 0x000A;
  static final int LIST_SHUFFLES = 0x000B;
  static final int LIST_APPLICATIONS = 0x000C;
  static final int RESPONSE = 0x8000;
  static final int ERROR = 0xFFFF;

  static final int KIND_OPAQUE = 1;
  static final int KIND_COLUMNAR = 2;
  static final int FORMAT_SHFC = 0;
  static final int FORMAT_KUDO = 1;
  static final int PLANE_INLINE = 1;
  static final int PLANE_MEMFD = 2;
  static final int PLANE_CUDA_IPC = 3;
  /** Batch.flags bit 0: the map output's last batch (feature bit 5, last-batch). */
  static final int BATCH_LAST = 0x01;
  /** OpenMapOutput flag bit 0: write the map output with Spark's IO encryption. */
  static final int OPEN_ENCRYPT = 0x01;

  static final int MAX_NAME = 255;
  static final int MAX_PATH = 4095;
  static final int MAX_LOCAL_DIRS = 256;
  static final int MAX_SUB_DIRS = 1 << 16;
  static final int MAX_TOKEN = 32;
  static final int MAX_BLOCK_SIZE = 32 << 20;
  static final int MAX_COLUMNS = 1 << 14;
  static final int MAX_SPARK_TYPE = 65535;
  /** OpenMapOutput.num_partitions is 1..2^20 (docs/protocol.md). */
  static final int MAX_PARTITIONS = 1 << 20;
  static final int MAX_STATS = 4096;
  static final int MAX_STAT_NAME = 64;
  static final int MAX_SHUFFLES = 1 << 20;
  static final int MAX_APPLICATIONS = 1 << 16;
  static final int MAX_ERROR_MESSAGE = 65535;
  /** RegisterExecutor's auth_secret is 0..1024 bytes (feature bit 7). */
  static final int MAX_AUTH_SECRET = 1024;
  static final int MIN_MAX_FRAME = 1 << 16;

  static String typeName(int t) {
    String[] req = {
      null, "Hello", "RegisterExecutor", "OpenMapOutput", "Batch", "Commit", "Abort", "Ping",
      "Stats", "RemoveShuffle", "RemoveApplication", "ListShuffles", "ListApplications"
    };
    String[] resp = {
      null, "ServerHello", "Registered", "Opened", "BatchAccepted", "CommitResult", "Aborted",
      "Pong", "StatsResult", "ShuffleRemoved", "ApplicationRemoved", "ShuffleList",
      "ApplicationList"
    };
    if (t == ERROR) {
      return "Error";
    }
    int n = t & ~RESPONSE;
    if (n >= 1 && n < req.length) {
      return (t & RESPONSE) != 0 ? resp[n] : req[n];
    }
    return String.format("Type(0x%04x)", t);
  }

  // ---- frame header ----------------------------------------------------------

  /** A frame header as read. */
  record Header(int type, int flags, int id, int length) {}

  static void putHeader(ByteBuffer b, int type, int flags, int id, int length) {
    b.put((byte) 'S').put((byte) 'H').putShort((short) type).putShort((short) flags);
    b.putShort((short) 0).putInt(id).putInt(length);
  }

  /**
   * Decodes a header from the 16 bytes at {@code b}'s position (little-endian), refusing bad
   * magic, unknown flags, reserved bits and a length over {@code maxLength}.
   */
  static Header readHeader(ByteBuffer b, long maxLength) throws ProtocolException {
    ByteBuffer h = b.slice(b.position(), HEADER_SIZE).order(ByteOrder.LITTLE_ENDIAN);
    if (h.get(0) != 'S' || h.get(1) != 'H') {
      throw new ProtocolException(
          String.format("frame header: magic %02x %02x, want 53 48", h.get(0), h.get(1)));
    }
    int type = Short.toUnsignedInt(h.getShort(2));
    int flags = Short.toUnsignedInt(h.getShort(4));
    int reserved = Short.toUnsignedInt(h.getShort(6));
    int id = h.getInt(8);
    long length = Integer.toUnsignedLong(h.getInt(12));
    if ((flags & ~FLAG_FD) != 0) {
      throw new ProtocolException(String.format("frame header: unknown flags 0x%04x", flags));
    }
    if (reserved != 0) {
      throw new ProtocolException(String.format("frame header: reserved 0x%04x, want 0", reserved));
    }
    if (length > maxLength) {
      throw new ProtocolException(
          "frame header: " + typeName(type) + " payload of " + length + " bytes exceeds the limit "
              + maxLength);
    }
    return new Header(type, flags, id, (int) length);
  }

  // ---- messages --------------------------------------------------------------

  /** One message payload. */
  interface Msg {
    int type();

    void encode(Enc e);
  }

  record Hello(int minVersion, int maxVersion, String client) implements Msg {
    public int type() {
      return HELLO;
    }

    public void encode(Enc e) {
      e.u16(minVersion).u16(maxVersion).str(client);
    }

    static Hello decode(Dec d) throws ProtocolException {
      Hello m = new Hello(d.u16("MinVersion"), d.u16("MaxVersion"), d.str("Client", MAX_NAME));
      d.finish();
      d.check(m.minVersion >= 1, "MinVersion", m.minVersion + ", want >= 1");
      d.check(m.maxVersion >= m.minVersion, "MaxVersion", m.maxVersion + " below MinVersion");
      return m;
    }
  }

  record ServerHello(int version, long maxFrame, long maxInline, long features, String server)
      implements Msg {
    public int type() {
      return HELLO | RESPONSE;
    }

    public void encode(Enc e) {
      e.u16(version).u16(0).u32(maxFrame).u32(maxInline).u64(features).str(server);
    }

    static ServerHello decode(Dec d) throws ProtocolException {
      int version = d.u16("Version");
      d.zero("reserved", 2);
      long maxFrame = d.u32("MaxFrame");
      long maxInline = d.u32("MaxInline");
      long features = d.u64("Features");
      String server = d.str("Server", MAX_NAME);
      d.finish();
      d.check(version >= 1, "Version", version + ", want >= 1");
      d.check(maxFrame >= MIN_MAX_FRAME, "MaxFrame",
          maxFrame + ", want >= " + MIN_MAX_FRAME + " (the protocol's minimum)");
      // 0 would leave no room for any inline byte: a writer cutting batches in pieces of
      // max_inline would never advance.
      d.check(maxInline >= 1 && maxInline <= maxFrame, "MaxInline",
          maxInline + ", want 1..MaxFrame (" + maxFrame + ")");
      return new ServerHello(version, maxFrame, maxInline, features, server);
    }
  }

  /**
   * RegisterExecutor. {@code ioEncryptionKey} is the application's IO encryption key (16, 24 or
   * 32 bytes), or null. {@code authSecret} is the application's auth secret (0..1024 bytes; empty
   * for none), or null for no auth tail: with it, both tails go on after the local dirs (the io key
   * tail with length 0 when there is no key), which only a daemon with feature bit 7 (serving)
   * reads; without it, the io key tail alone when there is a key. Both are secrets, never part of
   * {@link #toString()}.
   */
  record Register(
      String appId,
      String executorId,
      int subDirs,
      List<String> localDirs,
      byte[] ioEncryptionKey,
      byte[] authSecret)
      implements Msg {
    Register(String appId, String executorId, int subDirs, List<String> localDirs) {
      this(appId, executorId, subDirs, localDirs, null, null);
    }

    Register(
        String appId, String executorId, int subDirs, List<String> localDirs, byte[] ioKey) {
      this(appId, executorId, subDirs, localDirs, ioKey, null);
    }

    public int type() {
      return REGISTER;
    }

    public void encode(Enc e) {
      e.str(appId).str(executorId).i32(subDirs).u32(localDirs.size());
      for (String s : localDirs) {
        e.str(s);
      }
      if (authSecret != null) {
        byte[] key = ioEncryptionKey == null ? new byte[0] : ioEncryptionKey;
        e.u16(key.length).bytes(key);
        e.u16(authSecret.length).bytes(authSecret);
      } else if (ioEncryptionKey != null) {
        e.u16(ioEncryptionKey.length).bytes(ioEncryptionKey);
      }
    }

    static Register decode(Dec d) throws ProtocolException {
      String app = d.str("AppID", MAX_NAME);
      String exec = d.str("ExecutorID", MAX_NAME);
      int sub = d.i32("SubDirs");
      int n = d.count("LocalDirs", MAX_LOCAL_DIRS, 2);
      List<String> dirs = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        dirs.add(d.str("LocalDirs", MAX_PATH));
      }
      byte[] key = null;
      byte[] secret = null;
      if (d.remaining() > 0) {
        int len = d.u16("IOEncryptionKey.length");
        if (len == 0) {
          d.check(d.remaining() > 0, "IOEncryptionKey",
              "length 0 (no key) is allowed only when the auth secret tail follows");
        } else {
          d.check(validKeyLength(len), "IOEncryptionKey",
              "length " + len + ", want 16, 24 or 32 bytes");
          key = d.raw("IOEncryptionKey", len);
        }
      }
      if (d.remaining() > 0) {
        int len = d.u16("AuthSecret.length");
        d.check(len <= MAX_AUTH_SECRET, "AuthSecret",
            "length " + len + ", want 0.." + MAX_AUTH_SECRET + " bytes");
        secret = d.raw("AuthSecret", len);
      }
      d.finish();
      return new Register(app, exec, sub, List.copyOf(dirs), key, secret);
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Register r
          && appId.equals(r.appId)
          && executorId.equals(r.executorId)
          && subDirs == r.subDirs
          && localDirs.equals(r.localDirs)
          && Arrays.equals(ioEncryptionKey, r.ioEncryptionKey)
          && Arrays.equals(authSecret, r.authSecret);
    }

    @Override
    public int hashCode() {
      return Objects.hash(appId, executorId, subDirs, localDirs);
    }

    @Override
    public String toString() {
      return "Register[appId=" + appId + ", executorId=" + executorId + ", subDirs=" + subDirs
          + ", localDirs=" + localDirs + ", ioEncryptionKey="
          + (ioEncryptionKey == null ? "[none]" : "[redacted]") + ", authSecret="
          + (authSecret == null ? "[no tail]" : authSecret.length == 0 ? "[empty]" : "[redacted]")
          + "]";
    }
  }

  /** Whether n bytes is an AES key length Spark makes (keySizeBits 128, 192, 256). */
  static boolean validKeyLength(int n) {
    return n == 16 || n == 24 || n == 32;
  }

  /** Registered's serving tail: host "" and port 0 when the daemon does not serve. */
  record Serve(String host, int port, int flags) {}

  /** Registered.serve_flags bit 0: the block server requires authentication of every app. */
  static final int SERVE_REQUIRE_AUTH = 0x01;

  /**
   * Registered. {@code serve} is the serving tail, present only when RegisterExecutor carried the
   * auth tail (feature bit 7), else null.
   */
  record Registered(List<String> dirs, Serve serve) implements Msg {
    Registered(List<String> dirs) {
      this(dirs, null);
    }

    public int type() {
      return REGISTER | RESPONSE;
    }

    public void encode(Enc e) {
      e.u32(dirs.size());
      for (String s : dirs) {
        e.str(s);
      }
      if (serve != null) {
        e.str(serve.host()).i32(serve.port()).u8(serve.flags());
      }
    }

    static Registered decode(Dec d) throws ProtocolException {
      int n = d.count("Dirs", MAX_LOCAL_DIRS, 2);
      List<String> dirs = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        dirs.add(d.str("Dirs", MAX_PATH));
      }
      Serve serve = null;
      if (d.remaining() > 0) {
        String host = d.str("ServeHost", MAX_NAME);
        int port = d.i32("ServePort");
        int flags = d.u8("ServeFlags");
        d.check(port >= 0 && port <= 65535, "ServePort", port + ", want 0..65535");
        d.check(host.isEmpty() == (port == 0), "ServePort",
            port + " with serve_host \"" + host + "\": want both set or \"\" and 0");
        serve = new Serve(host, port, flags);
      }
      d.finish();
      return new Registered(List.copyOf(dirs), serve);
    }
  }

  /**
   * OpenMapOutput. {@code blockSize} and {@code level} are 0 for the daemon's defaults; {@code
   * schema} is the kudo schema (format {@link #FORMAT_KUDO}), empty otherwise; {@code flags} holds
   * {@link #OPEN_ENCRYPT} or 0.
   */
  record Open(
      int shuffleId,
      long mapId,
      int numPartitions,
      int kind,
      int format,
      String codec,
      String checksum,
      int blockSize,
      int level,
      List<SchemaField> schema,
      int flags)
      implements Msg {
    Open(int shuffleId, long mapId, int numPartitions, int kind, String codec, String checksum) {
      this(shuffleId, mapId, numPartitions, kind, FORMAT_SHFC, codec, checksum, 0, 0, List.of());
    }

    Open(
        int shuffleId,
        long mapId,
        int numPartitions,
        int kind,
        int format,
        String codec,
        String checksum,
        int blockSize,
        int level,
        List<SchemaField> schema) {
      this(shuffleId, mapId, numPartitions, kind, format, codec, checksum, blockSize, level, schema, 0);
    }

    public int type() {
      return OPEN;
    }

    public void encode(Enc e) {
      e.i32(shuffleId).i64(mapId).i32(numPartitions).u8(kind).u8(format).u8(flags).u8(0);
      e.str(codec).str(checksum).u32(Integer.toUnsignedLong(blockSize)).i32(level);
      if (format == FORMAT_KUDO) {
        e.u32(schema.size());
        for (SchemaField f : schema) {
          e.str(f.name()).str(f.sparkType());
        }
      }
    }

    static Open decode(Dec d) throws ProtocolException {
      int s = d.i32("ShuffleID");
      long m = d.i64("MapID");
      int n = d.i32("NumPartitions");
      int kind = d.u8("Kind");
      int format = d.u8("Format");
      int flags = d.u8("Flags");
      d.zero("reserved", 1);
      d.check((flags & ~OPEN_ENCRYPT) == 0, "Flags", flags + ": unknown bits");
      String codec = d.str("Codec", MAX_TOKEN);
      String checksum = d.str("Checksum", MAX_TOKEN);
      long blockSize = d.u32("BlockSize");
      int level = d.i32("Level");
      d.check(blockSize <= MAX_BLOCK_SIZE, "BlockSize", blockSize + " exceeds " + MAX_BLOCK_SIZE);
      d.check(
          format == FORMAT_SHFC || format == FORMAT_KUDO, "Format", format + ", want 0 or 1");
      List<SchemaField> schema = List.of();
      if (format == FORMAT_KUDO) {
        d.check(kind == KIND_COLUMNAR, "Format", "kudo with kind " + kind + ", want columnar");
        int cols = d.count("Schema", MAX_COLUMNS, 4);
        List<SchemaField> fs = new ArrayList<>(cols);
        for (int i = 0; i < cols; i++) {
          String name = d.str("Schema.Name", MAX_NAME);
          String type = d.str("Schema.SparkType", MAX_SPARK_TYPE);
          d.check(!type.isEmpty(), "Schema[" + i + "].SparkType", "empty");
          fs.add(new SchemaField(name, type));
        }
        schema = List.copyOf(fs);
      }
      d.finish();
      d.check(s >= 0, "ShuffleID", s + ", want >= 0");
      d.check(m >= 0, "MapID", m + ", want >= 0");
      d.check(n >= 1 && n <= MAX_PARTITIONS, "NumPartitions", n + " out of [1, " + MAX_PARTITIONS + "]");
      return new Open(
          s, m, n, kind, format, codec, checksum, (int) blockSize, level, schema, flags);
    }
  }

  record Opened(long handle) implements Msg {
    public int type() {
      return OPEN | RESPONSE;
    }

    public void encode(Enc e) {
      e.u64(handle);
    }

    static Opened decode(Dec d) throws ProtocolException {
      Opened m = new Opened(d.u64("Handle"));
      d.finish();
      d.check(m.handle != 0, "Handle", "0, want != 0");
      return m;
    }
  }

  /**
   * An opaque Batch. Inline: {@code inline} holds the payload (encoded after the head); memfd:
   * {@code regionOffset} and {@code regionLength} locate it in the passed descriptor. {@code
   * flags}: 0 or {@link #BATCH_LAST}.
   */
  record Batch(
      long handle,
      int plane,
      int flags,
      long[] offsets,
      byte[] inline,
      long regionOffset,
      long regionLength)
      implements Msg {
    public int type() {
      return BATCH;
    }

    /** Everything but the inline payload bytes. */
    void encodeHead(Enc e) {
      e.u64(handle).u8(KIND_OPAQUE).u8(plane).u8(flags).u8(0).u32(offsets.length);
      for (long o : offsets) {
        e.i64(o);
      }
      if (plane == PLANE_INLINE) {
        e.u32(inlineLength());
      } else {
        e.i64(regionOffset).i64(regionLength);
      }
    }

    long inlineLength() {
      return offsets.length == 0 ? 0 : offsets[offsets.length - 1];
    }

    public void encode(Enc e) {
      encodeHead(e);
      if (plane == PLANE_INLINE) {
        e.bytes(inline);
      }
    }

    static int headSize(int partitions, int plane) {
      return 8 + 4 + 4 + 8 * (partitions + 1) + (plane == PLANE_INLINE ? 4 : 16);
    }

    static Batch decode(Dec d) throws ProtocolException {
      long handle = d.u64("Handle");
      int kind = d.u8("Kind");
      int plane = d.u8("Plane");
      int flags = d.u8("Flags");
      d.check((flags & ~BATCH_LAST) == 0, "Flags",
          String.format("0x%02x, want only bit 0 (LAST)", flags));
      d.zero("reserved", 1);
      d.check(kind == KIND_OPAQUE, "Kind", kind + ", this decoder reads opaque (1) only");
      int n = d.count("PartitionOffsets", MAX_PARTITIONS + 1, 8);
      long[] off = new long[n];
      for (int i = 0; i < n; i++) {
        off[i] = d.i64("PartitionOffsets");
      }
      Batch b;
      if (plane == PLANE_INLINE) {
        long len = d.u32("Inline");
        b = new Batch(handle, plane, flags, off, d.raw("Inline", len), 0, 0);
      } else if (plane == PLANE_MEMFD) {
        b = new Batch(
            handle, plane, flags, off, null, d.i64("Region.Offset"), d.i64("Region.Length"));
      } else {
        throw d.invalid("Plane", plane + ", want 1 (inline) or 2 (memfd)");
      }
      d.finish();
      d.check(handle != 0, "Handle", "0, want != 0");
      String bad = Check.offsets(off, plane == PLANE_INLINE ? b.inline.length : b.regionLength);
      if (bad != null) {
        throw d.invalid("PartitionOffsets", bad);
      }
      return b;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Batch b
          && handle == b.handle
          && plane == b.plane
          && flags == b.flags
          && Arrays.equals(offsets, b.offsets)
          && Arrays.equals(inline, b.inline)
          && regionOffset == b.regionOffset
          && regionLength == b.regionLength;
    }

    @Override
    public int hashCode() {
      return Long.hashCode(handle) * 31 + Arrays.hashCode(offsets);
    }

    @Override
    public String toString() {
      return "Batch[handle=" + handle + ", plane=" + plane + ", flags=" + flags + ", offsets="
          + Arrays.toString(offsets) + "]";
    }
  }

  /** One buffer of a column: bytes [offset, offset+length) of the payload; length 0: absent. */
  record Buf(long offset, long length) {
    static final Buf NONE = new Buf(0, 0);
  }

  /**
   * One column of a columnar Batch's layout; {@code children}: how many columns that follow are its
   * children (list, map: 1; struct: its fields), each followed by its own.
   */
  record Col(
      int type, int children, int precision, int scale, String name, Buf validity, Buf offsets, Buf data) {}

  /**
   * A Batch of kind columnar: its head and layout; the inline payload travels as the frame's tail.
   * {@code payloadLength} is the inline length (plane inline) or the memfd or device region's
   * length; {@code ipcHandle} and {@code device} name the device allocation (plane cuda-ipc).
   */
  record ColumnarBatchMsg(
      long handle,
      int plane,
      int flags,
      long rows,
      List<Col> columns,
      long[] partitionRows,
      long regionOffset,
      long payloadLength,
      byte[] ipcHandle,
      int device)
      implements Msg {
    ColumnarBatchMsg(
        long handle,
        int plane,
        int flags,
        long rows,
        List<Col> columns,
        long[] partitionRows,
        long regionOffset,
        long payloadLength) {
      this(handle, plane, flags, rows, columns, partitionRows, regionOffset, payloadLength, null, 0);
    }

    public int type() {
      return BATCH;
    }

    public void encode(Enc e) {
      e.u64(handle).u8(KIND_COLUMNAR).u8(plane).u8(flags).u8(0).i64(rows).u32(columns.size());
      for (Col c : columns) {
        e.u8(c.type()).u8(0).u16(c.children()).i32(c.precision()).i32(c.scale()).str(c.name());
        for (Buf b : new Buf[] {c.validity(), c.offsets(), c.data()}) {
          e.i64(b.offset()).i64(b.length());
        }
      }
      e.u32(partitionRows.length);
      for (long r : partitionRows) {
        e.i64(r);
      }
      if (plane == PLANE_INLINE) {
        e.u32(payloadLength);
        return;
      }
      if (plane == PLANE_CUDA_IPC) {
        e.bytes(ipcHandle).u32(device).u32(0);
      }
      e.i64(regionOffset).i64(payloadLength);
    }
  }

  record BatchAccepted() implements Msg {
    public int type() {
      return BATCH | RESPONSE;
    }

    public void encode(Enc e) {}
  }

  record Commit(long handle) implements Msg {
    public int type() {
      return COMMIT;
    }

    public void encode(Enc e) {
      e.u64(handle);
    }
  }

  record CommitRes(boolean existing, int runs, long[] lengths, long[] checksums) implements Msg {
    public int type() {
      return COMMIT | RESPONSE;
    }

    public void encode(Enc e) {
      e.u8(existing ? 1 : 0).u8(0).u8(0).u8(0).i32(runs).u32(lengths.length);
      for (long l : lengths) {
        e.i64(l);
      }
      e.u32(checksums.length);
      for (long c : checksums) {
        e.i64(c);
      }
    }

    static CommitRes decode(Dec d) throws ProtocolException {
      int ex = d.u8("Existing");
      d.check(ex <= 1, "Existing", ex + ", want 0 or 1");
      d.zero("reserved", 3);
      int runs = d.i32("Runs");
      long[] lengths = d.i64s("Lengths", MAX_PARTITIONS);
      long[] checksums = d.i64s("Checksums", MAX_PARTITIONS);
      d.finish();
      d.check(runs >= 0, "Runs", runs + ", want >= 0");
      d.check(
          checksums.length == 0 || checksums.length == lengths.length,
          "Checksums",
          checksums.length + " entries for " + lengths.length + " partitions");
      for (int i = 0; i < lengths.length; i++) {
        d.check(lengths[i] >= 0, "Lengths", "[" + i + "] = " + lengths[i] + ", want >= 0");
      }
      for (int i = 0; i < checksums.length; i++) {
        d.check(
            checksums[i] >= 0 && checksums[i] <= 0xFFFFFFFFL,
            "Checksums",
            "[" + i + "] = " + checksums[i] + ", want 0..2^32-1");
      }
      return new CommitRes(ex == 1, runs, lengths, checksums);
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof CommitRes r
          && existing == r.existing
          && runs == r.runs
          && Arrays.equals(lengths, r.lengths)
          && Arrays.equals(checksums, r.checksums);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(lengths);
    }

    @Override
    public String toString() {
      return "CommitRes[existing=" + existing + ", runs=" + runs + ", lengths="
          + Arrays.toString(lengths) + ", checksums=" + Arrays.toString(checksums) + "]";
    }
  }

  record Abort(long handle) implements Msg {
    public int type() {
      return ABORT;
    }

    public void encode(Enc e) {
      e.u64(handle);
    }
  }

  /** A message with an empty payload: Aborted, Ping, Pong, Stats. */
  record Empty(int type) implements Msg {
    public void encode(Enc e) {}
  }

  record StatsResult(List<Stat> stats) implements Msg {
    record Stat(String name, long value) {}

    public int type() {
      return STATS | RESPONSE;
    }

    public void encode(Enc e) {
      e.u32(stats.size());
      for (Stat s : stats) {
        e.str(s.name).i64(s.value);
      }
    }

    static StatsResult decode(Dec d) throws ProtocolException {
      int n = d.count("Stats", MAX_STATS, 10);
      List<Stat> out = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        String name = d.str("Stats.Name", MAX_STAT_NAME);
        d.check(!name.isEmpty() && Check.token(name) == null, "Stats.Name", "\"" + name + "\"");
        out.add(new Stat(name, d.i64("Stats.Value")));
      }
      d.finish();
      return new StatsResult(List.copyOf(out));
    }
  }

  record RemoveShuffle(String appId, int shuffleId) implements Msg {
    public int type() {
      return REMOVE_SHUFFLE;
    }

    public void encode(Enc e) {
      e.str(appId).i32(shuffleId);
    }
  }

  /** ShuffleRemoved or ApplicationRemoved. */
  record RemovedMsg(int type, long mapOutputs, long bytes) implements Msg {
    public void encode(Enc e) {
      e.i64(mapOutputs).i64(bytes);
    }

    static RemovedMsg decode(int type, Dec d) throws ProtocolException {
      RemovedMsg m = new RemovedMsg(type, d.i64("MapOutputs"), d.i64("Bytes"));
      d.finish();
      d.check(m.mapOutputs >= 0, "MapOutputs", m.mapOutputs + ", want >= 0");
      d.check(m.bytes >= 0, "Bytes", m.bytes + ", want >= 0");
      return m;
    }
  }

  /** RemoveApplication or ListShuffles: one app id. */
  record AppRequest(int type, String appId) implements Msg {
    public void encode(Enc e) {
      e.str(appId);
    }
  }

  record ApplicationList(List<ApplicationInfo> applications) implements Msg {
    public int type() {
      return LIST_APPLICATIONS | RESPONSE;
    }

    public void encode(Enc e) {
      e.u32(applications.size());
      for (ApplicationInfo a : applications) {
        e.str(a.appId()).i64(a.ownerUid()).i32(a.connections()).i32(a.shuffles())
            .i64(a.mapOutputs()).i64(a.bytes());
      }
    }

    static ApplicationList decode(Dec d) throws ProtocolException {
      int n = d.count("Applications", MAX_APPLICATIONS, 35);
      List<ApplicationInfo> out = new ArrayList<>(n);
      String prev = null;
      for (int i = 0; i < n; i++) {
        ApplicationInfo a = new ApplicationInfo(d.str("AppID", MAX_NAME), d.i64("OwnerUID"),
            d.i32("Connections"), d.i32("Shuffles"), d.i64("MapOutputs"), d.i64("Bytes"));
        d.check(!a.appId().isEmpty(), "Applications", "[" + i + "] empty id");
        d.check(prev == null || a.appId().compareTo(prev) > 0, "Applications",
            "[" + i + "] id " + a.appId() + " not ascending");
        d.check(a.ownerUid() >= -1 && a.ownerUid() <= 0xFFFFFFFFL, "Applications",
            "[" + i + "] owner uid " + a.ownerUid());
        d.check(a.connections() >= 0 && a.shuffles() >= 0 && a.mapOutputs() >= 0
            && a.bytes() >= 0, "Applications", "[" + i + "] negative figures");
        prev = a.appId();
        out.add(a);
      }
      d.finish();
      return new ApplicationList(List.copyOf(out));
    }
  }

  record ShuffleList(List<ShuffleInfo> shuffles) implements Msg {
    public int type() {
      return LIST_SHUFFLES | RESPONSE;
    }

    public void encode(Enc e) {
      e.u32(shuffles.size());
      for (ShuffleInfo s : shuffles) {
        e.i32(s.shuffleId()).i64(s.mapOutputs()).i64(s.bytes());
      }
    }

    static ShuffleList decode(Dec d) throws ProtocolException {
      int n = d.count("Shuffles", MAX_SHUFFLES, 20);
      List<ShuffleInfo> out = new ArrayList<>(n);
      int prev = -1;
      for (int i = 0; i < n; i++) {
        ShuffleInfo s = new ShuffleInfo(d.i32("ShuffleID"), d.i64("MapOutputs"), d.i64("Bytes"));
        d.check(s.shuffleId() > prev, "Shuffles", "[" + i + "] id " + s.shuffleId() + " not ascending");
        d.check(s.mapOutputs() >= 0 && s.bytes() >= 0, "Shuffles", "[" + i + "] negative figures");
        prev = s.shuffleId();
        out.add(s);
      }
      d.finish();
      return new ShuffleList(List.copyOf(out));
    }
  }

  record Error(long code, String message) implements Msg {
    public int type() {
      return ERROR;
    }

    public void encode(Enc e) {
      e.u32(code).str(message);
    }

    static Error decode(Dec d) throws ProtocolException {
      long code = d.u32("Code");
      String msg = d.lenient("Message", MAX_ERROR_MESSAGE);
      d.finish();
      d.check(code != 0, "Code", "0 (OK) is not an error");
      return new Error(code, msg);
    }
  }

  /** Decodes the payload of a frame of type {@code type}. */
  static Msg decode(int type, ByteBuffer payload) throws ProtocolException {
    Dec d = new Dec(typeName(type), payload);
    switch (type) {
      case HELLO:
        return Hello.decode(d);
      case HELLO | RESPONSE:
        return ServerHello.decode(d);
      case REGISTER:
        return Register.decode(d);
      case REGISTER | RESPONSE:
        return Registered.decode(d);
      case OPEN:
        return Open.decode(d);
      case OPEN | RESPONSE:
        return Opened.decode(d);
      case BATCH:
        return Batch.decode(d);
      case COMMIT | RESPONSE:
        return CommitRes.decode(d);
      case COMMIT:
      case ABORT:
        {
          long h = d.u64("Handle");
          d.finish();
          d.check(h != 0, "Handle", "0, want != 0");
          return type == COMMIT ? new Commit(h) : new Abort(h);
        }
      case BATCH | RESPONSE:
      case ABORT | RESPONSE:
      case PING:
      case PING | RESPONSE:
      case STATS:
      case LIST_APPLICATIONS:
        d.finish();
        return type == (BATCH | RESPONSE) ? new BatchAccepted() : new Empty(type);
      case STATS | RESPONSE:
        return StatsResult.decode(d);
      case REMOVE_SHUFFLE:
        {
          RemoveShuffle m = new RemoveShuffle(d.str("AppID", MAX_NAME), d.i32("ShuffleID"));
          d.finish();
          return m;
        }
      case REMOVE_APPLICATION:
      case LIST_SHUFFLES:
        {
          AppRequest m = new AppRequest(type, d.str("AppID", MAX_NAME));
          d.finish();
          return m;
        }
      case REMOVE_SHUFFLE | RESPONSE:
      case REMOVE_APPLICATION | RESPONSE:
        return RemovedMsg.decode(type, d);
      case LIST_SHUFFLES | RESPONSE:
        return ShuffleList.decode(d);
      case LIST_APPLICATIONS | RESPONSE:
        return ApplicationList.decode(d);
      case ERROR:
        return Error.decode(d);
      default:
        throw new ProtocolException("unknown message type " + typeName(type));
    }
  }

  /** The whole frame (header and payload) of {@code m}. */
  static byte[] frame(int id, Msg m, int flags) {
    Enc e = new Enc(64);
    e.skip(HEADER_SIZE);
    m.encode(e);
    ByteBuffer b = ByteBuffer.wrap(e.buf, 0, HEADER_SIZE).order(ByteOrder.LITTLE_ENDIAN);
    putHeader(b, m.type(), flags, id, e.len - HEADER_SIZE);
    return Arrays.copyOf(e.buf, e.len);
  }

  // ---- encoder and decoder ---------------------------------------------------------

  /** A growable little-endian byte buffer. */
  static final class Enc {
    byte[] buf;
    int len;

    Enc(int cap) {
      buf = new byte[cap];
    }

    void reset() {
      len = 0;
    }

    private void grow(int n) {
      if (len + n > buf.length) {
        buf = Arrays.copyOf(buf, Math.max(buf.length * 2, len + n));
      }
    }

    Enc skip(int n) {
      grow(n);
      len += n;
      return this;
    }

    Enc u8(int v) {
      grow(1);
      buf[len++] = (byte) v;
      return this;
    }

    Enc u16(int v) {
      grow(2);
      buf[len++] = (byte) v;
      buf[len++] = (byte) (v >>> 8);
      return this;
    }

    Enc i32(int v) {
      grow(4);
      for (int i = 0; i < 4; i++) {
        buf[len++] = (byte) (v >>> (8 * i));
      }
      return this;
    }

    Enc u32(long v) {
      return i32((int) v);
    }

    Enc i64(long v) {
      grow(8);
      for (int i = 0; i < 8; i++) {
        buf[len++] = (byte) (v >>> (8 * i));
      }
      return this;
    }

    Enc u64(long v) {
      return i64(v);
    }

    Enc str(String s) {
      byte[] b = s.getBytes(StandardCharsets.UTF_8);
      u16(b.length);
      return bytes(b);
    }

    Enc bytes(byte[] b) {
      grow(b.length);
      System.arraycopy(b, 0, buf, len, b.length);
      len += b.length;
      return this;
    }
  }

  /** Reads one payload, naming the message and field in every error. */
  static final class Dec {
    private final String msg;
    private final ByteBuffer b;

    Dec(String msg, ByteBuffer payload) {
      this.msg = msg;
      this.b = payload.slice().order(ByteOrder.LITTLE_ENDIAN);
    }

    ProtocolException invalid(String field, String what) {
      return new ProtocolException(msg + "." + field + ": " + what);
    }

    void check(boolean ok, String field, String what) throws ProtocolException {
      if (!ok) {
        throw invalid(field, what);
      }
    }

    private void need(String field, long n) throws ProtocolException {
      if (b.remaining() < n) {
        throw invalid(field, "truncated: " + n + " bytes wanted, " + b.remaining() + " left");
      }
    }

    int u8(String field) throws ProtocolException {
      need(field, 1);
      return Byte.toUnsignedInt(b.get());
    }

    int u16(String field) throws ProtocolException {
      need(field, 2);
      return Short.toUnsignedInt(b.getShort());
    }

    int i32(String field) throws ProtocolException {
      need(field, 4);
      return b.getInt();
    }

    long u32(String field) throws ProtocolException {
      return Integer.toUnsignedLong(i32(field));
    }

    long i64(String field) throws ProtocolException {
      need(field, 8);
      return b.getLong();
    }

    long u64(String field) throws ProtocolException {
      return i64(field);
    }

    void zero(String field, int n) throws ProtocolException {
      need(field, n);
      for (int i = 0; i < n; i++) {
        if (b.get() != 0) {
          throw invalid(field, "byte " + i + " is not 0");
        }
      }
    }

    /** A count of elements of at least {@code minSize} bytes each, checked before allocating. */
    int count(String field, int max, int minSize) throws ProtocolException {
      long n = u32(field);
      if (n > max) {
        throw invalid(field, n + " entries exceed " + max);
      }
      if (n * minSize > b.remaining()) {
        throw invalid(field, n + " entries do not fit in " + b.remaining() + " bytes");
      }
      return (int) n;
    }

    long[] i64s(String field, int max) throws ProtocolException {
      int n = count(field, max, 8);
      long[] v = new long[n];
      for (int i = 0; i < n; i++) {
        v[i] = b.getLong();
      }
      return v;
    }

    int remaining() {
      return b.remaining();
    }

    byte[] raw(String field, long n) throws ProtocolException {
      need(field, n);
      byte[] v = new byte[(int) n];
      b.get(v);
      return v;
    }

    /** A string of valid UTF-8 without NUL. */
    String str(String field, int max) throws ProtocolException {
      byte[] raw = strBytes(field, max);
      String s;
      try {
        s =
            StandardCharsets.UTF_8
                .newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(raw))
                .toString();
      } catch (CharacterCodingException e) {
        throw invalid(field, "not valid UTF-8");
      }
      if (s.indexOf('\0') >= 0) {
        throw invalid(field, "contains NUL");
      }
      return s;
    }

    /** A string that may quote hostile bytes (an Error message): bad UTF-8 is replaced. */
    String lenient(String field, int max) throws ProtocolException {
      return new String(strBytes(field, max), StandardCharsets.UTF_8);
    }

    private byte[] strBytes(String field, int max) throws ProtocolException {
      int n = u16(field);
      if (n > max) {
        throw invalid(field, "length " + n + " exceeds " + max);
      }
      return raw(field, n);
    }

    void finish() throws ProtocolException {
      if (b.hasRemaining()) {
        throw invalid("(end)", b.remaining() + " trailing bytes");
      }
    }
  }
}
