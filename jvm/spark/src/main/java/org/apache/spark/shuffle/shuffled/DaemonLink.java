package org.apache.spark.shuffle.shuffled;

import dev.shuffled.client.ClientOptions;
import dev.shuffled.client.ShuffledClient;
import dev.shuffled.client.ShuffledException;
import java.io.File;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
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

  /** What of ShuffledConf the link uses. */
  record Settings(
      java.nio.file.Path socket,
      boolean fallback,
      java.time.Duration connectTimeout,
      dev.shuffled.client.DataPlane dataPlane,
      boolean encryption,
      boolean serving) {
    Settings(
        java.nio.file.Path socket,
        boolean fallback,
        java.time.Duration connectTimeout,
        dev.shuffled.client.DataPlane dataPlane) {
      this(socket, fallback, connectTimeout, dataPlane, false, false);
    }

    Settings(
        java.nio.file.Path socket,
        boolean fallback,
        java.time.Duration connectTimeout,
        dev.shuffled.client.DataPlane dataPlane,
        boolean encryption) {
      this(socket, fallback, connectTimeout, dataPlane, encryption, false);
    }
  }

  private final Settings conf;
  private ShuffledClient client;
  private boolean registered;
  /** The first write-side connection failed and fallback is on: Spark's writer from now on. */
  private boolean fellBack;
  /** Why fellBack, for the driver's log (FallbackReports). */
  private String fallbackReason;
  private String fallbackKind;
  /** A removal-only connection failed: no daemon here; removals are skipped. */
  private boolean unreachable;
  private String appId;
  /** Write-side connection attempts ended, for the tasks that waited for one (see forWriting). */
  private volatile long attempts;
  /** What the last write-side attempt failed with (fallback off); guarded by this. */
  private IOException lastFailure;

  DaemonLink(ShuffledConf conf) {
    this(
        new Settings(
            conf.socket,
            conf.fallback,
            conf.connectTimeout,
            conf.dataPlane,
            conf.encryption,
            conf.serving),
        conf.serving && conf.authenticate);
  }

  /** Package-private for the tests (a ShuffledConf needs a SparkConf). */
  DaemonLink(Settings conf) {
    this(conf, false);
  }

  private DaemonLink(Settings conf, boolean sendSecret) {
    this.conf = conf;
    this.sendSecret = sendSecret;
  }

  /** Serving and spark.authenticate: the executor hands the app's secret to the daemon. */
  private final boolean sendSecret;
  /** Warned that serving is wanted but this node's daemon does not serve; guarded by this. */
  private boolean warnedNotServing;

  /**
   * The registered client for map outputs, or null when this executor writes with Spark's own
   * writer because the daemon was unreachable at its first map task.
   *
   * <p>One attempt runs at a time: connect(2) and the handshake within {@code
   * spark.shuffled.connectTimeout}, then the registration within the client's request timeout.
   * Tasks that waited for another task's attempt take its outcome rather than each spend the
   * timeout again in turn. An attempt whose task was interrupted (killed) while it connected
   * decides nothing: it throws {@link InterruptedIOException}, and the next task tries again.
   *
   * @throws IOException the daemon cannot be reached or refused the registration, and fallback is
   *     off
   * @throws InterruptedIOException the thread was interrupted while it connected (not a {@link
   *     SocketTimeoutException}), with fallback on too
   */
  ShuffledClient forWriting() throws IOException {
    return forWriting(this::sparkExecutor);
  }

  /**
   * What the executor registers: its application, id and DiskBlockManager dirs, and the
   * application's IO encryption key (null when Spark has none: spark.io.encryption.enabled off).
   */
  record Executor(
      String app,
      String executor,
      List<String> dirs,
      int subDirs,
      byte[] ioKey,
      byte[] authSecret) {
    Executor(String app, String executor, List<String> dirs, int subDirs) {
      this(app, executor, dirs, subDirs, null, null);
    }

    Executor(String app, String executor, List<String> dirs, int subDirs, byte[] ioKey) {
      this(app, executor, dirs, subDirs, ioKey, null);
    }

    @Override
    public String toString() {
      return app + "/" + executor + " " + dirs + (ioKey == null ? "" : " (IO encryption key)")
          + (authSecret == null ? "" : " (auth secret)");
    }
  }

  private Executor sparkExecutor() {
    SparkEnv env = SparkEnv.get();
    DiskBlockManager disks = env.blockManager().diskBlockManager();
    List<String> dirs = new ArrayList<>();
    for (File d : disks.localDirs()) {
      dirs.add(d.getAbsolutePath());
    }
    return new Executor(
        env.conf().getAppId(),
        env.executorId(),
        dirs,
        disks.subDirsPerLocalDir(),
        ioKey(env),
        sendSecret ? authSecret(env) : null);
  }

  /**
   * The application's auth secret, {@code SparkEnv.get.securityManager.getSecretKey}, as the bytes
   * Spark's own handshakes use (its UTF-8: SASL's password and AuthEngine's key material are made
   * from the string), or null when Spark has none.
   */
  private static byte[] authSecret(SparkEnv env) {
    Object sm = env.securityManager();
    try {
      Object key = sm.getClass().getMethod("getSecretKey").invoke(sm);
      return key instanceof String k && !k.isEmpty()
          ? k.getBytes(java.nio.charset.StandardCharsets.UTF_8)
          : null;
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("SecurityManager.getSecretKey: " + e, e);
    }
  }

  /**
   * The application's IO encryption key, {@code SparkEnv.get.securityManager.getIOEncryptionKey},
   * or null. Called by reflection: SecurityManager's supertypes live in spark-network-common,
   * which the plugin does not compile against.
   */
  private static byte[] ioKey(SparkEnv env) {
    Object sm = env.securityManager();
    try {
      Object key = sm.getClass().getMethod("getIOEncryptionKey").invoke(sm);
      return key instanceof scala.Option<?> o && o.isDefined() ? (byte[]) o.get() : null;
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("SecurityManager.getIOEncryptionKey: " + e, e);
    }
  }

  /** {@link #forWriting()} registering {@code who}'s answer; package-private for the tests. */
  ShuffledClient forWriting(java.util.function.Supplier<Executor> who) throws IOException {
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
        ShuffledClient c = connectForWriting(who.get());
        attempts++;
        return c;
      } catch (InterruptedIOException e) {
        if (e instanceof SocketTimeoutException) {
          attempts++;
        }
        // An interrupted attempt (a killed task) counts for nothing: the next task tries again.
        throw e;
      } catch (IOException | RuntimeException e) {
        attempts++;
        throw e;
      }
    }
  }

  /** One write-side attempt: connect and register; the caller holds the lock. */
  private ShuffledClient connectForWriting(Executor who) throws IOException {
    String app = who.app();
    String executor = who.executor();
    try {
      if (client == null) {
        client = connect();
      }
      byte[] key = null;
      if (conf.encryption()) {
        // Spark encrypts every shuffle block with the application's key: so does the daemon.
        key = who.ioKey();
        if (key == null) {
          throw new IOException(
              "spark.io.encryption.enabled=true, but the executor's SecurityManager has no IO"
                  + " encryption key");
        }
      }
      byte[] secret = who.authSecret();
      if (secret != null && secret.length > MAX_AUTH_SECRET) {
        LOG.warn("shuffled: the application's spark.authenticate secret has {} bytes, more than the"
            + " {} the daemon takes: this executor's map outputs are served by the executor, not"
            + " the daemon", secret.length, MAX_AUTH_SECRET);
        secret = null;
        tooLongSecret = true;
      }
      List<String> resolved =
          client.register(app, executor, who.dirs(), who.subDirs(), key, secret);
      registered = true;
      appId = app;
      unreachable = false;
      lastFailure = null;
      dev.shuffled.client.Serving served = client.serving();
      LOG.info(
          "shuffled: executor {} of {} writes its shuffle output through the daemon at {} into {}{}{}",
          executor, app, conf.socket(), resolved, key == null ? "" : ", IO-encrypted",
          !conf.serving() || served == null ? ""
              : ", served by the daemon at " + served.host() + ":" + served.port()
                  + (secret == null ? "" : " (authenticated)"));
      return client;
    } catch (IOException | RuntimeException e) {
      if (client != null) {
        client.close();
        client = null;
      }
      if (interrupted(e)) {
        // The task was killed while it connected: no verdict on the daemon, so neither the
        // fallback for the executor's life nor a failure for the tasks that wait.
        throw (InterruptedIOException) e;
      }
      String what =
          "shuffled daemon at " + ShuffledConf.SOCKET + "=" + conf.socket() + " for executor "
              + executor + " of " + app + ": " + e.getMessage();
      if (conf.fallback()) {
        fellBack = true;
        fallbackReason = what;
        fallbackKind = e instanceof ShuffledException se
            ? "RegisterExecutor refused: " + se.code()
            : "daemon unreachable: " + e.getClass().getSimpleName();
        LOG.warn(
            "{}; this executor writes its shuffle output with Spark's own writer"
                + " ({}=true)", what, ShuffledConf.FALLBACK);
        return null;
      }
      lastFailure = new IOException(what + " (" + ShuffledConf.FALLBACK + "=false)", e);
      throw lastFailure;
    }
  }

  /** The most auth secret bytes RegisterExecutor carries (docs/protocol.md). */
  static final int MAX_AUTH_SECRET = 1024;

  /** The application's secret was too long to hand over: the daemon cannot serve it. */
  private boolean tooLongSecret;

  /**
   * Where this executor's map outputs are served, when serving is on and the daemon it registered
   * with serves them (after a reconnect, as the daemon answered then); null otherwise: its map
   * statuses then name the executor, as without serving. Warns once when serving is on and the
   * daemon does not serve, or serves only authenticated applications and this one has no secret.
   */
  synchronized dev.shuffled.client.Serving serving() {
    if (!conf.serving() || !registered || client == null || tooLongSecret) {
      return null;
    }
    dev.shuffled.client.Serving s = client.serving();
    String why = null;
    if (s == null) {
      why = "does not serve map outputs (no --serve-addr, or a daemon without serving)";
    } else if (s.requireAuth() && !sendSecret) {
      why = "serves only authenticated applications (--serve-require-auth) and this one runs"
          + " without spark.authenticate";
      s = null;
    }
    if (why != null && !warnedNotServing) {
      warnedNotServing = true;
      LOG.warn("shuffled: {}=true, but the daemon at {} {}: this executor's map outputs are"
          + " served by the executor and lost with it (Spark then reruns their map tasks)",
          ShuffledConf.SERVING, conf.socket(), why);
    }
    return s;
  }

  /** Whether this process's map outputs went through Spark's writer for want of a daemon. */
  synchronized boolean fellBack() {
    return fellBack;
  }

  /** Why {@link #fellBack}: the daemon, the executor and the error; null if it did not. */
  synchronized String fallbackReason() {
    return fallbackReason;
  }

  /** The kind of {@link #fallbackReason}: the code of the refusal, or what the connect threw. */
  synchronized String fallbackKind() {
    return fallbackKind;
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
      if (interrupted(e)) {
        return null; // this removal is skipped; the next one tries again
      }
      unreachable = true;
      LOG.info("shuffled: no daemon at {} ({}); removals are left to it", conf.socket(), e.getMessage());
      return null;
    }
  }

  /** An interrupt of the connecting thread, not a timeout (which extends InterruptedIOException). */
  private static boolean interrupted(Exception e) {
    return e instanceof InterruptedIOException && !(e instanceof SocketTimeoutException);
  }

  /** The application this process registered, or null. */
  synchronized String registeredApp() {
    return appId;
  }

  private ShuffledClient connect() throws IOException {
    ClientOptions o =
        ClientOptions.DEFAULTS
            .withClientName("shuffled-spark " + org.apache.spark.package$.MODULE$.SPARK_VERSION())
            .withConnectTimeout(conf.connectTimeout())
            .withDataPlane(conf.dataPlane());
    return ShuffledClient.connect(conf.socket(), o);
  }

  @Override
  public synchronized void close() {
    if (client != null) {
      client.close();
      client = null;
    }
  }
}
