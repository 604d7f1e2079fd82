package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * MapOutput.markLast against the real daemon: the LAST flag changes no byte of the output, and the
 * daemon refuses a batch after a LAST one.
 */
class LastBatchIT {
  private static Daemon daemon;
  private static ShuffledClient client;
  private static final String APP = "app-last";
  private static final String EXEC = "exec-1";
  private static int nextShuffle;

  /** Partition sizes of four batches: ids going backwards and forwards, so several runs. */
  private static final int[][] BATCHES = {
    {0, 0, 0, 0, 900, 70000, 0, 3},
    {5000, 1, 0, 40000, 0, 0, 0, 0},
    {10, 20, 0, 30, 40, 50, 60, 0},
    {0, 0, 0, 0, 0, 7000, 0, 100},
  };

  @BeforeAll
  static void start() throws Exception {
    daemon = Daemon.start();
    client = daemon.connect();
    client.register(APP, EXEC);
    assertTrue(
        client.serverInfo().has(ServerInfo.FEATURE_LAST_BATCH),
        "the daemon announces last-batch: features 0x"
            + Long.toHexString(client.serverInfo().features()));
  }

  @AfterAll
  static void stop() throws Exception {
    client.close();
    daemon.close();
  }

  /** Writes BATCHES (then an empty batch when {@code emptyLast}), marking the last one or not. */
  private static CommitResult write(
      int shuffle, long map, Codec codec, boolean mark, boolean emptyLast,
      ByteArrayOutputStream[] want) throws Exception {
    Random r = new Random(42);
    try (MapOutput m =
        client.openMapOutput(shuffle, map, 8, OpenOptions.of(codec, ChecksumAlgorithm.CRC32))) {
      for (int i = 0; i < BATCHES.length; i++) {
        if (mark && i == BATCHES.length - 1 && !emptyLast) {
          m.markLast();
        }
        Payloads.Batch b = Payloads.batch(r, BATCHES[i], want);
        m.writeOpaque(b.data(), b.offsets());
      }
      if (emptyLast) {
        if (mark) {
          m.markLast();
        }
        m.writeOpaque(new byte[0], new long[9]);
      }
      return m.commit();
    }
  }

  @ParameterizedTest
  @EnumSource(
      value = Codec.class,
      names = {"NONE", "LZ4", "ZSTD"})
  void markedOutputEqualsUnmarked(Codec codec) throws Exception {
    for (boolean emptyLast : new boolean[] {false, true}) {
      int shuffle = ++nextShuffle;
      ByteArrayOutputStream[] wantPlain = Payloads.expected(8);
      ByteArrayOutputStream[] wantMarked = Payloads.expected(8);
      CommitResult plain = write(shuffle, 1, codec, false, emptyLast, wantPlain);
      CommitResult marked = write(shuffle, 2, codec, true, emptyLast, wantMarked);
      String what = codec + (emptyLast ? ", an empty last batch" : "") + ": ";
      assertTrue(marked.runs() >= 2, what + "several runs, got " + marked.runs());
      assertEquals(plain.runs(), marked.runs(), what + "runs");
      assertArrayEquals(plain.lengths(), marked.lengths(), what + "lengths");
      assertArrayEquals(plain.checksums(), marked.checksums(), what + "checksums");
      Path dir = daemon.outputDir(APP, EXEC);
      RoundTripIT.check(dir, shuffle, 2, codec, ChecksumAlgorithm.CRC32, marked, wantMarked);
      for (String ext : List.of(".data", ".index", ".checksum.CRC32")) {
        assertArrayEquals(
            Files.readAllBytes(dir.resolve(SparkFiles.base(shuffle, 1) + ext)),
            Files.readAllBytes(dir.resolve(SparkFiles.base(shuffle, 2) + ext)),
            what + ext + " with LAST = without");
      }
    }
  }

  @Test
  void writeAfterTheLastIsRefusedLocally() throws Exception {
    int shuffle = ++nextShuffle;
    try (MapOutput m =
        client.openMapOutput(shuffle, 1, 2, OpenOptions.of(Codec.NONE, ChecksumAlgorithm.CRC32))) {
      m.markLast();
      m.writeOpaque("abc".getBytes(), new long[] {0, 2, 3});
      IllegalStateException e =
          assertThrows(
              IllegalStateException.class,
              () -> m.writeOpaque("de".getBytes(), new long[] {0, 1, 2}));
      assertTrue(e.getMessage().contains("map output " + shuffle + "/1"), e.getMessage());
      CommitResult res = m.commit();
      assertArrayEquals(new long[] {2, 1}, res.lengths(), "only the batch before the refused one");
    }
  }

  /** Past the client's check: the daemon refuses the batch and aborts the map output. */
  @Test
  void daemonRefusesABatchAfterTheLast() throws Exception {
    int shuffle = ++nextShuffle;
    long aborts0 = client.stats().get(ShuffledClient.STAT_ABORTS_TOTAL);
    MapOutput m =
        client.openMapOutput(shuffle, 1, 2, OpenOptions.of(Codec.LZ4, ChecksumAlgorithm.CRC32));
    m.writeOpaque("abc".getBytes(), new long[] {0, 2, 3});
    m.markLast();
    m.writeOpaque("def".getBytes(), new long[] {0, 1, 3});
    m.forgetLastAndFailure();
    ShuffledException e =
        assertThrows(
            ShuffledException.class, () -> m.writeOpaque("gh".getBytes(), new long[] {0, 1, 2}));
    assertEquals(ErrorCode.FAILED_PRECONDITION, e.code(), e.getMessage());
    assertTrue(e.daemonMessage().contains("after its last batch"), e.daemonMessage());
    m.forgetLastAndFailure();
    e = assertThrows(ShuffledException.class, m::commit);
    assertEquals(ErrorCode.ABORTED, e.code(), "Commit after the refused batch: " + e.getMessage());
    assertTrue(m.isFinished());
    assertEquals(aborts0 + 1, Daemon.awaitStat(client, ShuffledClient.STAT_ABORTS_TOTAL, aborts0 + 1));
    assertFalse(
        Files.exists(daemon.outputDir(APP, EXEC).resolve(SparkFiles.base(shuffle, 1) + ".data")),
        "nothing committed");
    m.close();
  }
}
