package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.shuffled.client.Codec;
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
}
