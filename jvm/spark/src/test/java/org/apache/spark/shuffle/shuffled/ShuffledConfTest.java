package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.shuffled.client.ChecksumAlgorithm;
import dev.shuffled.client.Codec;
import java.util.HashMap;
import java.util.Map;
import org.apache.spark.network.util.JavaUtils;
import org.junit.jupiter.api.Test;

class ShuffledConfTest {
  @Test
  void sparkCodecNamesMapToTheDaemonsCodecs() {
    assertEquals(Codec.LZ4, ShuffledConf.daemonCodec("lz4"));
    assertEquals(Codec.LZ4, ShuffledConf.daemonCodec("org.apache.spark.io.LZ4CompressionCodec"));
    assertEquals(Codec.ZSTD, ShuffledConf.daemonCodec("ZSTD"));
    assertEquals(Codec.ZSTD, ShuffledConf.daemonCodec("org.apache.spark.io.ZStdCompressionCodec"));
    assertEquals(Codec.SNAPPY, ShuffledConf.daemonCodec("snappy"));
    assertEquals(
        Codec.SNAPPY, ShuffledConf.daemonCodec("org.apache.spark.io.SnappyCompressionCodec"));
    // No daemon codec: Spark's own writer takes over.
    assertNull(ShuffledConf.daemonCodec("lzf"));
    assertNull(ShuffledConf.daemonCodec("org.apache.spark.io.LZFCompressionCodec"));
    assertNull(ShuffledConf.daemonCodec("com.example.MyCodec"));
  }

  /** codecParams of codec under these settings; sizes parsed as Spark parses them. */
  private static ShuffledConf.CodecParams params(Codec codec, String... kv) {
    Map<String, String> m = new HashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put(kv[i], kv[i + 1]);
    }
    return ShuffledConf.codecParams(codec, new ShuffledConf.Settings() {
      public long sizeAsBytes(String key, String dflt) {
        return JavaUtils.byteStringAsBytes(m.getOrDefault(key, dflt));
      }

      public int integer(String key, int dflt) {
        return m.containsKey(key) ? Integer.parseInt(m.get(key)) : dflt;
      }

      public String raw(String key) {
        return m.getOrDefault(key, "");
      }
    });
  }

  @Test
  void sparkCodecSettingsGoToTheDaemon() {
    ShuffledConf.CodecParams p = params(Codec.LZ4);
    assertEquals(32 << 10, p.blockSize(), "Spark's default lz4 block size, 32k");
    assertEquals(0, p.level());
    assertNull(p.note());
    assertEquals(64 << 10, params(Codec.LZ4, "spark.io.compression.lz4.blockSize", "64k").blockSize());
    p = params(Codec.SNAPPY, "spark.io.compression.snappy.blockSize", "1m");
    assertEquals(1 << 20, p.blockSize());
    assertEquals(0, p.level());
    assertEquals(1024, params(Codec.SNAPPY, "spark.io.compression.snappy.blockSize", "100b")
        .blockSize(), "snappy-java raises block sizes under 1 KiB to 1 KiB");
    p = params(Codec.ZSTD, "spark.io.compression.zstd.level", "3",
        "spark.io.compression.lz4.blockSize", "64k");
    assertEquals(3, p.level());
    assertEquals(0, p.blockSize(), "zstd takes no block size");
    assertEquals(1, params(Codec.ZSTD).level(), "Spark's default level 1");
    assertEquals(3, params(Codec.ZSTD, "spark.io.compression.zstd.level", "0").level(),
        "zstd's level 0 is its default, 3");
    assertEquals(22, params(Codec.ZSTD, "spark.io.compression.zstd.level", "30").level(),
        "zstd caps levels at 22");
    p = params(Codec.ZSTD, "spark.io.compression.zstd.level", "-5");
    assertEquals(1, p.level());
    assertTrue(p.note().contains("zstd.level=-5"), p.note());
    p = params(Codec.NONE, "spark.io.compression.lz4.blockSize", "64k",
        "spark.io.compression.zstd.level", "3");
    assertEquals(0, p.blockSize());
    assertEquals(0, p.level());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> params(Codec.LZ4, "spark.io.compression.lz4.blockSize", "32"));
    assertTrue(e.getMessage().contains("spark.io.compression.lz4.blockSize=32"), e.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> params(Codec.LZ4, "spark.io.compression.lz4.blockSize", "64m"));
    assertThrows(IllegalArgumentException.class,
        () -> params(Codec.ZSTD, "spark.io.compression.zstd.level", "x"));
  }

  @Test
  void crc32cOnlyOnSpark4() {
    assertEquals(ChecksumAlgorithm.ADLER32, ShuffledConf.checksumAlgorithm("ADLER32", "3.5.9"));
    assertEquals(ChecksumAlgorithm.CRC32, ShuffledConf.checksumAlgorithm(" crc32 ", "3.5.9"));
    assertEquals(ChecksumAlgorithm.CRC32C, ShuffledConf.checksumAlgorithm("CRC32C", "4.0.4"));
    assertEquals(ChecksumAlgorithm.CRC32C, ShuffledConf.checksumAlgorithm("crc32c", "4.1.0-preview1"));
    // Spark 3.5 itself takes only ADLER32 and CRC32.
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> ShuffledConf.checksumAlgorithm("CRC32C", "3.5.9"));
    assertTrue(e.getMessage().contains("spark.shuffle.checksum.algorithm=\"CRC32C\""), e.getMessage());
    assertTrue(e.getMessage().contains("Spark 3.5.9"), e.getMessage());
    assertTrue(e.getMessage().contains("CRC32C needs Spark 4"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> ShuffledConf.checksumAlgorithm("none", "4.0.4"));
    assertTrue(e.getMessage().contains("checksum.enabled=false"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> ShuffledConf.checksumAlgorithm("MD5", "4.0.4"));
    assertEquals(3, ShuffledConf.sparkMajor("3.5.9"));
    assertEquals(4, ShuffledConf.sparkMajor("4.0.0-preview2"));
  }

  @Test
  void ioEncryptionGoesThroughTheDaemonWithSparksCipher() {
    assertNull(ShuffledConf.cipherUnsupported(false, "AES/CBC/PKCS5Padding"));
    assertNull(ShuffledConf.cipherUnsupported(true, "AES/CTR/NoPadding"), "Spark's default cipher falls back");
    String reason = ShuffledConf.cipherUnsupported(true, "AES/CBC/PKCS5Padding");
    assertTrue(
        reason != null && reason.contains("AES/CBC/PKCS5Padding") && reason.contains("AES/CTR/NoPadding"),
        "reason: " + reason);
  }
}
