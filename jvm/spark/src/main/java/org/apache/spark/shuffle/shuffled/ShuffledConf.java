package org.apache.spark.shuffle.shuffled;

import dev.shuffled.client.ChecksumAlgorithm;
import dev.shuffled.client.Codec;
import dev.shuffled.client.DataPlane;
import dev.shuffled.client.OpenOptions;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import org.apache.spark.SparkConf;

/**
 * The plugin's settings, read once from the {@link SparkConf}, and what the daemon is asked to do
 * with each map output (codec with its block size or level, checksum), derived from Spark's own
 * settings.
 *
 * <p>Every {@code spark.shuffled.*} setting with its default is listed in the README's "Use it
 * from Spark" section; keep the two in step.
 */
final class ShuffledConf {
  static final String SOCKET = "spark.shuffled.socket";
  static final String BATCH_BYTES = "spark.shuffled.batchBytes";
  static final String FALLBACK = "spark.shuffled.fallback.enabled";
  static final String DATA_PLANE = "spark.shuffled.dataPlane";
  static final String CONNECT_TIMEOUT = "spark.shuffled.connectTimeout";
  static final String RECONNECT_TIMEOUT = "spark.shuffled.reconnectTimeout";
  static final String SERVING = "spark.shuffled.serving.enabled";
  /** Spark's ShuffleDataIO setting, which serving sets to {@link ShuffledDataIO} when unset. */
  static final String IO_PLUGIN = "spark.shuffle.sort.io.plugin.class";

  static final String CHECKSUM_ALGORITHM = "spark.shuffle.checksum.algorithm";
  static final String LZ4_BLOCK_SIZE = "spark.io.compression.lz4.blockSize";
  static final String SNAPPY_BLOCK_SIZE = "spark.io.compression.snappy.blockSize";
  static final String ZSTD_LEVEL = "spark.io.compression.zstd.level";
  static final int MAX_BLOCK_SIZE = 32 << 20;
  static final int SNAPPY_MIN_BLOCK_SIZE = 1 << 10;
  static final int ZSTD_DEFAULT_LEVEL = 3;
  static final int ZSTD_MAX_LEVEL = 22;

  static final String DEFAULT_SOCKET = "/run/shuffled/shuffled.sock";
  static final String DEFAULT_BATCH_BYTES = "8m";
  static final long MIN_BATCH_BYTES = 4 << 10;
  static final long MAX_BATCH_BYTES = 1L << 30;

  final Path socket;
  final long batchBytes;
  final boolean fallback;
  final DataPlane dataPlane;
  final Duration connectTimeout;
  final Duration reconnectTimeout;
  /** The codec the daemon compresses with, or null when Spark's codec has no daemon twin. */
  final Codec codec;
  /** Spark's codec name as configured, for messages. */
  final String sparkCodec;
  /**
   * The lz4 or snappy block size Spark's writer would use ({@code
   * spark.io.compression.{lz4,snappy}.blockSize}), 0 for other codecs.
   */
  final int blockSize;
  /** The zstd level Spark's writer would use ({@code spark.io.compression.zstd.level}), else 0. */
  final int level;
  /** What of Spark's codec settings the daemon applies differently, for a warning; or null. */
  final String codecNote;
  final ChecksumAlgorithm checksum;
  /**
   * spark.io.encryption.enabled: the daemon encrypts every map output with the application's key,
   * as Spark's writers do.
   */
  final boolean encryption;
  /** spark.io.crypto.cipher.transformation (Spark's default AES/CTR/NoPadding). */
  final String cipher;
  /**
   * spark.shuffled.serving.enabled and nothing that rules it out ({@link #servingOff}): executors
   * publish the daemon's block server as their map outputs' location where the daemon serves, and
   * the driver reports reliable shuffle storage ({@link ShuffledDataIO}).
   */
  final boolean serving;
  /** Why serving is off although spark.shuffled.serving.enabled=true, for a warning; or null. */
  final String servingOff;
  /** spark.authenticate: executors hand the application's secret to a daemon that serves. */
  final boolean authenticate;

  ShuffledConf(SparkConf conf) {
    String s = conf.get(SOCKET, DEFAULT_SOCKET).trim();
    if (s.isEmpty() || !s.startsWith("/")) {
      throw new IllegalArgumentException(SOCKET + "=\"" + s + "\": want an absolute path");
    }
    socket = Path.of(s);

    long b;
    try {
      b = conf.getSizeAsBytes(BATCH_BYTES, DEFAULT_BATCH_BYTES);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          BATCH_BYTES + "=\"" + conf.get(BATCH_BYTES, "") + "\": want a size such as 8m", e);
    }
    if (b < MIN_BATCH_BYTES || b > MAX_BATCH_BYTES) {
      throw new IllegalArgumentException(
          BATCH_BYTES + "=" + b + ": want " + MIN_BATCH_BYTES + " (4k) to " + MAX_BATCH_BYTES
              + " (1g) bytes");
    }
    batchBytes = b;

    fallback = booleanSetting(conf, FALLBACK, true);

    String plane = conf.get(DATA_PLANE, "memfd").trim().toLowerCase(Locale.ROOT);
    switch (plane) {
      case "memfd" -> dataPlane = DataPlane.MEMFD;
      case "inline" -> dataPlane = DataPlane.INLINE;
      default ->
          throw new IllegalArgumentException(
              DATA_PLANE + "=\"" + plane + "\": want memfd or inline");
    }

    long ms = duration(conf, CONNECT_TIMEOUT, "10s", false);
    connectTimeout = Duration.ofMillis(ms);
    reconnectTimeout = Duration.ofMillis(duration(conf, RECONNECT_TIMEOUT, "15s", true));

    if (booleanSetting(conf, "spark.shuffle.compress", true)) {
      sparkCodec = conf.get("spark.io.compression.codec", "lz4").trim();
      codec = daemonCodec(sparkCodec);
    } else {
      sparkCodec = "none (spark.shuffle.compress=false)";
      codec = Codec.NONE;
    }
    CodecParams cp = codecParams(codec, new Settings() {
      public long sizeAsBytes(String key, String dflt) {
        return conf.getSizeAsBytes(key, dflt);
      }

      public int integer(String key, int dflt) {
        return conf.getInt(key, dflt);
      }

      public String raw(String key) {
        return conf.get(key, "");
      }
    });
    int bs = cp.blockSize();
    int lv = cp.level();
    String note = cp.note();
    blockSize = bs;
    level = lv;
    codecNote = note;

    if (booleanSetting(conf, "spark.shuffle.checksum.enabled", true)) {
      checksum = checksumAlgorithm(
          conf.get(CHECKSUM_ALGORITHM, "ADLER32"), org.apache.spark.package$.MODULE$.SPARK_VERSION());
    } else {
      checksum = ChecksumAlgorithm.NONE;
    }

    encryption = booleanSetting(conf, "spark.io.encryption.enabled", false);
    cipher = conf.get(CIPHER_TRANSFORMATION, SPARK_CIPHER).trim();

    authenticate = booleanSetting(conf, "spark.authenticate", false);
    boolean wanted = booleanSetting(conf, SERVING, false);
    servingOff = wanted ? servingOff(conf.get("spark.ssl.rpc.enabled", "false").trim()) : null;
    serving = wanted && servingOff == null;
  }

  /**
   * Why serving cannot be on for an application whose {@code spark.ssl.rpc.enabled} is {@code
   * tls}, or null. Spark 4's reducers then open TLS connections to every block location, and the
   * daemon's block server speaks no TLS: its location would fail every fetch, so the executors
   * keep serving their own map outputs.
   */
  static String servingOff(String tls) {
    if (tls.equalsIgnoreCase("true")) {
      return SERVING + "=true, but spark.ssl.rpc.enabled=true: Spark's reducers would fetch over"
          + " TLS, which the daemon's block server does not speak; executors serve their own map"
          + " outputs (lost with them), and Spark's storage is not reported reliable";
    }
    return null;
  }

  /** Spark's internal spark.io.crypto.cipher.transformation, and the one value the daemon writes. */
  static final String CIPHER_TRANSFORMATION = "spark.io.crypto.cipher.transformation";

  static final String SPARK_CIPHER = "AES/CTR/NoPadding";

  /**
   * The checksum algorithm of {@code spark.shuffle.checksum.algorithm} under Spark {@code
   * sparkVersion}: ADLER32 or CRC32, and CRC32C from Spark 4 on. Spark 3.5 itself takes only
   * ADLER32 and CRC32 (its own writer and the reducers' corruption diagnosis refuse the rest), so
   * the plugin refuses CRC32C there rather than write checksum files Spark cannot read.
   */
  static ChecksumAlgorithm checksumAlgorithm(String setting, String sparkVersion) {
    String a = setting.trim();
    boolean crc32c = sparkMajor(sparkVersion) >= 4;
    String want = crc32c
        ? "want ADLER32, CRC32 or CRC32C"
        : "want ADLER32 or CRC32 (Spark " + sparkVersion + " takes no other; CRC32C needs Spark 4)";
    ChecksumAlgorithm c;
    try {
      c = ChecksumAlgorithm.fromName(a);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(CHECKSUM_ALGORITHM + "=\"" + a + "\": " + want, e);
    }
    if (c == ChecksumAlgorithm.NONE) {
      throw new IllegalArgumentException(
          CHECKSUM_ALGORITHM + "=\"" + a + "\": " + want
              + " (spark.shuffle.checksum.enabled=false turns checksums off)");
    }
    if (c == ChecksumAlgorithm.CRC32C && !crc32c) {
      throw new IllegalArgumentException(CHECKSUM_ALGORITHM + "=\"" + a + "\": " + want);
    }
    return c;
  }

  /** The major version of a Spark version string such as 3.5.9 or 4.0.0-preview2 (0 if none). */
  static int sparkMajor(String version) {
    int n = 0;
    int i = 0;
    while (i < version.length() && Character.isDigit(version.charAt(i)) && n < 1000) {
      n = n * 10 + (version.charAt(i++) - '0');
    }
    return n;
  }

  OpenOptions openOptions() {
    return new OpenOptions(codec, checksum, dataPlane).withBlockSize(blockSize).withLevel(level);
  }

  /**
   * Why this configuration cannot go through the daemon, or null when it can. Spark's own writer
   * then writes every map output of the executor.
   */
  String unsupportedReason() {
    String c = cipherUnsupported(encryption, cipher);
    if (c != null) {
      return c;
    }
    if (codec == null) {
      return "spark.io.compression.codec=" + sparkCodec
          + ": the daemon writes lz4, zstd, snappy or none";
    }
    return null;
  }

  /**
   * Why IO encryption with this cipher transformation cannot go through the daemon, or null: it
   * writes Spark's default, AES/CTR/NoPadding, which every encrypted shuffle uses unless the
   * internal spark.io.crypto.cipher.transformation says otherwise.
   */
  static String cipherUnsupported(boolean encryption, String cipher) {
    if (encryption && !cipher.equals(SPARK_CIPHER)) {
      return CIPHER_TRANSFORMATION + "=" + cipher + ": the daemon encrypts with " + SPARK_CIPHER
          + " only";
    }
    return null;
  }

  /** The Spark settings codecParams reads (a SparkConf; a map in tests). */
  interface Settings {
    long sizeAsBytes(String key, String dflt);

    int integer(String key, int dflt);

    /** The setting as written, "" when unset: for messages. */
    String raw(String key);
  }

  /** A codec's block size and level for OpenOptions (0 where it takes none), and a warning. */
  record CodecParams(int blockSize, int level, String note) {}

  /**
   * What Spark's own writer would compress codec with under these settings: lz4 and snappy
   * blocks of {@code spark.io.compression.{lz4,snappy}.blockSize} (default 32k), zstd at {@code
   * spark.io.compression.zstd.level} (default 1).
   */
  static CodecParams codecParams(Codec codec, Settings conf) {
    String note = null;
    int bs = 0;
    int lv = 0;
    if (codec == Codec.LZ4) {
      // lz4-java's LZ4BlockOutputStream refuses sizes outside 64 B..32 MiB, as the daemon does.
      bs = blockSize(conf, LZ4_BLOCK_SIZE, 64);
    } else if (codec == Codec.SNAPPY) {
      // snappy-java's SnappyOutputStream raises sizes under 1 KiB to 1 KiB.
      bs = Math.max(SNAPPY_MIN_BLOCK_SIZE, blockSize(conf, SNAPPY_BLOCK_SIZE, 1));
    } else if (codec == Codec.ZSTD) {
      int l;
      try {
        l = conf.integer(ZSTD_LEVEL, 1);
      } catch (RuntimeException e) {
        throw new IllegalArgumentException(
            ZSTD_LEVEL + "=\"" + conf.raw(ZSTD_LEVEL) + "\": want an integer", e);
      }
      // zstd reads 0 as its default level, 3, and levels past the last as the last.
      lv = l == 0 ? ZSTD_DEFAULT_LEVEL : Math.min(l, ZSTD_MAX_LEVEL);
      if (lv < 1) {
        note = ZSTD_LEVEL + "=" + l + ": the daemon has no negative (fast) zstd levels and"
            + " compresses at level 1 (readers decode either)";
        lv = 1;
      }
    }
    return new CodecParams(bs, lv, note);
  }

  /** A block size setting of Spark's (default 32k), checked against min..32m. */
  private static int blockSize(Settings conf, String key, int min) {
    long n;
    try {
      n = conf.sizeAsBytes(key, "32k");
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          key + "=\"" + conf.raw(key) + "\": want a size such as 32k", e);
    }
    if (n < min || n > MAX_BLOCK_SIZE) {
      throw new IllegalArgumentException(
          key + "=" + n + ": want " + min + " to " + MAX_BLOCK_SIZE + " (32m) bytes");
    }
    return (int) n;
  }

  /** The daemon's codec for one of Spark's codec names (short or class name); null if none. */
  static Codec daemonCodec(String sparkName) {
    String n = sparkName.toLowerCase(Locale.ROOT);
    return switch (n) {
      case "lz4", "org.apache.spark.io.lz4compressioncodec" -> Codec.LZ4;
      case "zstd", "org.apache.spark.io.zstdcompressioncodec" -> Codec.ZSTD;
      case "snappy", "org.apache.spark.io.snappycompressioncodec" -> Codec.SNAPPY;
      default -> null;
    };
  }

  private static long duration(SparkConf conf, String key, String dflt, boolean zeroOk) {
    long ms;
    try {
      ms = conf.getTimeAsMs(key, dflt);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          key + "=\"" + conf.get(key, "") + "\": want a duration such as " + dflt, e);
    }
    if (ms < 0 || (ms == 0 && !zeroOk)) {
      throw new IllegalArgumentException(key + "=" + ms + "ms: want " + (zeroOk ? ">= 0" : "> 0"));
    }
    return ms;
  }

  private static boolean booleanSetting(SparkConf conf, String key, boolean dflt) {
    String v = conf.get(key, Boolean.toString(dflt)).trim();
    if (v.equalsIgnoreCase("true")) {
      return true;
    }
    if (v.equalsIgnoreCase("false")) {
      return false;
    }
    throw new IllegalArgumentException(key + "=\"" + v + "\": want true or false");
  }
}
