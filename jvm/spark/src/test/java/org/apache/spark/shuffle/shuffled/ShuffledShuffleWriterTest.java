package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.*;

import dev.shuffled.client.ErrorCode;
import dev.shuffled.client.OpenOptions;
import dev.shuffled.client.ShuffledClient;
import dev.shuffled.client.ShuffledException;
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
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.Option;
import scala.Product2;
import scala.Tuple2;
import scala.reflect.ClassTag;

/**
 * The writer's batches as a daemon reads them (a fake daemon): cut where they were, and the final
 * flush of a task marked LAST when the daemon announces the last-batch feature, never an earlier
 * batch.
 */
class ShuffledShuffleWriterTest {
  static final int PARTS = 4;

  @TempDir Path dir;

  /** Records (i, "value-i"): partition i mod PARTS. */
  static List<Product2<Integer, String>> records(int n) {
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
              batchBytes, Duration.ofSeconds(1), null, null, null);
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

  /** A writer of map 7 on {@code c}, Spark's writer being {@code spark} (null: none). */
  private static ShuffledShuffleWriter<Integer, String, String> writer(
      ShuffledClient c, Duration reconnectTimeout, ShuffleWriter<Integer, String> spark) {
    return new ShuffledShuffleWriter<>(c, null, 7, null, new Metrics(),
        OpenOptions.DEFAULTS.withPlane(dev.shuffled.client.DataPlane.INLINE), 1 << 20,
        reconnectTimeout, null, spark == null ? null : () -> spark, null);
  }

  private static long opens(FakeDaemon d) {
    return d.types.stream().filter(t -> t == FakeDaemon.OPEN).count();
  }

  @Test
  void drainingDaemonIsWaitedFor() throws IOException {
    // A daemon draining on SIGTERM answers Open with Unavailable; the protocol says to retry on
    // a restarted daemon, the README to wait up to spark.shuffled.reconnectTimeout.
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      d.failOpens(FakeDaemon.UNAVAILABLE, 3);
      ShuffledShuffleWriter<Integer, String, String> w = writer(c, Duration.ofSeconds(30), null);
      long t0 = System.nanoTime();
      w.writeBatches(3, new Iter(records(20)), new ModPartitioner(), new Lines(true, 64));
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertEquals(4, opens(d), "Opens: three answered Unavailable, then the one that worked");
      assertTrue(ms >= 300, "retried after " + ms + " ms, want backoff of 50+100+200 ms");
      assertEquals(PARTS, w.output().commit().lengths().length);
    }
  }

  @Test
  void drainingDaemonPastTheReconnectTimeoutFailsTheTask() throws IOException {
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      d.failOpens(FakeDaemon.UNAVAILABLE, 1000);
      ShuffledShuffleWriter<Integer, String, String> w = writer(c, Duration.ofMillis(400), null);
      long t0 = System.nanoTime();
      IOException e = assertThrows(IOException.class, () -> w.start(3, PARTS));
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(ms >= 250 && ms < 5000, "gave up after " + ms + " ms");
      assertTrue(e.getMessage().contains("draining (it answered Unavailable)"), e.getMessage());
      assertTrue(e.getMessage().contains("spark.shuffled.reconnectTimeout=400ms"), e.getMessage());
      assertTrue(opens(d) >= 3, opens(d) + " Opens");
    }
  }

  @Test
  void otherDaemonErrorsAreNotRetried() throws IOException {
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      d.failOpens(FakeDaemon.INVALID_ARGUMENT, 1);
      ShuffledShuffleWriter<Integer, String, String> w =
          writer(c, Duration.ofSeconds(30), new StubWriter());
      ShuffledException e = assertThrows(ShuffledException.class, () -> w.start(3, PARTS));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
      assertEquals(1, opens(d));
      assertNull(w.fallback());
    }
  }

  @Test
  void daemonAtItsBoundsHandsTheTaskToSparksWriter() throws IOException {
    // ResourceExhausted at Open (too many open map outputs, the partition-state budget, a full
    // disk): no record has been read yet, so Spark's own writer writes the whole map output.
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      d.failOpens(FakeDaemon.RESOURCE_EXHAUSTED, 1);
      StubWriter spark = new StubWriter();
      ShuffledShuffleWriter<Integer, String, String> w = writer(c, Duration.ofSeconds(30), spark);
      assertFalse(w.start(3, PARTS), "Spark's writer takes the task");
      assertSame(spark, w.fallback());
      assertEquals(1, opens(d), "not retried");
      assertArrayEquals(spark.getPartitionLengths(), w.getPartitionLengths());
      assertTrue(w.stop(true).isEmpty());
      assertEquals(List.of(true), spark.stops, "stop goes to Spark's writer");

      // Without Spark's writer to hand it to, the task fails with the daemon's answer.
      d.failOpens(FakeDaemon.RESOURCE_EXHAUSTED, 1);
      ShuffledShuffleWriter<Integer, String, String> alone = writer(c, Duration.ofSeconds(30), null);
      ShuffledException e = assertThrows(ShuffledException.class, () -> alone.start(3, PARTS));
      assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
    }
  }

  @Test
  void sparksWriterGetsTheRecordsOfATaskHandedToIt() throws IOException {
    // ResourceExhausted at Open: write() hands every record to Spark's writer.
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      d.failOpens(FakeDaemon.RESOURCE_EXHAUSTED, 1);
      StubWriter spark = new StubWriter();
      ShuffledShuffleWriter<Integer, String, String> w = writer(c, Duration.ofSeconds(30), spark);
      List<Product2<Integer, String>> recs = records(5);
      assertTrue(w.handedOver(3, PARTS, new Iter(recs)), "Spark's writer takes the task");
      assertEquals(recs, spark.written, "the records Spark's writer wrote");
      assertEquals(1, opens(d));
    }
  }

  @Test
  void killedTaskOpeningItsOutputIsNotRetried() throws IOException {
    // Spark kills a task by interrupting it: an interrupt while the Open waits ends the task at
    // once with that interrupt, not after reconnectTimeout as if the daemon were away.
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      ShuffledShuffleWriter<Integer, String, String> w = writer(c, Duration.ofSeconds(30), null);
      Thread.currentThread().interrupt();
      java.io.InterruptedIOException e;
      try {
        e = assertThrows(java.io.InterruptedIOException.class, () -> w.start(3, PARTS));
      } finally {
        Thread.interrupted();
      }
      assertTrue(e.getMessage().contains("open map output 3/7"), e.getMessage());
      assertFalse(e.getMessage().contains("waiting for the shuffled daemon"), e.getMessage());
    }
  }

  @Test
  void killedTaskAbortsItsMapOutput() throws Exception {
    // Spark kills a task by interrupting its thread, then calls stop(false) on that thread.
    try (FakeDaemon d = new FakeDaemon(dir, 0, 1 << 19, PARTS);
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      ShuffledShuffleWriter<Integer, String, String> w = writer(c, Duration.ofSeconds(30), null);
      assertTrue(w.start(3, PARTS));
      Thread.currentThread().interrupt();
      try {
        assertTrue(w.stop(false).isEmpty());
        assertTrue(Thread.currentThread().isInterrupted(), "the interrupt is kept");
      } finally {
        Thread.interrupted();
      }
      assertTrue(d.awaitRequest(FakeDaemon.ABORT), "no Abort reached the daemon: " + d.types);
    }
  }

  @Test
  void piecesAndTheirBatchHeadFitMaxFrame() throws IOException {
    // A daemon whose max_inline is its whole max_frame: a piece of max_inline bytes plus the
    // Batch head (8 bytes per partition offset and more) would be a frame over max_frame.
    List<Product2<Integer, String>> recs = new ArrayList<>();
    for (int i = 0; i < 3000; i++) {
      recs.add(new Tuple2<>(i, "v".repeat(1000)));
    }
    FakeDaemon d = new FakeDaemon(dir, 0, 1 << 20, PARTS);
    try (d;
        ShuffledClient c = ShuffledClient.connect(d.socket)) {
      c.register("app", "exec");
      ShuffledShuffleWriter<Integer, String, String> w =
          new ShuffledShuffleWriter<>(c, null, 7, null, new Metrics(),
              OpenOptions.DEFAULTS.withPlane(dev.shuffled.client.DataPlane.INLINE), 8 << 20,
              Duration.ofSeconds(1), null, null, null);
      w.writeBatches(3, new Iter(recs), new ModPartitioner(), new Lines(false, 1 << 20));
      w.output().commit();
    }
    assertTrue(d.batches.size() >= 3, d.batches.size() + " batches");
    int head = 8 + 4 + 4 + 8 * (PARTS + 1) + 4;
    for (FakeDaemon.Batch b : d.batches) {
      assertTrue(head + b.payload().length <= 1 << 20,
          "a Batch frame of " + (head + b.payload().length) + " bytes, max_frame " + (1 << 20));
    }
    assertArrayEquals(expected(recs), partitions(d), "partitions' bytes");
  }

  /** Spark's writer, as far as the fallback goes: remembers its stops. */
  private static final class StubWriter extends ShuffleWriter<Integer, String> {
    final List<Boolean> stops = new ArrayList<>();
    final List<Product2<Integer, String>> written = new ArrayList<>();

    @Override
    public void write(scala.collection.Iterator<Product2<Integer, String>> records) {
      while (records.hasNext()) {
        written.add(records.next());
      }
    }

    @Override
    public Option<MapStatus> stop(boolean success) {
      stops.add(success);
      return Option.empty();
    }

    @Override
    public long[] getPartitionLengths() {
      return new long[] {1, 2, 3, 4};
    }
  }

  /** Partition = key mod PARTS. */
  static final class ModPartitioner extends Partitioner {
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
  static final class Lines extends Serializer {
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

  static final class Iter
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

  static final class Metrics implements ShuffleWriteMetricsReporter {
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
