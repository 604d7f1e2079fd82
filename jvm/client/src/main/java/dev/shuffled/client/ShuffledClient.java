package dev.shuffled.client;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.lang.System.Logger.Level;
import java.nio.file.Path;
import java.util.List;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A connection to the {@code shuffled} daemon on this node (docs/protocol.md). Thread-safe: many
 * task threads may open and write map outputs on one client at once; their requests are pipelined
 * on one Unix socket and matched to responses by request id, by one reader thread that the client
 * owns and stops in {@link #close()}.
 *
 * <p>When the connection fails (the daemon dies or closes it), every waiting request and every
 * open {@link MapOutput} fails at once with {@link ConnectionLostException}. The next request that
 * does not belong to an old map output ({@link #openMapOutput}, {@link #ping}, ...) connects
 * again, repeating the handshake and the registration.
 *
 * <pre>{@code
 * try (ShuffledClient c = ShuffledClient.connect(Path.of("/run/shuffled/shuffled.sock"))) {
 *   c.register("app-1", "exec-1");
 *   try (MapOutput out = c.openMapOutput(0, 7, 2, OpenOptions.DEFAULTS)) {
 *     out.writeOpaque("abc".getBytes(), new long[] {0, 2, 3});
 *     CommitResult r = out.commit();
 *   }
 * }
 * }</pre>
 */
public final class ShuffledClient implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger("dev.shuffled.client");
  private static final AtomicBoolean FALLBACK_LOGGED = new AtomicBoolean();

  /**
   * The most partitions one map output may have: the protocol's bound on OpenMapOutput's
   * num_partitions, 2^20 (docs/protocol.md).
   */
  public static final int MAX_PARTITIONS = Wire.MAX_PARTITIONS;

  /**
   * What register sent, sent again on every reconnect; ioKey and authSecret are secrets (or null).
   */
  private record Registration(
      String appId,
      String executorId,
      List<String> dirs,
      int subDirs,
      byte[] ioKey,
      byte[] authSecret) {
    @Override
    public String toString() {
      return appId + "/" + executorId;
    }
  }

  private final Path socket;
  private final ClientOptions options;
  private final Object lock = new Object();
  private Connection conn; // guarded by lock
  private Registration registration; // guarded by lock
  /** Where the daemon serves, from the last Registered; null when it does not. */
  private Serving serving; // guarded by lock
  private boolean closed; // guarded by lock
  /** A reconnect is in progress (outside the lock; see current(Duration)). Guarded by lock. */
  private boolean dialing;
  /** Reconnects ended, interrupted ones aside. Guarded by lock. */
  private long dialGeneration;
  /** What the last reconnect counted in dialGeneration failed with, or null. Guarded by lock. */
  private IOException dialFailure;

  private ShuffledClient(Path socket, ClientOptions options) {
    this.socket = socket;
    this.options = options;
  }

  /** Connects with {@link ClientOptions#DEFAULTS}. */
  public static ShuffledClient connect(Path socket) throws IOException {
    return connect(socket, ClientOptions.DEFAULTS);
  }

  /**
   * Connects to the daemon's socket and performs the handshake.
   *
   * @throws ShuffledException if the daemon refuses the handshake (e.g. VersionMismatch)
   * @throws IOException if the socket cannot be reached, or connecting and the handshake do not
   *     end within the connect timeout ({@link java.net.SocketTimeoutException}), or the daemon's
   *     ServerHello breaks the protocol (e.g. a max_inline of 0; the message names the field)
   */
  public static ShuffledClient connect(Path socket, ClientOptions options) throws IOException {
    java.util.Objects.requireNonNull(socket, "socket");
    java.util.Objects.requireNonNull(options, "options");
    ShuffledClient c = new ShuffledClient(socket, options);
    c.conn = c.dial(options);
    return c;
  }

  private Connection dial(ClientOptions o) throws IOException {
    boolean wantFd = o.dataPlane() == DataPlane.MEMFD;
    Connection c = Connection.open(socket, o, wantFd);
    if (wantFd && !usable(c)) {
      logFallback(c);
    }
    return c;
  }

  private static boolean usable(Connection c) {
    return Platform.memfdUnavailableReason() == null
        && c.canPassFd()
        && c.info().has(ServerInfo.FEATURE_MEMFD);
  }

  private static void logFallback(Connection c) {
    if (FALLBACK_LOGGED.compareAndSet(false, true)) {
      String why = Platform.memfdUnavailableReason();
      if (why == null) {
        why = "the daemon does not announce the memfd feature";
      }
      LOG.log(Level.INFO, "shuffled client: memfd data plane unavailable ({0}); batches go inline", why);
    }
  }

  /** The connection now, connecting again (and registering again) if the last one was lost. */
  private Connection current() throws IOException {
    return current(options.connectTimeout());
  }

  /**
   * The connection now; if the last one was lost, connects again (and registers again), the
   * handshake and the registration within {@code min(connectTimeout, limit)}. One attempt runs at
   * a time, outside the lock: a caller that finds one in progress waits for it (at most {@code
   * limit}) and takes its outcome, its connection or its failure, rather than spend the timeout
   * again in turn. An interrupted attempt decides nothing: a waiter then tries itself.
   *
   * @throws SocketTimeoutException the attempt in progress did not end within {@code limit}
   * @throws InterruptedIOException the thread was interrupted while connecting or waiting
   */
  private Connection current(Duration limit) throws IOException {
    long deadline = System.nanoTime() + limit.toNanos();
    Registration r;
    synchronized (lock) {
      while (true) {
        if (closed) {
          throw new ConnectionLostException("client of " + socket + " is closed", null);
        }
        if (conn.failure() == null) {
          return conn;
        }
        if (!dialing) {
          break;
        }
        long gen = dialGeneration;
        while (dialing && gen == dialGeneration && !closed) {
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            throw new SocketTimeoutException(
                conn.failure().getMessage() + "; reconnecting (another caller's attempt) did not"
                    + " end within " + limit);
          }
          try {
            TimeUnit.NANOSECONDS.timedWait(lock, left);
          } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted waiting to reconnect to " + socket);
          }
        }
        if (gen != dialGeneration && dialFailure != null && conn.failure() != null && !closed) {
          throw new ConnectionLostException(
              conn.failure().getMessage() + "; reconnecting failed (the attempt of another"
                  + " caller, which this one waited for): " + dialFailure.getMessage(),
              dialFailure);
        }
        // a new connection (checked above), or an interrupted attempt: look again
      }
      dialing = true;
      r = registration;
    }
    Connection c = null;
    IOException failed = null;
    boolean interrupted = false;
    try {
      long left = Math.max(1_000_000, deadline - System.nanoTime());
      Duration bound = Duration.ofNanos(Math.min(options.connectTimeout().toNanos(), left));
      c = dial(options.withConnectTimeout(bound));
      if (r != null) {
        // Registering again belongs to the attempt: bounded by what is left of it.
        Resolved again =
            sendRegister(c, r, Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime())));
        synchronized (lock) {
          serving = again.serving();
        }
      }
    } catch (InterruptedIOException e) {
      if (!(e instanceof SocketTimeoutException)) {
        interrupted = true;
      }
      failed = e;
    } catch (IOException e) {
      failed = e;
    } catch (RuntimeException | Error e) {
      try {
        finish(c, new IOException(e.toString(), e), false);
      } catch (IOException published) {
        // the waiters take it; this caller throws e itself
      }
      throw e;
    }
    return finish(c, failed, interrupted);
  }

  /** Ends one attempt of {@link #current(Duration)}: publishes its outcome to the waiters. */
  private Connection finish(Connection c, IOException failed, boolean interrupted)
      throws IOException {
    ConnectionLostException old;
    boolean wasClosed;
    synchronized (lock) {
      dialing = false;
      old = conn.failure();
      wasClosed = closed;
      if (!interrupted) {
        // An interrupted attempt is no verdict on the daemon: waiters try for themselves.
        dialGeneration++;
        dialFailure = failed;
      }
      if (failed == null && !closed) {
        conn = c;
      }
      lock.notifyAll();
    }
    if (failed != null && c != null) {
      c.close();
    }
    if (failed == null) {
      if (wasClosed) {
        c.close();
        throw new ConnectionLostException("client of " + socket + " is closed", null);
      }
      return c;
    }
    if (failed instanceof ShuffledException
        || (failed instanceof InterruptedIOException && !(failed instanceof SocketTimeoutException))) {
      throw failed;
    }
    throw new ConnectionLostException(
        (old == null ? "connection to " + socket + " lost" : old.getMessage())
            + "; reconnecting failed: " + failed.getMessage(),
        failed);
  }

  /** What one RegisterExecutor resolved: the dirs, and where the daemon serves (or null). */
  private record Resolved(List<String> dirs, Serving serving) {}

  private static Resolved sendRegister(Connection c, Registration r, Duration timeout)
      throws IOException {
    if (r.ioKey != null && !c.info().has(ServerInfo.FEATURE_IO_ENCRYPTION)) {
      throw new ShuffledException(
          ErrorCode.UNSUPPORTED.wireCode(),
          "the daemon does not announce io-encryption (feature bit 6): it cannot encrypt",
          "register executor " + r.appId + "/" + r.executorId);
    }
    // To a daemon that serves, both tails always (empty when there is no secret): the auth tail
    // is what makes it answer where it serves. To one that does not, no secret at all.
    boolean tails = c.info().has(ServerInfo.FEATURE_SERVING);
    byte[] secret = tails ? (r.authSecret == null ? new byte[0] : r.authSecret) : null;
    String what = "register executor " + r.appId + "/" + r.executorId;
    Wire.Registered res =
        (Wire.Registered)
            c.call(
                new Wire.Register(r.appId, r.executorId, r.subDirs, r.dirs, r.ioKey, secret),
                null,
                -1,
                what,
                timeout);
    Serving serving = null;
    if (tails) {
      if (res.serve() == null) {
        c.close();
        throw new ProtocolException(
            what + ": Registered lacks the serving tail, although the daemon announces serving"
                + " (feature bit 7) and RegisterExecutor carried the auth secret tail");
      }
      if (res.serve().port() != 0) {
        serving =
            new Serving(
                res.serve().host(),
                res.serve().port(),
                (res.serve().flags() & Wire.SERVE_REQUIRE_AUTH) != 0);
      }
    } else if (res.serve() != null) {
      c.close();
      throw new ProtocolException(
          what + ": Registered carries a serving tail, although RegisterExecutor carried none");
    }
    return new Resolved(res.dirs(), serving);
  }

  /**
   * Where the daemon serves this executor's committed map outputs to Spark's reducers, as the last
   * registration (or registration again, after a reconnect) answered; null before {@link
   * #register}, or when the daemon does not serve (no feature bit 7, or its block server is off).
   */
  public Serving serving() {
    synchronized (lock) {
      return serving;
    }
  }

  /** The handshake answer of the current connection. */
  public ServerInfo serverInfo() {
    synchronized (lock) {
      return conn.info();
    }
  }

  /**
   * Whether map outputs that ask for {@link DataPlane#MEMFD} get it: the JDK is 22+ with the FFM
   * API usable, the platform has memfd, and the daemon announced the feature.
   */
  public boolean memfdAvailable() {
    synchronized (lock) {
      return usable(conn);
    }
  }

  /**
   * Registers the executor with outputs in the daemon's own root, {@code
   * <root>/<appId>/<executorId>/}. Once per client, before any open.
   *
   * @return the directories the daemon resolved and will write into
   */
  public List<String> register(String appId, String executorId) throws IOException {
    return register(appId, executorId, List.of(), 0);
  }

  /**
   * Registers the executor with outputs in Spark's hashed layout under its local dirs: file {@code
   * f} goes to {@code localDirs[h % n]/%02x/f}, {@code %02x} of {@code (h / n) % subDirs}, as
   * Spark's {@code ExecutorDiskUtils}. Once per client, before any open; repeated on reconnect.
   *
   * @param localDirs the executor's {@code blockmgr-*} dirs, absolute (0..256; empty for the
   *     daemon's root)
   * @param subDirs {@code spark.diskStore.subDirectories} (1..65536; 0 without local dirs)
   * @return the directories the daemon resolved and will write into
   * @throws IllegalArgumentException for a name or dir the protocol forbids
   * @throws IllegalStateException if the client is already registered
   */
  public List<String> register(String appId, String executorId, List<String> localDirs, int subDirs)
      throws IOException {
    return register(appId, executorId, localDirs, subDirs, null);
  }

  /**
   * {@link #register(String, String, List, int)} with the application's IO encryption key (Spark's
   * {@code SecurityManager.getIOEncryptionKey()} under {@code spark.io.encryption.enabled}): every
   * map output this client opens is then written as Spark's IO encryption writes shuffle blocks
   * (each non-empty partition a fresh IV and the AES-CTR encryption of its compressed bytes). The
   * key is a secret: the client keeps a copy to register again on reconnect, and sends it only
   * over the socket, to a daemon that announces {@link ServerInfo#FEATURE_IO_ENCRYPTION}; it is in
   * no message or text the client makes.
   *
   * @param ioEncryptionKey 16, 24 or 32 bytes, or null for none
   * @throws IllegalArgumentException for a key of another length
   * @throws ShuffledException code {@link ErrorCode#UNSUPPORTED} when the daemon does not announce
   *     the feature
   */
  public List<String> register(
      String appId, String executorId, List<String> localDirs, int subDirs, byte[] ioEncryptionKey)
      throws IOException {
    return register(appId, executorId, localDirs, subDirs, ioEncryptionKey, null);
  }

  /**
   * {@link #register(String, String, List, int, byte[])} with the application's auth secret
   * (Spark's {@code SecurityManager.getSecretKey()} under {@code spark.authenticate}), for a daemon
   * that serves map outputs (feature bit 7): its block server then serves this application's
   * blocks only to connections that authenticate with this secret (Spark's SASL or AuthEngine
   * handshake), and {@link #serving()} says where it serves. The secret is sent only over the
   * socket and only to such a daemon; to a daemon that serves, the client always sends the auth
   * tail (empty without a secret), as the protocol asks. Like the IO key, the client keeps a copy
   * to register again on reconnect and puts it in no message or text it makes.
   *
   * @param authSecret 1..1024 bytes, or null for none
   * @throws IllegalArgumentException for an empty or longer secret
   */
  public List<String> register(
      String appId,
      String executorId,
      List<String> localDirs,
      int subDirs,
      byte[] ioEncryptionKey,
      byte[] authSecret)
      throws IOException {
    if (authSecret != null && (authSecret.length == 0 || authSecret.length > Wire.MAX_AUTH_SECRET)) {
      throw new IllegalArgumentException(
          "authSecret: " + authSecret.length + " bytes, want 1.." + Wire.MAX_AUTH_SECRET);
    }
    name("appId", appId);
    name("executorId", executorId);
    List<String> dirs = List.copyOf(localDirs);
    if (dirs.size() > Wire.MAX_LOCAL_DIRS) {
      throw new IllegalArgumentException(
          "localDirs: " + dirs.size() + " dirs exceed " + Wire.MAX_LOCAL_DIRS);
    }
    for (int i = 0; i < dirs.size(); i++) {
      String bad = Check.localDir(dirs.get(i));
      if (bad != null) {
        throw new IllegalArgumentException("localDirs[" + i + "]: " + bad);
      }
    }
    if (dirs.isEmpty() ? subDirs != 0 : subDirs < 1 || subDirs > Wire.MAX_SUB_DIRS) {
      throw new IllegalArgumentException(
          "subDirs " + subDirs + ": want "
              + (dirs.isEmpty() ? "0 without localDirs" : "1.." + Wire.MAX_SUB_DIRS));
    }
    if (ioEncryptionKey != null && !Wire.validKeyLength(ioEncryptionKey.length)) {
      throw new IllegalArgumentException(
          "ioEncryptionKey: " + ioEncryptionKey.length + " bytes, want 16, 24 or 32");
    }
    Registration r =
        new Registration(
            appId,
            executorId,
            dirs,
            subDirs,
            ioEncryptionKey == null ? null : ioEncryptionKey.clone(),
            authSecret == null ? null : authSecret.clone());
    synchronized (lock) {
      if (registration != null) {
        throw new IllegalStateException(
            "already registered as " + registration.appId + "/" + registration.executorId);
      }
      Resolved resolved = sendRegister(current(), r, options.requestTimeout());
      registration = r;
      serving = resolved.serving();
      return resolved.dirs();
    }
  }

  private static void name(String field, String v) {
    String bad = Check.plainName(v);
    if (bad != null) {
      throw new IllegalArgumentException(field + ": " + bad);
    }
  }

  /**
   * Starts one map task's output of opaque (already serialized) partitions.
   *
   * @param shuffleId >= 0
   * @param mapId >= 0 (Spark's map task attempt id)
   * @param numPartitions 1..{@link #MAX_PARTITIONS} (2^20, the protocol's bound)
   * @throws IllegalArgumentException for an argument out of range, before anything is sent
   * @throws IllegalStateException before {@link #register}
   */
  public MapOutput openMapOutput(int shuffleId, long mapId, int numPartitions, OpenOptions options)
      throws IOException {
    return openMapOutput(shuffleId, mapId, numPartitions, options, this.options.connectTimeout());
  }

  /**
   * {@link #openMapOutput(int, long, int, OpenOptions)}, with a reconnect it needs (the last
   * connection was lost) bounded by {@code min(connectTimeout, reconnectWithin)}: connecting, the
   * handshake and registering again, or waiting for another caller's attempt in progress, whose
   * outcome (its failure too) this call then takes.
   *
   * @param reconnectWithin > 0
   * @throws java.net.SocketTimeoutException no connection within the bound
   * @throws InterruptedIOException the thread was interrupted while it connected or waited
   */
  public MapOutput openMapOutput(
      int shuffleId, long mapId, int numPartitions, OpenOptions options, Duration reconnectWithin)
      throws IOException {
    return open(shuffleId, mapId, numPartitions, options, reconnectWithin, null, null);
  }

  /**
   * Starts one map task's output of columnar batches ({@link MapOutput#write(ColumnarBatch)}) of
   * these columns, serialized in {@code format}: the daemon's SHFC blocks or spark-rapids' kudo
   * tables (which declare {@code schema} at Open). {@code options} give codec, checksum and plane;
   * their {@link OpenOptions#kudoSchema()} must be null. Needs a daemon that announces {@link
   * ServerInfo#FEATURE_COLUMNAR} (and {@link ServerInfo#FEATURE_KUDO} for kudo), else the daemon
   * answers {@code Unsupported}.
   *
   * @throws IllegalArgumentException for an argument out of range, before anything is sent
   * @throws IllegalStateException before {@link #register}
   */
  public MapOutput openColumnarOutput(
      int shuffleId,
      long mapId,
      int numPartitions,
      ColumnarFormat format,
      ColumnarSchema schema,
      OpenOptions options)
      throws IOException {
    java.util.Objects.requireNonNull(format, "format");
    java.util.Objects.requireNonNull(schema, "schema");
    java.util.Objects.requireNonNull(options, "options");
    if (options.kudoSchema() != null) {
      throw new IllegalArgumentException(
          "openColumnarOutput: options.kudoSchema is set; the schema argument gives the columns");
    }
    return open(
        shuffleId, mapId, numPartitions, options, this.options.connectTimeout(), format, schema);
  }

  private MapOutput open(
      int shuffleId,
      long mapId,
      int numPartitions,
      OpenOptions options,
      Duration reconnectWithin,
      ColumnarFormat columnar,
      ColumnarSchema schema)
      throws IOException {
    java.util.Objects.requireNonNull(reconnectWithin, "reconnectWithin");
    if (reconnectWithin.isNegative() || reconnectWithin.isZero()) {
      throw new IllegalArgumentException("reconnectWithin " + reconnectWithin + ": want > 0");
    }
    if (shuffleId < 0) {
      throw new IllegalArgumentException("shuffleId " + shuffleId + ": want >= 0");
    }
    if (mapId < 0) {
      throw new IllegalArgumentException("mapId " + mapId + ": want >= 0");
    }
    if (numPartitions < 1 || numPartitions > Wire.MAX_PARTITIONS) {
      throw new IllegalArgumentException(
          "numPartitions " + numPartitions + ": want 1.." + MAX_PARTITIONS
              + " (the protocol's bound, 2^20)");
    }
    java.util.Objects.requireNonNull(options, "options");
    boolean encrypt;
    synchronized (lock) {
      if (registration == null) {
        throw new IllegalStateException("openMapOutput before register");
      }
      encrypt = registration.ioKey != null;
    }
    Connection c = current(reconnectWithin);
    DataPlane plane = options.plane() == null ? this.options.dataPlane() : options.plane();
    if (plane == DataPlane.MEMFD && !usable(c)) {
      logFallback(c);
      plane = DataPlane.INLINE;
    }
    String what = "open map output " + shuffleId + "/" + mapId;
    boolean kudo = options.kudoSchema() != null || columnar == ColumnarFormat.KUDO;
    List<SchemaField> fields = schema != null ? schema.wireFields() : options.kudoSchema();
    Wire.Opened o =
        (Wire.Opened)
            c.call(
                new Wire.Open(
                    shuffleId,
                    mapId,
                    numPartitions,
                    kudo || columnar != null ? Wire.KIND_COLUMNAR : Wire.KIND_OPAQUE,
                    kudo ? Wire.FORMAT_KUDO : Wire.FORMAT_SHFC,
                    options.codec().wireName(),
                    options.checksum().wireName(),
                    options.blockSize(),
                    options.level(),
                    kudo ? fields : List.of(),
                    encrypt ? Wire.OPEN_ENCRYPT : 0),
                null,
                -1,
                what);
    return new MapOutput(c, o.handle(), shuffleId, mapId, numPartitions, plane, schema);
  }

  /** Checks that the daemon answers. */
  public void ping() throws IOException {
    current().call(new Wire.Empty(Wire.PING), null, -1, "ping");
  }

  /** {@link #stats()}: map outputs the daemon committed since it started. */
  public static final String STAT_COMMITS_TOTAL = "commits_total";

  /** {@link #stats()}: map outputs the daemon aborted since it started. */
  public static final String STAT_ABORTS_TOTAL = "aborts_total";

  /**
   * The daemon's figures by name ({@code bytes_in_flight}, {@code open_map_outputs}, {@link
   * #STAT_COMMITS_TOTAL}, {@link #STAT_ABORTS_TOTAL}, ...; docs/protocol.md lists them).
   */
  public Map<String, Long> stats() throws IOException {
    Wire.StatsResult r =
        (Wire.StatsResult) current().call(new Wire.Empty(Wire.STATS), null, -1, "stats");
    Map<String, Long> m = new LinkedHashMap<>();
    for (Wire.StatsResult.Stat s : r.stats()) {
      m.put(s.name(), s.value());
    }
    return java.util.Collections.unmodifiableMap(m);
  }

  /**
   * Deletes every map output of one shuffle of an application, committed or in flight. Removing
   * again frees nothing and is no error.
   */
  public Removed removeShuffle(String appId, int shuffleId) throws IOException {
    name("appId", appId);
    if (shuffleId < 0) {
      throw new IllegalArgumentException("shuffleId " + shuffleId + ": want >= 0");
    }
    Wire.RemovedMsg r =
        (Wire.RemovedMsg)
            current()
                .call(
                    new Wire.RemoveShuffle(appId, shuffleId),
                    null,
                    -1,
                    "remove shuffle " + appId + "/" + shuffleId);
    return new Removed(r.mapOutputs(), r.bytes());
  }

  /** Deletes every map output of an application, committed or in flight. */
  public Removed removeApplication(String appId) throws IOException {
    name("appId", appId);
    Wire.RemovedMsg r =
        (Wire.RemovedMsg)
            current()
                .call(
                    new Wire.AppRequest(Wire.REMOVE_APPLICATION, appId),
                    null,
                    -1,
                    "remove application " + appId);
    return new Removed(r.mapOutputs(), r.bytes());
  }

  /** The shuffles of an application with committed map outputs, ascending by id. */
  public List<ShuffleInfo> listShuffles(String appId) throws IOException {
    name("appId", appId);
    Wire.ShuffleList r =
        (Wire.ShuffleList)
            current()
                .call(
                    new Wire.AppRequest(Wire.LIST_SHUFFLES, appId),
                    null,
                    -1,
                    "list shuffles of " + appId);
    return r.shuffles();
  }

  /**
   * The applications this connection's user may see, ascending by id: its own, or every one for
   * root and the daemon's own user (docs/protocol.md, ListApplications). A daemon without the
   * request answers {@link ErrorCode#UNSUPPORTED}.
   */
  public List<ApplicationInfo> listApplications() throws IOException {
    Wire.ApplicationList r =
        (Wire.ApplicationList)
            current()
                .call(new Wire.Empty(Wire.LIST_APPLICATIONS), null, -1, "list applications");
    return r.applications();
  }

  /**
   * Closes the connection and stops the client's threads. Open map outputs fail with {@link
   * ConnectionLostException} and the daemon discards them. Idempotent.
   */
  @Override
  public void close() {
    Connection c;
    synchronized (lock) {
      if (closed) {
        return;
      }
      closed = true;
      c = conn;
    }
    c.close();
  }
}
