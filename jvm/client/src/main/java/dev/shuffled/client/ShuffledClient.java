package dev.shuffled.client;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

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
  private ShuffledClient() {}

  /** Connects with {@link ClientOptions#DEFAULTS}. */
  public static ShuffledClient connect(Path socket) throws IOException {
    return connect(socket, ClientOptions.DEFAULTS);
  }

  /**
   * Connects to the daemon's socket and performs the handshake.
   *
   * @throws ShuffledException if the daemon refuses the handshake (e.g. VersionMismatch)
   * @throws IOException if the socket cannot be reached within the connect timeout
   */
  public static ShuffledClient connect(Path socket, ClientOptions options) throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /** The handshake answer of the current connection. */
  public ServerInfo serverInfo() {
    throw new UnsupportedOperationException("not yet");
  }

  /**
   * Whether map outputs that ask for {@link DataPlane#MEMFD} get it: the JDK is 22+ with the FFM
   * API usable, the platform has memfd, and the daemon announced the feature.
   */
  public boolean memfdAvailable() {
    throw new UnsupportedOperationException("not yet");
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
    throw new UnsupportedOperationException("not yet");
  }

  /**
   * Starts one map task's output of opaque (already serialized) partitions.
   *
   * @param shuffleId >= 0
   * @param mapId >= 0 (Spark's map task attempt id)
   * @param numPartitions 1..16777216
   * @throws IllegalStateException before {@link #register}
   */
  public MapOutput openMapOutput(int shuffleId, long mapId, int numPartitions, OpenOptions options)
      throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /** Checks that the daemon answers. */
  public void ping() throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /** The daemon's figures by name ({@code bytes_in_flight}, {@code open_map_outputs}, ...). */
  public Map<String, Long> stats() throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /**
   * Deletes every map output of one shuffle of an application, committed or in flight. Removing
   * again frees nothing and is no error.
   */
  public Removed removeShuffle(String appId, int shuffleId) throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /** Deletes every map output of an application, committed or in flight. */
  public Removed removeApplication(String appId) throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /** The shuffles of an application with committed map outputs, ascending by id. */
  public List<ShuffleInfo> listShuffles(String appId) throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /**
   * Closes the connection and stops the reader thread. Open map outputs fail with {@link
   * ConnectionLostException} and the daemon discards them. Idempotent.
   */
  @Override
  public void close() {
    throw new UnsupportedOperationException("not yet");
  }
}
