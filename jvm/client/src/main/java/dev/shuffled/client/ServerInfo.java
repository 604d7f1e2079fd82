package dev.shuffled.client;

/**
 * The daemon's handshake answer (ServerHello).
 *
 * @param version the protocol version chosen
 * @param maxFrame the largest frame payload the daemon reads, in bytes
 * @param maxInline the largest inline batch payload the daemon takes, in bytes
 * @param features the feature bits the daemon announced ({@link #FEATURE_MEMFD} ...)
 * @param server the daemon's name and version
 */
public record ServerInfo(int version, long maxFrame, long maxInline, long features, String server) {
  /** Feature bit 0: Batch may use the memfd data plane. */
  public static final long FEATURE_MEMFD = 1L;
  /** Feature bit 1: Batch may use the CUDA IPC data plane. */
  public static final long FEATURE_CUDA_IPC = 1L << 1;
  /** Feature bit 2: OpenMapOutput may use the columnar payload kind. */
  public static final long FEATURE_COLUMNAR = 1L << 2;
  /** Feature bit 3: RemoveShuffle, RemoveApplication and ListShuffles are served. */
  public static final long FEATURE_LIFECYCLE = 1L << 3;
  /** Feature bit 4: OpenMapOutput may use format 1, kudo ({@link OpenOptions#withKudoSchema}). */
  public static final long FEATURE_KUDO = 1L << 4;
  /**
   * Feature bit 5: Batch may carry the LAST flag, which {@link MapOutput#markLast()} sets. A
   * daemon without the bit refuses the flag, so the client sends it only when this bit is
   * announced.
   */
  public static final long FEATURE_LAST_BATCH = 1L << 5;
  /**
   * Feature bit 6: RegisterExecutor may carry the application's IO encryption key and
   * OpenMapOutput may ask for encryption ({@link ShuffledClient#register(String, String,
   * java.util.List, int, byte[])}). The client sends a key only when this bit is announced.
   */
  public static final long FEATURE_IO_ENCRYPTION = 1L << 6;
  /**
   * Feature bit 7: the daemon runs a block server that serves committed map outputs to Spark's
   * reducers. RegisterExecutor then carries the application's auth secret (empty for none) and
   * Registered names the address executors publish ({@link ShuffledClient#serving()}).
   */
  public static final long FEATURE_SERVING = 1L << 7;

  /** Whether the daemon announced every bit of {@code feature}. */
  public boolean has(long feature) {
    return (features & feature) == feature;
  }
}
