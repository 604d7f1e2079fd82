package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.shuffled.client.OpenOptions;
import dev.shuffled.client.ShuffledClient;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32;
import org.apache.spark.shuffle.checksum.RowBasedChecksum;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.Product2;

/**
 * Spark 4.1+'s row checksums through the plugin: each record the task reads goes to its
 * partition's RowBasedChecksum, and the map status carries their aggregate, the value Spark's own
 * writers report for the same records in any order.
 */
class RowChecksumTest {
  private static final int PARTS = ShuffledShuffleWriterTest.PARTS;

  @TempDir Path dir;

  /** A row checksum as SQL's is, over the row: here CRC32 of "key=value". */
  static final class Crc32Row extends RowBasedChecksum {
    private static final long serialVersionUID = 1L;

    @Override
    public long calculateRowChecksum(Object key, Object value) {
      CRC32 c = new CRC32();
      c.update((key + "=" + value).getBytes(StandardCharsets.UTF_8));
      return c.getValue();
    }
  }

  private static RowBasedChecksum[] fresh() {
    RowBasedChecksum[] s = new RowBasedChecksum[PARTS];
    for (int i = 0; i < PARTS; i++) {
      s[i] = new Crc32Row();
    }
    return s;
  }

  /** What Spark's writers report for records: each updates its partition's checksum. */
  private static long spark(List<Product2<Integer, String>> records) {
    RowBasedChecksum[] s = fresh();
    for (Product2<Integer, String> r : records) {
      s[r._1() % PARTS].update(r._1(), r._2());
    }
    return RowBasedChecksum.getAggregatedChecksumValue(s);
  }

  @Test
  void theShimFindsThisSparksRowChecksums() {
    assertTrue(SparkShim.hasRowChecksums(), "Spark " + SparkShim.SPARK_VERSION);
  }

  @Test
  void checksummedRecordsPassThroughAndUpdateTheirPartitions() {
    List<Product2<Integer, String>> recs = ShuffledShuffleWriterTest.records(500);
    RowBasedChecksum[] sums = fresh();
    scala.collection.Iterator<Product2<Integer, String>> it = SparkShim.checksummed(
        new ShuffledShuffleWriterTest.Iter(recs), new ShuffledShuffleWriterTest.ModPartitioner(),
        sums);
    List<Product2<Integer, String>> seen = new ArrayList<>();
    while (it.hasNext()) {
      seen.add(it.next());
    }
    assertEquals(recs, seen, "the records, unchanged and in order");
    // The same records in reverse order, as Spark's writers would checksum them: equal.
    List<Product2<Integer, String>> reversed = new ArrayList<>(recs);
    java.util.Collections.reverse(reversed);
    long want = spark(reversed);
    assertNotEquals(0, want);
    assertEquals(want, SparkShim.aggregate(sums));
    long[] per = new long[PARTS];
    RowBasedChecksum[] ref = fresh();
    for (Product2<Integer, String> r : reversed) {
      ref[r._1() % PARTS].update(r._1(), r._2());
    }
    long[] got = new long[PARTS];
    for (int p = 0; p < PARTS; p++) {
      per[p] = ref[p].getValue();
      got[p] = sums[p].getValue();
    }
    assertArrayEquals(per, got, "each partition's checksum");
    // One value changed: another checksum.
    List<Product2<Integer, String>> other = new ArrayList<>(recs);
    other.set(17, new scala.Tuple2<>(17, "value-x"));
    assertNotEquals(want, spark(other));
  }

  @Test
  void mapStatusCarriesTheAggregate() throws IOException {
    List<Product2<Integer, String>> recs = ShuffledShuffleWriterTest.records(300);
    long[] made = {0};
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      ShuffledShuffleWriter<Integer, String, String> w = new ShuffledShuffleWriter<>(c, null, 9,
          null, new ShuffledShuffleWriterTest.Metrics(), OpenOptions.DEFAULTS, 1 << 20,
          Duration.ofSeconds(1), (l, sum) -> {
            made[0] = sum;
            return null;
          }, null, null);
      RowBasedChecksum[] sums = fresh();
      ShuffledShuffleWriterTest.ModPartitioner part =
          new ShuffledShuffleWriterTest.ModPartitioner();
      w.writeBatches(3, SparkShim.checksummed(new ShuffledShuffleWriterTest.Iter(recs), part, sums),
          part, new ShuffledShuffleWriterTest.Lines(true, 64));
      w.commit(3, PARTS, sums);
    }
    assertEquals(spark(recs), made[0], "the map status's row checksum");
    assertNotEquals(0, made[0]);
  }
}
