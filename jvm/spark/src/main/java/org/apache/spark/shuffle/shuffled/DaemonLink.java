package org.apache.spark.shuffle.shuffled;

import dev.shuffled.client.ClientOptions;
import dev.shuffled.client.ShuffledClient;
import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkEnv;
import org.apache.spark.storage.DiskBlockManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One process's connection to the daemon on its node, made on first use. For writing, the
 * executor registers its application, executor id and DiskBlockManager local dirs, so the daemon
 * writes where IndexShuffleBlockResolver and the external shuffle service look.
 *
 * <p>The first attempt to connect for writing decides for the executor's lifetime: a daemon that
 * cannot be reached then makes every map output of the executor go through Spark's own writer
 * (with {@code spark.shuffled.fallback.enabled}, the default), or fails the task. Once connected,
 * the client reconnects by itself after the daemon restarts; a task that meets a dead daemon fails
 * and Spark retries it.
 */
final class DaemonLink implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DaemonLink.class);

  private final ShuffledConf conf;
  private ShuffledClient client;
  private boolean registered;
  /** The first write-side connection failed and fallback is on: Spark's writer from now on. */
  private boolean fellBack;
  /** A removal-only connection failed: no daemon here; removals are skipped. */
  private boolean unreachable;
  private String appId;
  /** Write-side connection attempts ended, for the tasks that waited for one (see forWriting). */
  private volatile long attempts;
  /** What the last write-side attempt failed with (fallback off); guarded by this. */
  private IOException lastFailure;

  DaemonLink(ShuffledConf conf) {
    this.conf = conf;
  }

  /**
   * The registered client for map outputs, or null when this executor writes with Spark's own
   * writer because the daemon was unreachable at its first map task.
   *
   * <p>One attempt runs at a time, bounded by {@code spark.shuffled.connectTimeout} (connect(2)
   * and the handshake, then the registration). Tasks that waited for another task's attempt take
   * its outcome rather than each spend the timeout again in turn.
   *
   * @throws IOException the daemon cannot be reached or refused the registration, and fallback is
   *     off
   */
  ShuffledClient forWriting() throws IOException {
    long seen = attempts;
    synchronized (this) {
      if (fellBack) {
        return null;
      }
      if (registered) {
        return client;
      }
      if (attempts != seen && lastFailure != null) {
        throw new IOException(
            lastFailure.getMessage() + " (the attempt of another task, which this one waited for)",
            lastFailure);
      }
      try {
        return connectForWriting();
      } finally {
        attempts++;
      }
    }
  }

  /** One write-side attempt: connect and register; the caller holds the lock. */
  private ShuffledClient connectForWriting() throws IOException {
    SparkEnv env = SparkEnv.get();
    DiskBlockManager disks = env.blockManager().diskBlockManager();
    List<String> dirs = new ArrayList<>();
    for (File d : disks.localDirs()) {
      dirs.add(d.getAbsolutePath());
    }
    String app = env.conf().getAppId();
    String executor = env.executorId();
    try {
      if (client == null) {
        client = connect();
      }
      List<String> resolved = client.register(app, executor, dirs, disks.subDirsPerLocalDir());
      registered = true;
      appId = app;
      unreachable = false;
      lastFailure = null;
      LOG.info(
          "shuffled: executor {} of {} writes its shuffle output through the daemon at {} into {}",
          executor, app, conf.socket, resolved);
      return client;
    } catch (IOException | RuntimeException e) {
      if (client != null) {
        client.close();
        client = null;
      }
      String what =
          "shuffled daemon at " + ShuffledConf.SOCKET + "=" + conf.socket + " for executor "
              + executor + " of " + app + ": " + e.getMessage();
      if (conf.fallback) {
        fellBack = true;
        LOG.warn(
            "{}; this executor writes its shuffle output with Spark's own writer"
                + " ({}=true)", what, ShuffledConf.FALLBACK);
        return null;
      }
      lastFailure = new IOException(what + " (" + ShuffledConf.FALLBACK + "=false)", e);
      throw lastFailure;
    }
  }

  /** Whether this process's map outputs went through Spark's writer for want of a daemon. */
  synchronized boolean fellBack() {
    return fellBack;
  }

  /**
   * A client for removals, or null when no daemon answers on this node. A driver that never wrote
   * connects without registering.
   */
  synchronized ShuffledClient forRemoval() {
    if (client != null) {
      return client;
    }
    if (unreachable || fellBack) {
      return null;
    }
    try {
      client = connect();
      return client;
    } catch (IOException | RuntimeException e) {
      unreachable = true;
      LOG.info("shuffled: no daemon at {} ({}); removals are left to it", conf.socket, e.getMessage());
      return null;
    }
  }

  /** The application this process registered, or null. */
  synchronized String registeredApp() {
    return appId;
  }

  private ShuffledClient connect() throws IOException {
    ClientOptions o =
        ClientOptions.DEFAULTS
            .withClientName("shuffled-spark " + org.apache.spark.package$.MODULE$.SPARK_VERSION())
            .withConnectTimeout(conf.connectTimeout)
            .withDataPlane(conf.dataPlane);
    return ShuffledClient.connect(conf.socket, o);
  }

  @Override
  public synchronized void close() {
    if (client != null) {
      client.close();
      client = null;
    }
  }
}
