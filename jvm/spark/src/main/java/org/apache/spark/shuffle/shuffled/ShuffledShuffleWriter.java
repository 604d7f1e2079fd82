package org.apache.spark.shuffle.shuffled;

import dev.shuffled.client.CommitResult;
import dev.shuffled.client.ErrorCode;
import dev.shuffled.client.MapOutput;
import dev.shuffled.client.OpenOptions;
import dev.shuffled.client.ShuffledClient;
import dev.shuffled.client.ShuffledException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.Product2;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Writes one map task's output through the shuffled daemon. The task thread serializes each record
 * with the shuffle's serializer into its partition's buffer; once {@code spark.shuffled.batchBytes}
 * are buffered, the partitions go to the daemon as one opaque batch of uncompressed bytes, which
 * the daemon compresses with Spark's codec and writes into the executor's local dirs. The commit's
 * partition lengths become the map status.
 *
 * <p>A serializer that supports relocation of serialized objects (Kryo with auto-reset, SQL's
 * UnsafeRow serializer) produces records that may be cut and concatenated at record boundaries, so
 * one serialization stream serves every partition, flushed after each record. Any other serializer
 * (Java serialization writes a stream header) gets one stream per partition, opened at the
 * partition's first record and kept across batches, so that each partition's decompressed bytes
 * are one valid stream.
 *
 * <p>The flush after the record iterator is exhausted is the map output's last batch, and is
 * marked so ({@link MapOutput#markLast()}): the daemon may start merging the output's runs before
 * commit. A task with no records sends no batch.
 *
 * <p>The map output is opened before the first record is read. A daemon that is away (restarting)
 * or draining (it answers Unavailable) is waited for, up to {@code
 * spark.shuffled.reconnectTimeout}. A daemon at one of its bounds (ResourceExhausted: too many
 * open map outputs, its partition-state budget, a full disk) has the task written by Spark's own
 * writer instead: no record has been read yet, so Spark's writer writes the whole map output, the
 * same files in the same place, and the task neither fails nor waits for other tasks to finish.
 *
 * <p>From Spark 4.1 on, when the shuffle asks for row checksums (SQL shuffles with {@code
 * spark.sql.shuffle.orderIndependentChecksum.enabled}, on by default from 4.2), every record the
 * task reads goes through its partition's checksum before it is serialized, and their aggregate
 * goes into the map status, as Spark's own writers do ({@link SparkShim#checksummed}).
 *
 * <p>Once the daemon has committed the map output, nothing may fail silently: an error while
 * making the map status fails the task with an IOException that says the output was committed,
 * and a task that fails after the commit has the committed output's files removed, as Spark's own
 * writers remove theirs.
 */
final class ShuffledShuffleWriter<K, V, C> extends ShuffleWriter<K, V> {
  private static final ClassTag<Object> OBJECT = ClassTag$.MODULE$.Object();
  private static final Logger LOG = LoggerFactory.getLogger(ShuffledShuffleWriter.class);
  private static final AtomicBoolean WARNED_EXHAUSTED = new AtomicBoolean();

  private final ShuffledClient client;
  private final BaseShuffleHandle<K, V, C> handle;
  private final long mapId;
  private final TaskContext context;
  private final ShuffleWriteMetricsReporter metrics;
  private final OpenOptions options;
  private final long batchBytes;
  private final Duration reconnectTimeout;
  /** Makes the map status of the committed lengths and row checksum (SparkShim#mapStatus). */
  private final MapStatusMaker statusMaker;
  /** Spark's own writer for this task, for a daemon at its bounds; null: fail instead. */
  private final Supplier<ShuffleWriter<K, V>> sparkWriter;
  /** Removes this task's committed map output (its files); null in the tests that have none. */
  private final Runnable removeCommitted;

  private MapOutput output;
  /** Spark's writer, when it writes this task's map output instead (see the class comment). */
  private ShuffleWriter<K, V> fallback;
  private long[] lengths;
  private MapStatus status;
  private boolean committed;
  private boolean stopping;

  ShuffledShuffleWriter(
      ShuffledClient client,
      BaseShuffleHandle<K, V, C> handle,
      long mapId,
      TaskContext context,
      ShuffleWriteMetricsReporter metrics,
      OpenOptions options,
      long batchBytes,
      Duration reconnectTimeout,
      MapStatusMaker statusMaker,
      Supplier<ShuffleWriter<K, V>> sparkWriter,
      Runnable removeCommitted) {
    this.client = client;
    this.handle = handle;
    this.mapId = mapId;
    this.context = context;
    this.metrics = metrics;
    this.options = options;
    this.batchBytes = batchBytes;
    this.reconnectTimeout = reconnectTimeout;
    this.statusMaker = statusMaker;
    this.sparkWriter = sparkWriter;
    this.removeCommitted = removeCommitted;
  }

  @Override
  public void write(scala.collection.Iterator<Product2<K, V>> records) throws IOException {
    ShuffleDependency<K, V, C> dep = handle.dependency();
    if (handedOver(dep.shuffleId(), dep.partitioner().numPartitions(), records)) {
      return;
    }
    Partitioner partitioner = dep.partitioner();
    int numPartitions = partitioner.numPartitions();
    Object[] rowChecksums = SparkShim.rowChecksums(dep);
    if (rowChecksums != null) {
      if (rowChecksums.length != numPartitions) {
        throw new IOException("shuffle " + dep.shuffleId() + " has " + rowChecksums.length
            + " row checksums for " + numPartitions + " partitions (map " + mapId + ")");
      }
      records = SparkShim.checksummed(records, partitioner, rowChecksums);
    }
    scala.collection.Iterator<? extends Product2<K, ?>> it = records;
    if (dep.mapSideCombine()) {
      // As SortShuffleWriter: combine on the map side when the dependency asks for it; the
      // reducer then merges combiners, not values. The row checksums saw the records before.
      it = dep.aggregator().get().combineValuesByKey(records, context);
    }
    writeBatches(dep.shuffleId(), it, partitioner, dep.serializer());
    commit(dep.shuffleId(), numPartitions, rowChecksums);
  }

  /**
   * Commits the map output and makes its map status. Anything that goes wrong after the commit (a
   * daemon's answer that does not fit, a Spark that refuses the status) fails the task with an
   * IOException saying that the output was committed; the task's {@link #stop}(false) then
   * removes its files. Package-private for the tests.
   */
  void commit(int shuffleId, int numPartitions, Object[] rowChecksums) throws IOException {
    long t0 = System.nanoTime();
    CommitResult result = output.commit();
    committed = true;
    metrics.incWriteTime(System.nanoTime() - t0);
    String what = "map output (shuffle " + shuffleId + ", map " + mapId + ")";
    try {
      long[] l = result.lengths();
      if (l.length != numPartitions) {
        throw new IOException("the daemon's commit has " + l.length + " partition lengths, want "
            + numPartitions);
      }
      long checksum = SparkShim.aggregate(rowChecksums);
      MapStatus s = statusMaker.make(l, checksum);
      lengths = l;
      metrics.incBytesWritten(result.totalLength());
      status = s;
    } catch (IOException | RuntimeException | LinkageError e) {
      throw new IOException("shuffled daemon committed " + what + ", and then: " + e
          + "; the task fails and its committed files are removed", e);
    }
  }

  /**
   * {@link #start}s the map output; when Spark's writer takes the task instead, it writes every
   * one of {@code records}, and the answer is true. Package-private for the tests.
   */
  boolean handedOver(
      int shuffleId, int numPartitions, scala.collection.Iterator<Product2<K, V>> records)
      throws IOException {
    if (start(shuffleId, numPartitions)) {
      return false;
    }
    fallback.write(records);
    return true;
  }

  /**
   * Opens the map output, before any record is read. Returns false when Spark's own writer writes
   * this task instead (the daemon answered ResourceExhausted; {@link #fallback} is then set).
   * Package-private for the tests.
   */
  boolean start(int shuffleId, int numPartitions) throws IOException {
    long t0 = System.nanoTime();
    try {
      output = open(shuffleId, numPartitions);
      return true;
    } catch (ShuffledException e) {
      if (e.code() != ErrorCode.RESOURCE_EXHAUSTED || sparkWriter == null) {
        throw e;
      }
      String why = "map output (shuffle " + shuffleId + ", map " + mapId + "): " + e.getMessage()
          + "; Spark's own writer writes this task's output";
      if (WARNED_EXHAUSTED.compareAndSet(false, true)) {
        LOG.warn("shuffled: {} (logged once; later ones at info)", why);
      } else {
        LOG.info("shuffled: {}", why);
      }
      FallbackReports.report("OpenMapOutput refused: " + e.code(), "the daemon refused OpenMapOutput ("
          + e.code() + "): " + e.getMessage());
      fallback = sparkWriter.get();
      return false;
    } finally {
      metrics.incWriteTime(System.nanoTime() - t0);
    }
  }

  /**
   * Serializes the records into their partitions' buffers and sends the batches: one each time
   * {@code spark.shuffled.batchBytes} are buffered and more records follow, then the rest, marked
   * as the last, once the records are exhausted (so the batch holding the last record is always
   * the marked one). Opens the map output first unless {@link #start} did. Package-private for
   * the tests.
   */
  void writeBatches(
      int shuffleId,
      scala.collection.Iterator<? extends Product2<K, ?>> it,
      Partitioner partitioner,
      Serializer serializer)
      throws IOException {
    int numPartitions = partitioner.numPartitions();
    SerializerInstance ser = serializer.newInstance();
    long[] offsets = new long[numPartitions + 1];

    if (output == null && !start(shuffleId, numPartitions)) {
      throw new IllegalStateException("writeBatches of a task that Spark's writer writes");
    }
    long max = output.maxBatchBytes();
    if (max < 1) {
      throw new IOException(
          "shuffled daemon's max_frame " + client.serverInfo().maxFrame() + " leaves no room for"
              + " inline bytes in a Batch of " + numPartitions + " partitions (map output of"
              + " shuffle " + shuffleId + ", map " + mapId + ")");
    }
    long limit = Math.min(batchBytes, max);
    PartitionBuffers bufs = new PartitionBuffers(numPartitions, limit);

    long pending = 0; // records serialized but not yet counted in the metrics
    if (serializer.supportsRelocationOfSerializedObjects()) {
      Redirect target = new Redirect(bufs);
      SerializationStream s = ser.serializeStream(target);
      while (it.hasNext()) {
        Product2<K, ?> r = it.next();
        K key = r._1();
        target.partition = partitioner.getPartition(key);
        s.writeKey(key, OBJECT);
        s.writeValue(r._2(), OBJECT);
        s.flush();
        pending++;
        // The batch holding the last record goes after the loop, marked as the last.
        if (bufs.size() >= limit && it.hasNext()) {
          send(bufs, offsets, false);
          metrics.incRecordsWritten(pending);
          pending = 0;
        }
      }
      s.close();
    } else {
      SerializationStream[] streams = new SerializationStream[numPartitions];
      while (it.hasNext()) {
        Product2<K, ?> r = it.next();
        K key = r._1();
        int p = partitioner.getPartition(key);
        SerializationStream s = streams[p];
        if (s == null) {
          s = ser.serializeStream(bufs.stream(p));
          streams[p] = s;
        }
        s.writeKey(key, OBJECT);
        s.writeValue(r._2(), OBJECT);
        pending++;
        if (bufs.size() >= limit && it.hasNext()) {
          for (SerializationStream open : streams) {
            if (open != null) {
              open.flush();
            }
          }
          send(bufs, offsets, false);
          metrics.incRecordsWritten(pending);
          pending = 0;
        }
      }
      for (SerializationStream open : streams) {
        if (open != null) {
          open.close();
        }
      }
    }
    if (bufs.size() > 0) {
      send(bufs, offsets, true);
    }
    metrics.incRecordsWritten(pending);
  }

  /**
   * Opens the map output. A daemon that went away (a restart) or is draining (it answers
   * Unavailable, as on SIGTERM, until it exits) is waited for, up to
   * spark.shuffled.reconnectTimeout, so that the task does not fail at once: the client connects
   * and registers again once the connection is gone, and nothing has been sent for this map
   * output yet, so trying again is safe. Any other answer of the daemon (an error) is not retried.
   */
  private MapOutput open(int shuffleId, int numPartitions) throws IOException {
    long deadline = System.nanoTime() + reconnectTimeout.toNanos();
    long pause = 50;
    while (true) {
      // A reconnect within what is left of the timeout, so that the wait ends near it.
      Duration left = Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime()));
      try {
        return client.openMapOutput(shuffleId, mapId, numPartitions, options, left);
      } catch (IOException e) {
        if (e instanceof InterruptedIOException && !(e instanceof SocketTimeoutException)) {
          throw e; // the task was killed: no daemon to wait for
        }
        boolean draining = e instanceof ShuffledException se && se.code() == ErrorCode.UNAVAILABLE;
        if (e instanceof ShuffledException && !draining) {
          throw e;
        }
        if (System.nanoTime() + pause * 1_000_000 > deadline) {
          String state = draining ? "draining (it answered Unavailable)" : "unreachable";
          throw new IOException(
              "shuffled daemon " + state + " for map output (shuffle " + shuffleId + ", map "
                  + mapId + ") within " + ShuffledConf.RECONNECT_TIMEOUT + "="
                  + reconnectTimeout.toMillis() + "ms: " + e.getMessage(), e);
        }
        try {
          Thread.sleep(pause);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw new InterruptedIOException("interrupted while waiting for the shuffled daemon");
        }
        pause = Math.min(pause * 2, 1000);
      }
    }
  }

  /**
   * Hands the buffered partitions to the daemon, in pieces of at most maxBatchBytes; with {@code
   * last}, the final piece is marked as the map output's last batch.
   */
  private void send(PartitionBuffers bufs, long[] offsets, boolean last) throws IOException {
    bufs.assemble(offsets);
    int n = offsets.length - 1;
    long total = offsets[n];
    long max = output.maxBatchBytes(); // within max_inline and, with the Batch head, max_frame
    long t0 = System.nanoTime();
    if (total <= max) {
      if (last) {
        output.markLast();
      }
      output.writeOpaque(ByteBuffer.wrap(bufs.payload(), 0, (int) total), offsets);
    } else {
      // Cut the payload anywhere: a partition's bytes may be split over batches, the daemon
      // appends them in order.
      long[] piece = new long[n + 1];
      for (long from = 0; from < total; from += max) {
        long to = Math.min(total, from + max);
        for (int p = 0; p <= n; p++) {
          piece[p] = Math.min(Math.max(offsets[p], from), to) - from;
        }
        if (last && to == total) {
          output.markLast();
        }
        output.writeOpaque(
            ByteBuffer.wrap(bufs.payload(), (int) from, (int) (to - from)), piece);
      }
    }
    metrics.incWriteTime(System.nanoTime() - t0);
  }

  /** The map status of this task's map output, of its partition lengths and row checksum. */
  interface MapStatusMaker {
    MapStatus make(long[] lengths, long rowChecksum);
  }

  /** The map output writeBatches opened; for the tests. */
  MapOutput output() {
    return output;
  }

  @Override
  public Option<MapStatus> stop(boolean success) {
    if (fallback != null) {
      return fallback.stop(success);
    }
    if (stopping) {
      return Option.apply(null);
    }
    stopping = true;
    if (success) {
      if (status == null) {
        throw new IllegalStateException(
            "stop(success) of map " + mapId + " before its output was committed");
      }
      return Option.apply(status);
    }
    if (output != null) {
      // Aborts unless committed, on the interrupted thread of a killed task too.
      output.close();
    }
    if (committed && removeCommitted != null) {
      // Committed, and the task failed after all: remove its files, as Spark's writers do.
      removeCommitted.run();
    }
    return Option.apply(null);
  }

  @Override
  public long[] getPartitionLengths() {
    return fallback != null ? fallback.getPartitionLengths() : lengths;
  }

  /** Spark's writer, when it writes this task's output instead; for the tests. */
  ShuffleWriter<K, V> fallback() {
    return fallback;
  }

  /** The stream relocatable serializers write into: appends to the current record's partition. */
  private static final class Redirect extends OutputStream {
    private final PartitionBuffers bufs;
    int partition;

    Redirect(PartitionBuffers bufs) {
      this.bufs = bufs;
    }

    @Override
    public void write(int b) {
      bufs.write(partition, b);
    }

    @Override
    public void write(byte[] b, int off, int len) {
      bufs.write(partition, b, off, len);
    }
  }
}
