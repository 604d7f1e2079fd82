package org.apache.spark.shuffle.shuffled;

import dev.shuffled.client.Removed;
import dev.shuffled.client.ShuffledClient;
import java.io.IOException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.apache.spark.storage.BlockManagerId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Spark's sort-based shuffle with map outputs written by the shuffled daemon on the executor's
 * node. Enable with {@code spark.shuffle.manager=org.apache.spark.shuffle.shuffled.ShuffledShuffleManager}
 * and {@code spark.shuffled.socket=PATH}.
 *
 * <p>Everything but the writer is {@link SortShuffleManager}'s: shuffle handles, the reader, and
 * the block resolver ({@code IndexShuffleBlockResolver}), because the daemon writes Spark's own
 * files ({@code shuffle_S_M_0.data}, {@code .index}, {@code .checksum.ALGO}) into the executor's
 * own local dirs. Spark's writer is used instead, with a warning, when the configuration needs
 * what the daemon does not do (the lzf codec, a cipher other than AES/CTR/NoPadding) or, with {@code
 * spark.shuffled.fallback.enabled}, when the daemon cannot be reached at the executor's first map
 * task.
 *
 * <p>One jar serves the Spark minors it was built for ({@link SparkShim}): on any other Spark the
 * constructor throws, naming the jar's and the running Spark's versions, so that the driver and
 * every executor fail at start rather than their tasks.
 *
 * <p>A shuffle of more partitions than the protocol takes ({@link ShuffledClient#MAX_PARTITIONS},
 * 2^20) is written by Spark's own writer, with a warning once per process.
 *
 * <p>Lifecycle: {@link #unregisterShuffle} removes the shuffle's outputs from the daemon
 * (RemoveShuffle), on every executor and on the driver where a daemon answers. Each process also
 * records the map ids it wrote through the daemon, as Spark's writer records its own: where
 * RemoveShuffle fails (the daemon is gone, or does not answer), the process deletes those map
 * outputs' files itself, through the block resolver, as Spark does for its own writer's. The
 * driver's {@link #stop} removes the whole application (RemoveApplication) from the daemon on its
 * node. Daemons on other nodes remove an application when its last executor has been gone for
 * their {@code --retention}, or when Spark's cluster manager deletes the executor dirs.
 */
public class ShuffledShuffleManager extends SortShuffleManager {
  private static final Logger LOG = LoggerFactory.getLogger(ShuffledShuffleManager.class);

  private final SparkConf sparkConf;
  private final boolean isDriver;
  private final ShuffledConf conf;
  private final String unsupported;
  private final DaemonLink link;
  private boolean warnedUnsupported;
  private final AtomicBoolean warnedPartitions = new AtomicBoolean();
  /** Map ids this process wrote through the daemon, by shuffle (Spark records its writer's). */
  private final ConcurrentHashMap<Integer, Set<Long>> daemonMaps = new ConcurrentHashMap<>();
  /** The driver's collector of executors' fallback reports, from its first shuffle on. */
  private FallbackReports.Driver fallbackReports;

  /** The constructor Spark calls (SparkEnv instantiates the class named by spark.shuffle.manager). */
  public ShuffledShuffleManager(SparkConf sparkConf, boolean isDriver) {
    super(checked(sparkConf));
    this.sparkConf = sparkConf;
    this.isDriver = isDriver;
    this.conf = new ShuffledConf(sparkConf);
    this.unsupported = conf.unsupportedReason();
    this.link = new DaemonLink(conf);
    if (isDriver && unsupported != null) {
      LOG.warn("shuffled: {}; map outputs are written by Spark's own writer", unsupported);
    }
    if (isDriver && unsupported == null && conf.codecNote != null) {
      LOG.warn("shuffled: {}", conf.codecNote);
    }
    if (isDriver && conf.servingOff != null) {
      LOG.warn("shuffled: {}", conf.servingOff);
    }
    if (isDriver && conf.serving) {
      // The driver's SparkConf is the one SparkContext loads the ShuffleDataIO from, after the
      // shuffle manager (3.5 and 4.x alike): reliable storage needs ours.
      String io = sparkConf.get(ShuffledConf.IO_PLUGIN, null);
      if (io == null || io.equals(LOCAL_DISK_IO)) {
        sparkConf.set(ShuffledConf.IO_PLUGIN, ShuffledDataIO.class.getName());
      } else if (!io.equals(ShuffledDataIO.class.getName())) {
        LOG.warn("shuffled: {}=true, but {}={}: Spark does not know that the daemons keep the"
            + " map outputs of lost executors, and reruns their map tasks (set it to {})",
            ShuffledConf.SERVING, ShuffledConf.IO_PLUGIN, io, ShuffledDataIO.class.getName());
      }
    }
  }

  /** Spark's default ShuffleDataIO, which serving replaces with {@link ShuffledDataIO}. */
  static final String LOCAL_DISK_IO = "org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO";

  /** Set once this executor's files are kept at its exit for the daemon to serve. */
  private final AtomicBoolean keepingFiles = new AtomicBoolean();

  /**
   * Fails, naming both versions, when this jar is not built for the running Spark (SparkShim), so
   * that the driver and each executor fail at start rather than their tasks later.
   */
  private static SparkConf checked(SparkConf conf) {
    SparkShim.check();
    return conf;
  }

  @Override
  public <K, V, C> ShuffleHandle registerShuffle(
      int shuffleId, ShuffleDependency<K, V, C> dependency) {
    if (isDriver) {
      synchronized (this) {
        // Before the shuffle's first map task, so that its executors' reports find the driver.
        if (fallbackReports == null && SparkEnv.get() != null) {
          fallbackReports = FallbackReports.Driver.register(SparkEnv.get());
        }
      }
    }
    return super.registerShuffle(shuffleId, dependency);
  }

  @Override
  public <K, V> ShuffleWriter<K, V> getWriter(
      ShuffleHandle handle, long mapId, TaskContext context, ShuffleWriteMetricsReporter metrics) {
    if (unsupported != null) {
      warnUnsupported();
      FallbackReports.report("a configuration the daemon does not support", unsupported);
      return super.getWriter(handle, mapId, context, metrics);
    }
    @SuppressWarnings("unchecked")
    BaseShuffleHandle<K, V, Object> h = (BaseShuffleHandle<K, V, Object>) handle;
    int partitions = h.dependency().partitioner().numPartitions();
    if (partitions > ShuffledClient.MAX_PARTITIONS) {
      if (warnedPartitions.compareAndSet(false, true)) {
        LOG.warn("shuffled: shuffle {} has {} partitions, more than the {} a map output of the"
            + " daemon may have (its protocol's bound); Spark's own writer writes it, and any"
            + " other such shuffle (logged once)", h.shuffleId(), partitions,
            ShuffledClient.MAX_PARTITIONS);
      }
      FallbackReports.report("shuffles over the daemon's partition bound", "a shuffle of " + partitions + " partitions, more than"
          + " the daemon's " + ShuffledClient.MAX_PARTITIONS);
      return super.getWriter(handle, mapId, context, metrics);
    }
    ShuffledClient client;
    try {
      client = link.forWriting();
    } catch (IOException e) {
      throw new ShuffledUnavailableException(e.getMessage(), e);
    }
    if (client == null) {
      FallbackReports.report(link.fallbackKind(), link.fallbackReason());
      return super.getWriter(handle, mapId, context, metrics);
    }
    daemonMaps.computeIfAbsent(h.shuffleId(), id -> ConcurrentHashMap.newKeySet()).add(mapId);
    BlockManagerId own = SparkEnv.get().blockManager().shuffleServerId();
    if (link.serving() != null && keepingFiles.compareAndSet(false, true)) {
      // The daemon serves this executor's map outputs from its local dirs after it exits: an
      // executor without the external shuffle service deletes them at a graceful exit (a dynamic
      // allocation release), as it does when no shuffle service serves them; keep them, as Spark
      // does when one does. The driver removes shuffles and the application from the daemons.
      SparkEnv.get().blockManager().diskBlockManager().deleteFilesOnStop_$eq(false);
    }
    return new ShuffledShuffleWriter<>(
        client,
        h,
        mapId,
        context,
        metrics,
        conf.openOptions(),
        conf.batchBytes,
        conf.reconnectTimeout,
        // Where the daemon serves at the commit (it may have restarted since), else the executor.
        (lengths, rowChecksum) -> {
          dev.shuffled.client.Serving s = link.serving();
          BlockManagerId location =
              s == null ? own : SparkShim.daemonLocation(own.executorId(), s.host(), s.port());
          return SparkShim.mapStatus(location, lengths, mapId, rowChecksum);
        },
        // A daemon at its bounds (ResourceExhausted at Open): Spark's writer takes the task.
        () -> ShuffledShuffleManager.super.getWriter(handle, mapId, context, metrics),
        // A task that fails after the commit: its files go, as Spark's writers remove theirs.
        () -> shuffleBlockResolver().removeDataByMap(h.shuffleId(), mapId));
  }

  private synchronized void warnUnsupported() {
    if (!warnedUnsupported) {
      warnedUnsupported = true;
      LOG.warn("shuffled: {}; this executor writes its shuffle output with Spark's own writer",
          unsupported);
    }
  }

  @Override
  public boolean unregisterShuffle(int shuffleId) {
    boolean removed = super.unregisterShuffle(shuffleId);
    Set<Long> maps = daemonMaps.remove(shuffleId);
    if (unsupported == null) {
      ShuffledClient c = link.forRemoval();
      boolean done = false;
      if (c != null) {
        String app = appId();
        try {
          Removed r = uninterrupted(() -> c.removeShuffle(app, shuffleId));
          done = true;
          LOG.debug("shuffled: removed shuffle {} of {}: {} map outputs, {} bytes",
              shuffleId, app, r.mapOutputs(), r.bytes());
        } catch (IOException | RuntimeException e) {
          LOG.warn("shuffled: removing shuffle {} of {} from the daemon at {} failed: {}{}",
              shuffleId, app, conf.socket, e.getMessage(), maps == null ? ""
                  : "; deleting the files of the " + maps.size() + " map outputs this process"
                      + " wrote through it");
        }
      }
      if (!done && maps != null) {
        // As SortShuffleManager does for the map outputs its own writer wrote.
        for (long mapId : maps) {
          shuffleBlockResolver().removeDataByMap(shuffleId, mapId);
        }
      }
    }
    return removed;
  }

  private interface Removal {
    Removed run() throws IOException;
  }

  /**
   * Runs a removal with the thread's interrupt status cleared, and restores it afterwards: a
   * removal is cleanup (ContextCleaner's thread, a stopping SparkContext), which an interrupt
   * must not cut short before the request is even sent.
   */
  private static Removed uninterrupted(Removal r) throws IOException {
    boolean interrupted = Thread.interrupted();
    try {
      return r.run();
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  @Override
  public void stop() {
    try {
      if (isDriver) {
        String fellBack;
        synchronized (this) {
          fellBack = fallbackReports != null ? fallbackReports.summary() : null;
        }
        if (fellBack != null) {
          LOG.warn("shuffled: {}", fellBack);
        }
      }
      if (isDriver && unsupported == null) {
        ShuffledClient c = link.forRemoval();
        if (c != null) {
          String app = appId();
          try {
            Removed r = uninterrupted(() -> c.removeApplication(app));
            // Counts what was still on this node's daemon: shuffles removed as the job went
            // (unregisterShuffle), outputs on other nodes, and executor dirs Spark deleted as
            // its executors exited are not in it.
            LOG.info("shuffled: removed application {} from the daemon at {} on this node: {} map"
                + " outputs ({} bytes) were still there (shuffles removed earlier, other nodes'"
                + " outputs and executor dirs Spark already deleted are not counted)",
                app, conf.socket, r.mapOutputs(), r.bytes());
          } catch (IOException | RuntimeException e) {
            LOG.warn("shuffled: removing application {} from the daemon at {} failed: {}",
                app, conf.socket, e.getMessage());
          }
        }
      }
    } finally {
      link.close();
      super.stop();
    }
  }

  private String appId() {
    String app = link.registeredApp();
    return app != null ? app : sparkConf.getAppId();
  }
}
