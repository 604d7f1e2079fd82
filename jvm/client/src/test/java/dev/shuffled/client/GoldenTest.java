package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The golden frames of testdata/protocol/session.hex, shared with the Go tests
 * (protocol/golden_test.go): the Java encoder must produce them byte for byte, and the decoder
 * must read them back to the same messages.
 */
class GoldenTest {
  private record Golden(String name, int id, int flags, Wire.Msg m) {}

  private static final List<Golden> TABLE =
      List.of(
          new Golden("hello", 1, 0, new Wire.Hello(1, 1, "jvm")),
          new Golden("open", 2, 0, new Wire.Open(3, 7, 2, Wire.KIND_OPAQUE, "", "")),
          new Golden(
              "batch-inline",
              3,
              0,
              new Wire.Batch(1, Wire.PLANE_INLINE, 0, new long[] {0, 2, 3}, bytes("abc"), 0, 0)),
          new Golden(
              "server-hello",
              1,
              0,
              new Wire.ServerHello(
                  1,
                  64L << 20,
                  63L << 20,
                  ServerInfo.FEATURE_MEMFD
                      | ServerInfo.FEATURE_COLUMNAR
                      | ServerInfo.FEATURE_LIFECYCLE,
                  "shuffled/1.0")),
          new Golden("opened", 2, 0, new Wire.Opened(1)),
          new Golden("batch-accepted", 3, 0, new Wire.BatchAccepted()),
          new Golden("register-root", 4, 0, new Wire.Register("app-1", "exec-1", 0, List.of())),
          new Golden(
              "registered", 4, 0, new Wire.Registered(List.of("/var/lib/shuffled/app-1/exec-1"))),
          new Golden(
              "register-local",
              5,
              0,
              new Wire.Register(
                  "app-1", "exec-2", 64, List.of("/data/a/blockmgr-1", "/data/b/blockmgr-2"))),
          new Golden(
              "open-codec",
              6,
              0,
              new Wire.Open(0, 12345678901L, 200, Wire.KIND_OPAQUE, "zstd", "CRC32C")),
          new Golden(
              "open-lz4-block",
              17,
              0,
              new Wire.Open(
                  1, 2, 4, Wire.KIND_OPAQUE, Wire.FORMAT_SHFC, "lz4", "ADLER32", 64 << 10, 0,
                  List.of())),
          new Golden(
              "open-zstd-level",
              18,
              0,
              new Wire.Open(
                  1, 3, 4, Wire.KIND_OPAQUE, Wire.FORMAT_SHFC, "zstd", "", 0, 3, List.of())),
          new Golden(
              "register-key",
              21,
              0,
              new Wire.Register(
                  "app-1",
                  "exec-3",
                  0,
                  List.of(),
                  new byte[] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})),
          new Golden(
              "open-encrypted",
              22,
              0,
              new Wire.Open(
                  1, 5, 3, Wire.KIND_OPAQUE, Wire.FORMAT_SHFC, "lz4", "", 0, 0, List.of(),
                  Wire.OPEN_ENCRYPT)),
          new Golden(
              "open-kudo",
              19,
              0,
              new Wire.Open(
                  1,
                  4,
                  2,
                  Wire.KIND_COLUMNAR,
                  Wire.FORMAT_KUDO,
                  "none",
                  "none",
                  0,
                  0,
                  List.of(new SchemaField("id", "bigint"), new SchemaField("name", "string")))),
          new Golden(
              "batch-memfd",
              7,
              Wire.FLAG_FD,
              new Wire.Batch(1, Wire.PLANE_MEMFD, 0, new long[] {0, 5, 5, 9}, null, 0, 9)),
          new Golden(
              "batch-last",
              20,
              0,
              new Wire.Batch(
                  1, Wire.PLANE_INLINE, Wire.BATCH_LAST, new long[] {0, 1, 1}, bytes("d"), 0, 0)),
          new Golden("commit", 8, 0, new Wire.Commit(1)),
          new Golden(
              "commit-result",
              8,
              0,
              new Wire.CommitRes(false, 2, new long[] {2, 1}, new long[] {0x12345678L, 0xfedcba98L})),
          new Golden(
              "commit-result-existing",
              9,
              0,
              new Wire.CommitRes(true, 0, new long[] {5, 0, 4}, new long[0])),
          new Golden("abort", 10, 0, new Wire.Abort(2)),
          new Golden("aborted", 10, 0, new Wire.Empty(Wire.ABORT | Wire.RESPONSE)),
          new Golden("ping", 11, 0, new Wire.Empty(Wire.PING)),
          new Golden("pong", 11, 0, new Wire.Empty(Wire.PING | Wire.RESPONSE)),
          new Golden("stats", 12, 0, new Wire.Empty(Wire.STATS)),
          new Golden(
              "stats-result",
              12,
              0,
              new Wire.StatsResult(
                  List.of(
                      new Wire.StatsResult.Stat("bytes_in_flight", 4096),
                      new Wire.StatsResult.Stat("connections", 1)))),
          new Golden("remove-shuffle", 13, 0, new Wire.RemoveShuffle("app-1", 3)),
          new Golden(
              "shuffle-removed",
              13,
              0,
              new Wire.RemovedMsg(Wire.REMOVE_SHUFFLE | Wire.RESPONSE, 2, 4096)),
          new Golden(
              "remove-application", 14, 0, new Wire.AppRequest(Wire.REMOVE_APPLICATION, "app-1")),
          new Golden(
              "application-removed",
              14,
              0,
              new Wire.RemovedMsg(Wire.REMOVE_APPLICATION | Wire.RESPONSE, 5, 10000)),
          new Golden("list-shuffles", 15, 0, new Wire.AppRequest(Wire.LIST_SHUFFLES, "app-1")),
          new Golden(
              "shuffle-list",
              15,
              0,
              new Wire.ShuffleList(
                  List.of(new ShuffleInfo(0, 10, 1000), new ShuffleInfo(3, 2, 64)))),
          new Golden("list-applications", 21, 0, new Wire.Empty(Wire.LIST_APPLICATIONS)),
          new Golden(
              "application-list",
              21,
              0,
              new Wire.ApplicationList(
                  List.of(
                      new ApplicationInfo("app-1", 1000, 1, 2, 12, 1064),
                      new ApplicationInfo("app-2", -1, 0, 0, 0, 0)))),
          new Golden(
              "error", 16, 0, new Wire.Error(3, "Commit.Handle: 9 is not open")),
          new Golden("connection-error", 0, 0, new Wire.Error(9, "draining")));

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static Path goldenFile() {
    Path p = Path.of("").toAbsolutePath();
    while (p != null && !Files.exists(p.resolve("go.mod"))) {
      p = p.getParent();
    }
    assertNotNull(p, "no repository root (go.mod) above " + Path.of("").toAbsolutePath());
    return p.resolve("testdata/protocol/session.hex");
  }

  /** "frame NAME" lines, each followed by hex lines; '#' starts a comment. */
  static Map<String, byte[]> parse(Path file) throws IOException {
    Map<String, java.io.ByteArrayOutputStream> out = new LinkedHashMap<>();
    String cur = null;
    int n = 0;
    for (String line : Files.readAllLines(file)) {
      n++;
      int hash = line.indexOf('#');
      if (hash >= 0) {
        line = line.substring(0, hash);
      }
      line = line.strip();
      if (line.isEmpty()) {
        continue;
      }
      if (line.startsWith("frame ")) {
        cur = line.substring(6).strip();
        assertNull(out.put(cur, new java.io.ByteArrayOutputStream()), file + ":" + n + ": frame " + cur + " twice");
        continue;
      }
      assertNotNull(cur, file + ":" + n + ": hex before the first frame line");
      out.get(cur).writeBytes(HexFormat.of().parseHex(line.replaceAll("\\s+", "")));
    }
    Map<String, byte[]> frames = new LinkedHashMap<>();
    out.forEach((k, v) -> frames.put(k, v.toByteArray()));
    return frames;
  }

  @Test
  void encodesAndDecodesEveryGoldenFrame() throws IOException {
    Map<String, byte[]> frames = parse(goldenFile());
    assertEquals(
        TABLE.stream().map(Golden::name).toList(),
        new ArrayList<>(frames.keySet()),
        "the golden file's frames, in order");
    java.util.Set<Integer> types = new java.util.TreeSet<>();
    for (Golden g : TABLE) {
      byte[] want = frames.get(g.name);
      byte[] got = Wire.frame(g.id, g.m, g.flags);
      assertEquals(HexFormat.of().formatHex(want), HexFormat.of().formatHex(got), g.name + ": encoding");

      Wire.Header h = Wire.readHeader(ByteBuffer.wrap(want), 64 << 20);
      assertEquals(g.id, h.id(), g.name + ": request id");
      assertEquals(g.flags, h.flags(), g.name + ": flags");
      assertEquals(want.length - Wire.HEADER_SIZE, h.length(), g.name + ": length");
      Wire.Msg back =
          Wire.decode(h.type(), ByteBuffer.wrap(want, Wire.HEADER_SIZE, h.length()).slice());
      assertEquals(g.m, back, g.name + ": decoding");
      assertEquals(g.m.type(), h.type(), g.name + ": type");
      types.add(h.type());
    }
    // Every request type, its response, and Error: 12 + 12 + 1.
    assertEquals(25, types.size(), "message types covered: " + types);
  }

  @Test
  void decoderRefusesTrailingAndTruncatedBytes() throws IOException {
    byte[] opened = parse(goldenFile()).get("opened");
    ByteBuffer payload = ByteBuffer.wrap(opened, 16, opened.length - 16);
    byte[] longer = new byte[payload.remaining() + 1];
    payload.duplicate().get(longer, 0, payload.remaining());
    ProtocolException e =
        assertThrows(ProtocolException.class, () -> Wire.decode(Wire.OPEN | Wire.RESPONSE, ByteBuffer.wrap(longer)));
    assertTrue(e.getMessage().contains("1 trailing bytes"), e.getMessage());
    e =
        assertThrows(
            ProtocolException.class,
            () -> Wire.decode(Wire.OPEN | Wire.RESPONSE, ByteBuffer.wrap(longer, 0, 7)));
    assertTrue(e.getMessage().contains("Opened.Handle: truncated"), e.getMessage());
  }

  @Test
  void headerRefusesBadMagicFlagsAndLength() {
    byte[] h = Wire.frame(1, new Wire.Empty(Wire.PING), 0);
    byte[] bad = h.clone();
    bad[0] = 'X';
    assertThrows(ProtocolException.class, () -> Wire.readHeader(ByteBuffer.wrap(bad), 1 << 20));
    byte[] flags = h.clone();
    flags[4] = 2;
    assertThrows(ProtocolException.class, () -> Wire.readHeader(ByteBuffer.wrap(flags), 1 << 20));
    byte[] reserved = h.clone();
    reserved[6] = 1;
    assertThrows(ProtocolException.class, () -> Wire.readHeader(ByteBuffer.wrap(reserved), 1 << 20));
    byte[] big = Wire.frame(1, new Wire.Error(1, "x".repeat(100)), 0);
    ProtocolException e =
        assertThrows(ProtocolException.class, () -> Wire.readHeader(ByteBuffer.wrap(big), 50));
    assertTrue(e.getMessage().contains("exceeds the limit 50"), e.getMessage());
  }

  @Test
  void errorCodesMatchTheProtocol() {
    String[] names = {
      "InvalidArgument", "Unsupported", "NotFound", "AlreadyExists", "PermissionDenied",
      "ResourceExhausted", "FailedPrecondition", "Aborted", "Unavailable", "VersionMismatch",
      "Internal"
    };
    for (int i = 0; i < names.length; i++) {
      ErrorCode c = ErrorCode.ofWire(i + 1);
      assertEquals(i + 1, c.wireCode());
      assertEquals(names[i], c.protocolName());
    }
    assertEquals(ErrorCode.INTERNAL, ErrorCode.ofWire(99));
    ShuffledException e = new ShuffledException(99, "new", "ping");
    assertEquals("ping: daemon answered Code(99): new", e.getMessage());
  }
}
