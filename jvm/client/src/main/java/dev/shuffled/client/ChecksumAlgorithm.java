package dev.shuffled.client;

/**
 * The per-partition checksum of a map output (Spark's {@code spark.shuffle.checksum.algorithm}),
 * written to {@code shuffle_S_M_0.checksum.ALGO}. Spark 3.5 knows ADLER32 and CRC32 only; CRC32C
 * needs Spark 4.0+.
 */
public enum ChecksumAlgorithm {
  /** The daemon's default ({@code --checksum}). */
  DEFAULT(""),
  /** No checksum file; {@link CommitResult#checksums()} is empty. */
  NONE("none"),
  ADLER32("ADLER32"),
  CRC32("CRC32"),
  CRC32C("CRC32C");

  private final String wireName;

  ChecksumAlgorithm(String wireName) {
    this.wireName = wireName;
  }

  /** The name sent in OpenMapOutput; empty for {@link #DEFAULT}. */
  public String wireName() {
    return wireName;
  }

  /**
   * The algorithm of a Spark name ({@code ADLER32}, {@code CRC32}, {@code CRC32C}, {@code none}),
   * case-insensitive.
   *
   * @throws IllegalArgumentException for any other name
   */
  public static ChecksumAlgorithm fromName(String name) {
    for (ChecksumAlgorithm c : values()) {
      if (c != DEFAULT && c.wireName.equalsIgnoreCase(name)) {
        return c;
      }
    }
    throw new IllegalArgumentException(
        "checksum algorithm \"" + name + "\": want ADLER32, CRC32, CRC32C or none");
  }
}
