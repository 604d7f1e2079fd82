package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * OpenOptions' block size, zstd level and kudo schema through the real daemon, and its
 * commits_total and aborts_total figures.
 */
class CodecOptionsIT {
  private static final String APP = "app-opts";
  private static final String EXEC = "exec-1";

  @RegisterExtension static final RunningDaemon RUNNING = new RunningDaemon(APP, EXEC);

  private static CommitResult writeOne(int shuffle, OpenOptions opts, ByteArrayOutputStream[] want)
      throws Exception {
    Payloads.Batch b = Payloads.batch(new Random(shuffle), new int[] {300_000, 0, 5000}, want);
    try (MapOutput m = RUNNING.client().openMapOutput(shuffle, 0, 3, opts)) {
      m.writeOpaque(b.data(), b.offsets());
      return m.commit();
    }
  }

  @Test
  void lz4BlockSizeIsLz4JavasBlocks() throws Exception {
    ByteArrayOutputStream[] want = Payloads.expected(3);
    OpenOptions opts = OpenOptions.of(Codec.LZ4, ChecksumAlgorithm.CRC32).withBlockSize(64 << 10);
    assertEquals(64 << 10, opts.blockSize());
    CommitResult res = writeOne(1, opts, want);
    RoundTripIT.check(RUNNING.daemon().outputDir(APP, EXEC), 1, 0, Codec.LZ4, ChecksumAlgorithm.CRC32, res, want);
    byte[] onDisk = SparkFiles.read(RUNNING.daemon().outputDir(APP, EXEC), 1, 0, ChecksumAlgorithm.CRC32).onDisk()[0];
    // lz4-java blocks: "LZ4Block", token (method | level), compressed length, decompressed
    // length, checksum; level = log2(block size) - 10, 6 for 64 KiB.
    ByteBuffer b = ByteBuffer.wrap(onDisk).order(ByteOrder.LITTLE_ENDIAN);
    int full = 0;
    while (b.remaining() >= 21) {
      assertEquals("LZ4Block", new String(onDisk, b.position(), 8, java.nio.charset.StandardCharsets.US_ASCII));
      int token = b.get(b.position() + 8) & 0xFF;
      assertEquals(6, token & 0x0F, String.format("token 0x%02x: level of 64 KiB blocks", token));
      int compressed = b.getInt(b.position() + 9);
      int decompressed = b.getInt(b.position() + 13);
      assertTrue(decompressed <= 64 << 10, "block of " + decompressed + " bytes");
      if (decompressed == 64 << 10) {
        full++;
      }
      b.position(b.position() + 21 + compressed);
    }
    assertEquals(0, b.remaining(), "bytes after the last block");
    assertEquals(300_000 / (64 << 10), full, "full 64 KiB blocks");
  }

  @Test
  void zstdLevelDecodes() throws Exception {
    ByteArrayOutputStream[] want = Payloads.expected(3);
    CommitResult res = writeOne(2, OpenOptions.of(Codec.ZSTD, ChecksumAlgorithm.ADLER32).withLevel(3), want);
    RoundTripIT.check(RUNNING.daemon().outputDir(APP, EXEC), 2, 0, Codec.ZSTD, ChecksumAlgorithm.ADLER32, res, want);
    ByteArrayOutputStream[] want19 = Payloads.expected(3);
    CommitResult res19 = writeOne(3, OpenOptions.of(Codec.ZSTD, ChecksumAlgorithm.ADLER32).withLevel(19), want19);
    RoundTripIT.check(RUNNING.daemon().outputDir(APP, EXEC), 3, 0, Codec.ZSTD, ChecksumAlgorithm.ADLER32, res19, want19);
  }

  @Test
  void badValuesAreRefusedNamingTheField() throws Exception {
    record Bad(OpenOptions opts, String field) {}
    for (Bad bad :
        List.of(
            new Bad(OpenOptions.of(Codec.LZ4, ChecksumAlgorithm.DEFAULT).withLevel(3), "OpenMapOutput.level 3"),
            new Bad(OpenOptions.of(Codec.LZ4, ChecksumAlgorithm.DEFAULT).withBlockSize(32), "OpenMapOutput.block_size 32"),
            new Bad(OpenOptions.of(Codec.ZSTD, ChecksumAlgorithm.DEFAULT).withLevel(23), "OpenMapOutput.level 23"),
            new Bad(OpenOptions.of(Codec.ZSTD, ChecksumAlgorithm.DEFAULT).withBlockSize(1 << 16), "OpenMapOutput.block_size 65536"),
            new Bad(OpenOptions.of(Codec.NONE, ChecksumAlgorithm.DEFAULT).withLevel(-1), "OpenMapOutput.level -1"))) {
      ShuffledException e =
          assertThrows(ShuffledException.class, () -> RUNNING.client().openMapOutput(9, 0, 1, bad.opts()));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
      assertTrue(e.daemonMessage().contains(bad.field()), e.daemonMessage() + ": want " + bad.field());
    }
    assertThrows(IllegalArgumentException.class, () -> OpenOptions.DEFAULTS.withBlockSize(-1));
    assertThrows(IllegalArgumentException.class, () -> OpenOptions.DEFAULTS.withBlockSize((32 << 20) + 1));
  }

  @Test
  void kudoMapOutputOpensAndCommits() throws Exception {
    assertTrue(RUNNING.client().serverInfo().has(ServerInfo.FEATURE_KUDO), RUNNING.client().serverInfo().toString());
    List<SchemaField> schema = List.of(new SchemaField("id", "bigint"), new SchemaField("price", "decimal(12,2)"));
    OpenOptions opts = OpenOptions.of(Codec.LZ4, ChecksumAlgorithm.ADLER32).withKudoSchema(schema);
    try (MapOutput m = RUNNING.client().openMapOutput(20, 0, 4, opts)) {
      CommitResult res = m.commit();
      assertArrayEquals(new long[4], res.lengths(), "a kudo map output without batches");
    }
    // The daemon reads the schema: a type it does not know is refused, naming the column.
    ShuffledException e =
        assertThrows(
            ShuffledException.class,
            () ->
                RUNNING.client().openMapOutput(
                    20, 1, 4, opts.withKudoSchema(List.of(new SchemaField("x", "no_such_type")))));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
    assertTrue(e.daemonMessage().contains("no_such_type"), e.daemonMessage());
    // Opaque batches do not go into a columnar map output.
    try (MapOutput m = RUNNING.client().openMapOutput(20, 2, 1, opts)) {
      assertThrows(ShuffledException.class, () -> m.writeOpaque(new byte[] {1}, new long[] {0, 1}));
    }
    assertThrows(IllegalArgumentException.class, () -> new SchemaField("x", ""));
    assertThrows(IllegalArgumentException.class, () -> new SchemaField("a\0b", "int"));
  }

  @Test
  void statsCountCommitsAndAborts() throws Exception {
    try (ShuffledClient c = RUNNING.daemon().connect()) {
      c.register(APP, "exec-stats");
      Map<String, Long> before = c.stats();
      long commits = before.get(ShuffledClient.STAT_COMMITS_TOTAL);
      long aborts = before.get(ShuffledClient.STAT_ABORTS_TOTAL);
      for (int i = 0; i < 3; i++) {
        try (MapOutput m = c.openMapOutput(30, i, 1, OpenOptions.DEFAULTS)) {
          m.writeOpaque(new byte[] {1, 2}, new long[] {0, 2});
          m.commit();
        }
      }
      c.openMapOutput(30, 9, 1, OpenOptions.DEFAULTS).abort();
      Map<String, Long> after = c.stats();
      assertEquals(commits + 3, after.get(ShuffledClient.STAT_COMMITS_TOTAL), before + " -> " + after);
      assertEquals(aborts + 1, after.get(ShuffledClient.STAT_ABORTS_TOTAL), before + " -> " + after);
    }
  }
}
