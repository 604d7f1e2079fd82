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
 * with each map output (codec and checksum), derived from Spark's own settings.
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
  final ChecksumAlgorithm checksum;
  final boolean encryption;

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

    if (booleanSetting(conf, "spark.shuffle.checksum.enabled", true)) {
      String a = conf.get("spark.shuffle.checksum.algorithm", "ADLER32").trim();
      try {
        checksum = ChecksumAlgorithm.fromName(a);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(
            "spark.shuffle.checksum.algorithm=\"" + a + "\": want ADLER32, CRC32 or CRC32C", e);
      }
      if (checksum == ChecksumAlgorithm.NONE) {
        throw new IllegalArgumentException(
            "spark.shuffle.checksum.algorithm=\"" + a
                + "\": want ADLER32, CRC32 or CRC32C (spark.shuffle.checksum.enabled=false turns"
                + " checksums off)");
      }
    } else {
      checksum = ChecksumAlgorithm.NONE;
    }

    encryption = booleanSetting(conf, "spark.io.encryption.enabled", false);
  }

  OpenOptions openOptions() {
    return new OpenOptions(codec, checksum, dataPlane);
  }

  /**
   * Why this configuration cannot go through the daemon, or null when it can. Spark's own writer
   * then writes every map output of the executor.
   */
  String unsupportedReason() {
    if (encryption) {
      return "spark.io.encryption.enabled=true: the daemon does not encrypt, and reducers would"
          + " try to decrypt its plaintext";
    }
    if (codec == null) {
      return "spark.io.compression.codec=" + sparkCodec
          + ": the daemon writes lz4, zstd, snappy or none";
    }
    return null;
  }

  /**
   * Spark codec settings that the daemon does not take from the map output (protocol version 1
   * names the codec only): its own --block-size and zstd level 1 apply. Readers decode any block
   * size and level, so this changes the compression ratio, never correctness. Null when none.
   */
  static String ignoredCodecSettings(SparkConf conf) {
    StringBuilder b = new StringBuilder();
    for (String k : new String[] {
      "spark.io.compression.lz4.blockSize",
      "spark.io.compression.snappy.blockSize",
      "spark.io.compression.zstd.level",
      "spark.io.compression.zstd.bufferSize"
    }) {
      if (conf.contains(k)) {
        b.append(b.length() == 0 ? "" : ", ").append(k).append('=').append(conf.get(k));
      }
    }
    return b.length() == 0 ? null : b.toString();
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
