package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.*;

import dev.shuffled.client.OpenOptions;
import dev.shuffled.client.ShuffledClient;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.Partitioner;
import org.apache.spark.serializer.DeserializationStream;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.Product2;
import scala.Tuple2;
import scala.reflect.ClassTag;

/**
 * The writer's batches as a daemon reads them (a fake daemon): cut where they were, and the final
 * flush of a task marked LAST when the daemon announces the last-batch feature, never an earlier
 * batch.
 */
class ShuffledShuffleWriterTest {
  private static final int PARTS = 4;

  @TempDir Path dir;

  /** Records (i, "value-i"): partition i mod PARTS. */
  private static List<Product2<Integer, String>> records(int n) {
    List<Product2<Integer, String>> r = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      r.add(new Tuple2<>(i, "value-" + i));
    }
    return r;
  }

  /** Runs the writer's batches over {@code records}, then commits; returns the daemon it used. */
  private FakeDaemon run(
      long features, long maxInline, long batchBytes, Serializer ser,
      List<Product2<Integer, String>> records) throws IOException {
    FakeDaemon d = new FakeDaemon(dir, features, maxInline, PARTS);
    try (d;
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      ShuffledShuffleWriter<Integer, String, String> w =
          new ShuffledShuffleWriter<>(c, null, 7, null, new Metrics(), OpenOptions.DEFAULTS,
              batchBytes, Duration.ofSeconds(1), null);
      w.writeBatches(3, new Iter(records), new ModPartitioner(), ser);
      w.output().commit();
    }
    return d;
  }

  /** What each partition holds over all batches of {@code d}. */
  private static String[] partitions(FakeDaemon d) {
    ByteArrayOutputStream[] out = new ByteArrayOutputStream[PARTS];
    for (int p = 0; p < PARTS; p++) {
      out[p] = new ByteArrayOutputStream();
    }
    for (FakeDaemon.Batch b : d.batches) {
      assertEquals(PARTS + 1, b.offsets().length);
      for (int p = 0; p < PARTS; p++) {
        int from = (int) b.offsets()[p];
        out[p].write(b.payload(), from, (int) b.offsets()[p + 1] - from);
      }
    }
    String[] s = new String[PARTS];
    for (int p = 0; p < PARTS; p++) {
      s[p] = out[p].toString(StandardCharsets.UTF_8);
    }
    return s;
  }

  private static String[] expected(List<Product2<Integer, String>> records) {
    StringBuilder[] b = new StringBuilder[PARTS];
    for (int p = 0; p < PARTS; p++) {
      b[p] = new StringBuilder();
    }
    for (Product2<Integer, String> r : records) {
      b[r._1() % PARTS].append(r._1()).append('=').append(r._2()).append('\n');
    }
    String[] s = new String[PARTS];
    for (int p = 0; p < PARTS; p++) {
      s[p] = b[p].toString();
    }
    return s;
  }

  private static List<Integer> flags(FakeDaemon d) {
    return d.batches.stream().map(FakeDaemon.Batch::flags).toList();
  }

  /** Every batch but the last with flags 0, the last with {@code last}. */
  private static void assertOnlyLastMarked(FakeDaemon d, int last, String what) {
    List<Integer> want = new ArrayList<>();
    for (int i = 0; i < d.batches.size() - 1; i++) {
      want.add(0);
    }
    want.add(last);
    assertEquals(want, flags(d), what + ": Batch flags, in order");
  }

  @Test
  void finalBatchOfAMultiBatchTaskIsMarkedLast() throws IOException {
    List<Product2<Integer, String>> recs = records(200);
    for (boolean relocatable : new boolean[] {true, false}) {
      String what = relocatable ? "one stream" : "a stream per partition";
      FakeDaemon with =
          run(FakeDaemon.FEATURE_LAST_BATCH, 1 << 19, 300, new Lines(relocatable, 64), recs);
      FakeDaemon without = run(0, 1 << 19, 300, new Lines(relocatable, 64), recs);
      assertTrue(with.batches.size() >= 5, what + ": " + with.batches.size() + " batches");
      assertOnlyLastMarked(with, FakeDaemon.LAST, what);
      assertOnlyLastMarked(without, 0, what + ", no last-batch feature");
      // The flag changes nothing else: the same batches, cut at the same bytes.
      assertEquals(with.batches.size(), without.batches.size(), what + ": batches");
      for (int i = 0; i < with.batches.size(); i++) {
        assertArrayEquals(with.batches.get(i).offsets(), without.batches.get(i).offsets());
        assertArrayEquals(with.batches.get(i).payload(), without.batches.get(i).payload());
      }
      assertArrayEquals(expected(recs), partitions(with), what + ": partitions' bytes");
      assertEquals(List.of(FakeDaemon.HELLO, FakeDaemon.REGISTER, FakeDaemon.OPEN),
          with.types.subList(0, 3));
      assertEquals(FakeDaemon.COMMIT, with.types.get(with.types.size() - 1));
    }
  }

  @Test
  void batchFilledByTheLastRecordIsMarkedLast() throws IOException {
    // batchBytes 1: every record fills a batch, the last one too; that batch must carry LAST
    // rather than go out unmarked inside the loop, leaving nothing for the final flush.
    List<Product2<Integer, String>> recs = records(7);
    for (boolean relocatable : new boolean[] {true, false}) {
      String what = relocatable ? "one stream" : "a stream per partition";
      FakeDaemon d = run(FakeDaemon.FEATURE_LAST_BATCH, 1 << 19, 1, new Lines(relocatable, 1), recs);
      assertTrue(d.batches.size() >= 2, what + ": " + d.batches.size() + " batches");
      assertOnlyLastMarked(d, FakeDaemon.LAST, what);
      assertArrayEquals(expected(recs), partitions(d), what + ": partitions' bytes");
    }
  }

  @Test
  void finalFlushInPiecesMarksOnlyTheLastPiece() throws IOException {
    // Streams that buffer everything until close: the final flush is the task's only one, over
    // max_inline, so it goes as several batches.
    List<Product2<Integer, String>> recs = records(200);
    FakeDaemon d =
        run(FakeDaemon.FEATURE_LAST_BATCH, 256, 1 << 20, new Lines(false, 1 << 20), recs);
    assertTrue(d.batches.size() >= 4, d.batches.size() + " batches");
    for (FakeDaemon.Batch b : d.batches) {
      assertTrue(b.payload().length <= 256, "a batch of " + b.payload().length + " bytes");
    }
    assertOnlyLastMarked(d, FakeDaemon.LAST, "pieces");
    assertArrayEquals(expected(recs), partitions(d), "partitions' bytes");
  }

  @Test
  void taskWithoutRecordsSendsNoBatch() throws IOException {
    FakeDaemon d = run(FakeDaemon.FEATURE_LAST_BATCH, 1 << 19, 300, new Lines(true, 64), List.of());
    assertEquals(List.of(), d.batches);
    assertEquals(
        List.of(FakeDaemon.HELLO, FakeDaemon.REGISTER, FakeDaemon.OPEN, FakeDaemon.COMMIT),
        d.types);
  }

  /** Partition = key mod PARTS. */
  private static final class ModPartitioner extends Partitioner {
    private static final long serialVersionUID = 1L;

    @Override
    public int numPartitions() {
      return PARTS;
    }

    @Override
    public int getPartition(Object key) {
      return (Integer) key % PARTS;
    }
  }

  /**
   * Writes each record as a line "key=value", through a buffer of {@code buffer} bytes; relocatable
   * or not as asked.
   */
  private static final class Lines extends Serializer {
    private final boolean relocatable;
    private final int buffer;

    Lines(boolean relocatable, int buffer) {
      this.relocatable = relocatable;
      this.buffer = buffer;
    }

    @Override
    public boolean supportsRelocationOfSerializedObjects() {
      return relocatable;
    }

    @Override
    public SerializerInstance newInstance() {
      return new SerializerInstance() {
        @Override
        public <T> ByteBuffer serialize(T t, ClassTag<T> tag) {
          throw new UnsupportedOperationException();
        }

        @Override
        public <T> T deserialize(ByteBuffer bytes, ClassTag<T> tag) {
          throw new UnsupportedOperationException();
        }

        @Override
        public <T> T deserialize(ByteBuffer bytes, ClassLoader loader, ClassTag<T> tag) {
          throw new UnsupportedOperationException();
        }

        @Override
        public SerializationStream serializeStream(OutputStream s) {
          return new LineStream(new BufferedOutputStream(s, buffer));
        }

        @Override
        public DeserializationStream deserializeStream(InputStream s) {
          throw new UnsupportedOperationException();
        }
      };
    }
  }

  /** Keys end with '=', values with a newline. */
  private static final class LineStream extends SerializationStream {
    private final OutputStream out;
    private boolean key = true;

    LineStream(OutputStream out) {
      this.out = out;
    }

    @Override
    public <T> SerializationStream writeObject(T t, ClassTag<T> tag) {
      try {
        out.write((t + (key ? "=" : "\n")).getBytes(StandardCharsets.UTF_8));
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      key = !key;
      return this;
    }

    @Override
    public void flush() {
      try {
        out.flush();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    @Override
    public void close() {
      try {
        out.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  private static final class Iter
      extends scala.collection.AbstractIterator<Product2<Integer, String>> {
    private final List<Product2<Integer, String>> records;
    private int next;

    Iter(List<Product2<Integer, String>> records) {
      this.records = records;
    }

    @Override
    public boolean hasNext() {
      return next < records.size();
    }

    @Override
    public Product2<Integer, String> next() {
      return records.get(next++);
    }
  }

  private static final class Metrics implements ShuffleWriteMetricsReporter {
    @Override
    public void incBytesWritten(long v) {}

    @Override
    public void incRecordsWritten(long v) {}

    @Override
    public void incWriteTime(long v) {}

    @Override
    public void decBytesWritten(long v) {}

    @Override
    public void decRecordsWritten(long v) {}
  }
}
