package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Opaque payloads through the real daemon and back from disk: Spark's index, data and checksum
 * files read with Spark's codec libraries.
 */
class RoundTripIT {
  private static final String APP = "app-rt";
  private static final String EXEC = "exec-1";
  private static int nextShuffle;

  @RegisterExtension static final RunningDaemon RUNNING = new RunningDaemon(APP, EXEC);

  static Stream<Arguments> codecsAndChecksums() {
    List<Arguments> a = new ArrayList<>();
    for (Codec c : List.of(Codec.NONE, Codec.LZ4, Codec.ZSTD, Codec.SNAPPY)) {
      for (ChecksumAlgorithm s :
          List.of(ChecksumAlgorithm.ADLER32, ChecksumAlgorithm.CRC32, ChecksumAlgorithm.CRC32C)) {
        a.add(Arguments.of(c, s));
      }
    }
    a.add(Arguments.of(Codec.LZ4, ChecksumAlgorithm.NONE));
    return a.stream();
  }

  /**
   * Three batches: data in the high partitions, then in the low ones (partition ids going
   * backwards), then in all; partitions 2 and 7 stay empty throughout.
   */
  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("codecsAndChecksums")
  void backwardsBatchesAndEmptyPartitions(Codec codec, ChecksumAlgorithm algo) throws Exception {
    int n = 10;
    int shuffle = ++nextShuffle;
    Random r = new Random(shuffle);
    ByteArrayOutputStream[] want = Payloads.expected(n);
    int[][] batches = {
      {0, 0, 0, 0, 0, 900, 70000, 0, 3, 1},
      {5000, 1, 0, 40000, 0, 0, 0, 0, 0, 0},
      {10, 20, 0, 30, 40, 50, 60, 0, 80, 90},
    };
    CommitResult res;
    try (MapOutput m = RUNNING.client().openMapOutput(shuffle, 4, n, OpenOptions.of(codec, algo))) {
      for (int[] sizes : batches) {
        Payloads.Batch b = Payloads.batch(r, sizes, want);
        m.writeOpaque(b.data(), b.offsets());
      }
      res = m.commit();
      assertTrue(m.isFinished());
    }
    assertFalse(res.existing());
    assertTrue(res.runs() >= 2, "batches going backwards make several runs, got " + res.runs());
    check(RUNNING.daemon().outputDir(APP, EXEC), shuffle, 4, codec, algo, res, want);
  }

  static void check(
      Path dir,
      int shuffle,
      long map,
      Codec codec,
      ChecksumAlgorithm algo,
      CommitResult res,
      ByteArrayOutputStream[] want)
      throws Exception {
    SparkFiles.Output out = SparkFiles.read(dir, shuffle, map, algo);
    assertArrayEquals(out.lengths(), res.lengths(), "CommitResult lengths = index file");
    assertArrayEquals(out.checksums(), res.checksums(), "CommitResult checksums = checksum file");
    for (int p = 0; p < want.length; p++) {
      byte[] w = want[p].toByteArray();
      if (w.length == 0) {
        assertEquals(0, out.lengths()[p], "empty partition " + p + " takes no bytes");
      }
      if (algo != ChecksumAlgorithm.NONE) {
        assertEquals(
            SparkFiles.checksum(algo, out.onDisk()[p]),
            out.checksums()[p],
            algo + " of partition " + p);
      }
      byte[] got = SparkFiles.decompress(codec, out.onDisk()[p]);
      assertArrayEquals(w, got, codec + ": partition " + p + " decompressed");
      if (codec != Codec.NONE && w.length > 10000) {
        assertTrue(out.onDisk()[p].length < w.length, codec + " compressed partition " + p);
      }
    }
  }

  @Test
  void twoThousandPartitions() throws Exception {
    int n = 2000;
    int shuffle = ++nextShuffle;
    Random r = new Random(7);
    ByteArrayOutputStream[] want = Payloads.expected(n);
    try (MapOutput m =
        RUNNING.client().openMapOutput(shuffle, 1, n, OpenOptions.of(Codec.ZSTD, ChecksumAlgorithm.ADLER32))) {
      for (int b = 0; b < 3; b++) {
        int[] sizes = new int[n];
        for (int p = 0; p < n; p++) {
          sizes[p] = (p + b) % 3 == 0 ? 0 : r.nextInt(200);
        }
        Payloads.Batch batch = Payloads.batch(r, sizes, want);
        m.writeOpaque(ByteBuffer.wrap(batch.data()), batch.offsets());
      }
      CommitResult res = m.commit();
      assertEquals(n, res.lengths().length);
      check(RUNNING.daemon().outputDir(APP, EXEC), shuffle, 1, Codec.ZSTD, ChecksumAlgorithm.ADLER32, res, want);
    }
  }

  @Test
  void directAndSlicedBuffers() throws Exception {
    int shuffle = ++nextShuffle;
    ByteArrayOutputStream[] want = Payloads.expected(2);
    Payloads.Batch b = Payloads.batch(new Random(3), new int[] {3000, 5}, want);
    ByteBuffer direct = ByteBuffer.allocateDirect(b.data().length + 10);
    direct.position(10);
    direct.put(b.data());
    direct.position(10);
    try (MapOutput m =
        RUNNING.client().openMapOutput(shuffle, 2, 2, OpenOptions.of(Codec.SNAPPY, ChecksumAlgorithm.CRC32))) {
      m.writeOpaque(direct, b.offsets());
      assertEquals(10, direct.position(), "writeOpaque leaves the position");
      CommitResult res = m.commit();
      check(RUNNING.daemon().outputDir(APP, EXEC), shuffle, 2, Codec.SNAPPY, ChecksumAlgorithm.CRC32, res, want);
    }
  }

  @Test
  void sparkLocalDirsLayout() throws Exception {
    List<Path> dirs = List.of(RUNNING.daemon().localRoot.resolve("blockmgr-a"), RUNNING.daemon().localRoot.resolve("blockmgr-b"));
    for (Path d : dirs) {
      Files.createDirectories(d);
    }
    try (ShuffledClient c = RUNNING.daemon().connect()) {
      List<String> resolved =
          c.register(APP, "exec-local", dirs.stream().map(Path::toString).toList(), 8);
      assertEquals(2, resolved.size(), "resolved dirs " + resolved);
      ByteArrayOutputStream[] want = Payloads.expected(3);
      Payloads.Batch b = Payloads.batch(new Random(5), new int[] {100, 0, 20000}, want);
      CommitResult res;
      try (MapOutput m =
          c.openMapOutput(9, 42, 3, OpenOptions.of(Codec.LZ4, ChecksumAlgorithm.ADLER32))) {
        m.writeOpaque(b.data(), b.offsets());
        res = m.commit();
      }
      String base = SparkFiles.base(9, 42);
      Path index = SparkFiles.hashed(dirs, 8, base + ".index");
      Path data = SparkFiles.hashed(dirs, 8, base + ".data");
      Path sum = SparkFiles.hashed(dirs, 8, base + ".checksum.ADLER32");
      assertTrue(Files.exists(index), "index where Spark looks: " + index);
      SparkFiles.Output out = SparkFiles.read(index, data, sum);
      assertArrayEquals(out.lengths(), res.lengths());
      assertArrayEquals(out.checksums(), res.checksums());
      for (int p = 0; p < 3; p++) {
        assertArrayEquals(want[p].toByteArray(), SparkFiles.decompress(Codec.LZ4, out.onDisk()[p]));
      }
    }
  }
}
