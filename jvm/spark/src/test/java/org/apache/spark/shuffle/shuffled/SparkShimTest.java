package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.shuffled.client.OpenOptions;
import dev.shuffled.client.ShuffledClient;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The version check and the calls that differ between Spark minors, on the Spark of the build's
 * profile (the tests' classpath), and a failure after the daemon's commit.
 */
class SparkShimTest {
  private static final SparkShim.Build JAR4 = new SparkShim.Build(
      "shuffled-spark-4_2.13-0.1.0-dev.jar", List.of("4.0", "4.1", "4.2", "4.3"), "2.13",
      "4.0.4");
  private static final SparkShim.Build JAR35 = new SparkShim.Build(
      "shuffled-spark-3.5_2.12-0.1.0-dev.jar", List.of("3.5"), "2.12", "3.5.9");

  @TempDir Path dir;

  @Test
  void minorOfAVersion() {
    for (String[] c : new String[][] {
        {"4.2.1", "4.2"}, {"3.5.9", "3.5"}, {"4.2.0-preview1", "4.2"}, {"2.13.18", "2.13"},
        {"4.3", "4.3"}, {"4.3-SNAPSHOT", "4.3"}}) {
      assertEquals(c[1], SparkShim.minor(c[0]), "minor(" + c[0] + ")");
    }
  }

  @Test
  void aJarRunsOnlyOnTheMinorsAndScalaItWasBuiltFor() {
    for (String v : List.of("4.0.5", "4.1.4", "4.2.1", "4.3.0", "4.2.0-preview1")) {
      assertNull(SparkShim.mismatch(JAR4, v, "2.13.18"), "the 4.x jar on Spark " + v);
    }
    assertNull(SparkShim.mismatch(JAR35, "3.5.9", "2.12.18"), "the 3.5 jar on Spark 3.5.9");
    String[][] refused = {
        {"4", "3.5.9", "2.12.18"}, {"4", "4.4.0", "2.13.18"}, {"4", "4.2.1", "2.12.18"},
        {"3.5", "4.0.5", "2.13.16"}, {"3.5", "3.4.4", "2.12.17"}};
    for (String[] c : refused) {
      SparkShim.Build b = c[0].equals("4") ? JAR4 : JAR35;
      String m = SparkShim.mismatch(b, c[1], c[2]);
      assertTrue(m != null && m.contains(b.jar()) && m.contains("Spark " + c[1])
              && m.contains("Scala " + c[2]) && m.contains("built for Spark " + b.minors().get(0)),
          "the " + c[0] + " jar on Spark " + c[1] + " (Scala " + c[2] + "): " + m);
    }
  }

  @Test
  void thisBuildRunsOnItsOwnSpark() {
    // The tests run on the Spark and Scala of the build's profile, which the jar names.
    SparkShim.check();
    assertTrue(SparkShim.BUILD.minors().contains(SparkShim.minor(SparkShim.SPARK_VERSION)),
        SparkShim.BUILD.describe() + "; Spark " + SparkShim.SPARK_VERSION);
    String minor = SparkShim.minor(SparkShim.SPARK_VERSION);
    boolean rowChecksums = !minor.equals("3.5") && !minor.equals("4.0");
    assertEquals(rowChecksums, SparkShim.hasRowChecksums(), "row checksums on Spark " + minor);
  }

  @Test
  void noRowChecksumsAggregateToZero() {
    assertEquals(0, SparkShim.aggregate(null), "no row checksums: 0, as Spark's writers report");
  }

  @Test
  void failureAfterTheCommitFailsTheTaskAndRemovesTheOutput() throws IOException {
    int[] removed = {0};
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, ShuffledShuffleWriterTest.PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      ShuffledShuffleWriter<Integer, String, String> w = new ShuffledShuffleWriter<>(c, null, 7,
          null, new ShuffledShuffleWriterTest.Metrics(), OpenOptions.DEFAULTS, 1 << 20,
          Duration.ofSeconds(1), null, null, () -> removed[0]++);
      w.writeBatches(3, new ShuffledShuffleWriterTest.Iter(ShuffledShuffleWriterTest.records(20)),
          new ShuffledShuffleWriterTest.ModPartitioner(),
          new ShuffledShuffleWriterTest.Lines(true, 64));
      // The daemon commits 4 partitions; a task of 5 cannot make a map status of them.
      IOException e = assertThrows(IOException.class,
          () -> w.commit(3, ShuffledShuffleWriterTest.PARTS + 1, null));
      assertTrue(e.getMessage().contains("committed map output (shuffle 3, map 7)")
          && e.getMessage().contains("4 partition lengths, want 5"), e.getMessage());
      assertEquals(0, removed[0], "removed before the task stopped");
      assertTrue(w.stop(false).isEmpty());
      assertEquals(1, removed[0], "the failed task's committed output removed");
      assertEquals(FakeDaemon.COMMIT, d.types.get(d.types.size() - 1));
    }
  }

  @Test
  void committedOutputsStatusIsKept() throws IOException {
    int[] removed = {0};
    long[][] made = new long[1][];
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, ShuffledShuffleWriterTest.PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      ShuffledShuffleWriter<Integer, String, String> w = new ShuffledShuffleWriter<>(c, null, 7,
          null, new ShuffledShuffleWriterTest.Metrics(), OpenOptions.DEFAULTS, 1 << 20,
          Duration.ofSeconds(1), (l, sum) -> {
            made[0] = new long[] {l.length, sum};
            return null;
          }, null, () -> removed[0]++);
      w.writeBatches(3, new ShuffledShuffleWriterTest.Iter(ShuffledShuffleWriterTest.records(20)),
          new ShuffledShuffleWriterTest.ModPartitioner(),
          new ShuffledShuffleWriterTest.Lines(true, 64));
      w.commit(3, ShuffledShuffleWriterTest.PARTS, null);
      assertArrayEquals(new long[] {ShuffledShuffleWriterTest.PARTS, 0}, made[0],
          "the map status of 4 partition lengths and no row checksum (0)");
      assertEquals(ShuffledShuffleWriterTest.PARTS, w.getPartitionLengths().length);
      assertEquals(0, removed[0]);
    }
  }
}
