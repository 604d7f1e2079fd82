package dev.shuffled.client;

import java.io.IOException;
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

  private record Registration(String appId, String executorId, List<String> dirs, int subDirs) {}

  private final Path socket;
  private final ClientOptions options;
  private final Object lock = new Object();
  private Connection conn; // guarded by lock
  private Registration registration; // guarded by lock
  private boolean closed; // guarded by lock

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
    c.conn = c.dial();
    return c;
  }

  private Connection dial() throws IOException {
    boolean wantFd = options.dataPlane() == DataPlane.MEMFD;
    Connection c = Connection.open(socket, options, wantFd);
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
    synchronized (lock) {
      if (closed) {
        throw new ConnectionLostException("client of " + socket + " is closed", null);
      }
      if (conn.failure() == null) {
        return conn;
      }
      Connection c;
      try {
        c = dial();
      } catch (ShuffledException e) {
        throw e;
      } catch (IOException e) {
        throw new ConnectionLostException(
            conn.failure().getMessage() + "; reconnecting failed: " + e.getMessage(), e);
      }
      Registration r = registration;
      if (r != null) {
        try {
          sendRegister(c, r);
        } catch (IOException | RuntimeException e) {
          c.close();
          throw e;
        }
      }
      conn = c;
      return c;
    }
  }

  private static List<String> sendRegister(Connection c, Registration r) throws IOException {
    Wire.Registered res =
        (Wire.Registered)
            c.call(
                new Wire.Register(r.appId, r.executorId, r.subDirs, r.dirs),
                null,
                -1,
                "register executor " + r.appId + "/" + r.executorId);
    return res.dirs();
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
    Registration r = new Registration(appId, executorId, dirs, subDirs);
    synchronized (lock) {
      if (registration != null) {
        throw new IllegalStateException(
            "already registered as " + registration.appId + "/" + registration.executorId);
      }
      List<String> resolved = sendRegister(current(), r);
      registration = r;
      return resolved;
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
    Connection c;
    synchronized (lock) {
      if (registration == null) {
        throw new IllegalStateException("openMapOutput before register");
      }
      c = current();
    }
    DataPlane plane = options.plane() == null ? this.options.dataPlane() : options.plane();
    if (plane == DataPlane.MEMFD && !usable(c)) {
      logFallback(c);
      plane = DataPlane.INLINE;
    }
    String what = "open map output " + shuffleId + "/" + mapId;
    boolean kudo = options.kudoSchema() != null;
    Wire.Opened o =
        (Wire.Opened)
            c.call(
                new Wire.Open(
                    shuffleId,
                    mapId,
                    numPartitions,
                    kudo ? Wire.KIND_COLUMNAR : Wire.KIND_OPAQUE,
                    kudo ? Wire.FORMAT_KUDO : Wire.FORMAT_SHFC,
                    options.codec().wireName(),
                    options.checksum().wireName(),
                    options.blockSize(),
                    options.level(),
                    kudo ? options.kudoSchema() : List.of()),
                null,
                -1,
                what);
    return new MapOutput(c, o.handle(), shuffleId, mapId, numPartitions, plane);
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
