package dev.shuffled.client;

/** The compression codec of a map output's files (Spark's {@code spark.io.compression.codec}). */
public enum Codec {
  /** The daemon's default ({@code --codec}). */
  DEFAULT(""),
  /** No compression. */
  NONE("none"),
  /** lz4-java's LZ4BlockOutputStream framing, as Spark's LZ4CompressionCodec. */
  LZ4("lz4"),
  /** zstd frames, as Spark's ZStdCompressionCodec. */
  ZSTD("zstd"),
  /** snappy-java's SnappyOutputStream framing, as Spark's SnappyCompressionCodec. */
  SNAPPY("snappy");

  private final String wireName;

  Codec(String wireName) {
    this.wireName = wireName;
  }

  /** The name sent in OpenMapOutput; empty for {@link #DEFAULT}. */
  public String wireName() {
    return wireName;
  }

  /**
   * The codec of a Spark codec name ({@code lz4}, {@code zstd}, {@code snappy}, {@code none}),
   * case-insensitive.
   *
   * @throws IllegalArgumentException for any other name
   */
  public static Codec fromName(String name) {
    for (Codec c : values()) {
      if (c != DEFAULT && c.wireName.equalsIgnoreCase(name)) {
        return c;
      }
    }
    throw new IllegalArgumentException("codec \"" + name + "\": want lz4, zstd, snappy or none");
  }
}
