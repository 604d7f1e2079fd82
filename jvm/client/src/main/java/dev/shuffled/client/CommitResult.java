package dev.shuffled.client;

import java.util.Arrays;

/**
 * The answer to a commit: what Spark's {@code MapStatus} needs. Immutable; the accessors return
 * copies.
 */
public final class CommitResult {
  private final boolean existing;
  private final int runs;
  private final long[] lengths;
  private final long[] checksums;

  /**
   * @param existing an earlier attempt of the same (shuffle, map) had committed and won
   * @param runs runs merged at commit (0 when existing)
   * @param lengths per-partition lengths in the data file
   * @param checksums per-partition checksums of the on-disk bytes; empty without a checksum
   */
  public CommitResult(boolean existing, int runs, long[] lengths, long[] checksums) {
    this.existing = existing;
    this.runs = runs;
    this.lengths = lengths.clone();
    this.checksums = checksums.clone();
  }

  /**
   * Whether an earlier attempt of the same (shuffle, map) had already committed: its lengths and
   * checksums are returned and this attempt was discarded, as Spark does.
   */
  public boolean existing() {
    return existing;
  }

  /** The number of runs the daemon merged (0 when {@link #existing()}). */
  public int runs() {
    return runs;
  }

  /** The partition lengths in the data file, one per partition (a copy). */
  public long[] lengths() {
    return lengths.clone();
  }

  /**
   * Spark's per-partition checksums of the on-disk bytes (each 0..2^32-1), one per partition, or
   * none when the map output has no checksum (a copy).
   */
  public long[] checksums() {
    return checksums.clone();
  }

  /** The sum of {@link #lengths()}. */
  public long totalLength() {
    long n = 0;
    for (long l : lengths) {
      n += l;
    }
    return n;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CommitResult r
        && existing == r.existing
        && runs == r.runs
        && Arrays.equals(lengths, r.lengths)
        && Arrays.equals(checksums, r.checksums);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(lengths) * 31 + Arrays.hashCode(checksums) + (existing ? 1 : 0) + runs;
  }

  @Override
  public String toString() {
    return "CommitResult[existing="
        + existing
        + ", runs="
        + runs
        + ", partitions="
        + lengths.length
        + ", bytes="
        + totalLength()
        + "]";
  }
}
