package dev.shuffled.client;

import java.io.ByteArrayOutputStream;
import java.util.Random;

/** Test payloads: compressible pseudo-random records, and batches built from them. */
final class Payloads {
  private Payloads() {}

  /** Bytes like serialized rows: repetitive but not constant, so every codec has work. */
  static byte[] records(Random r, int n) {
    byte[] b = new byte[n];
    String[] words = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"};
    int i = 0;
    while (i < n) {
      byte[] w = (words[r.nextInt(words.length)] + r.nextInt(1000) + ",").getBytes();
      int k = Math.min(w.length, n - i);
      System.arraycopy(w, 0, b, i, k);
      i += k;
    }
    return b;
  }

  /** One batch: partitions' bytes concatenated, with offsets. */
  record Batch(byte[] data, long[] offsets) {}

  /**
   * A batch with {@code sizes[p]} bytes for partition p (0 for an empty one), appending each
   * partition's bytes to {@code expected[p]}.
   */
  static Batch batch(Random r, int[] sizes, ByteArrayOutputStream[] expected) {
    ByteArrayOutputStream all = new ByteArrayOutputStream();
    long[] off = new long[sizes.length + 1];
    for (int p = 0; p < sizes.length; p++) {
      byte[] part = records(r, sizes[p]);
      all.writeBytes(part);
      expected[p].writeBytes(part);
      off[p + 1] = off[p] + part.length;
    }
    return new Batch(all.toByteArray(), off);
  }

  static ByteArrayOutputStream[] expected(int n) {
    ByteArrayOutputStream[] e = new ByteArrayOutputStream[n];
    for (int i = 0; i < n; i++) {
      e[i] = new ByteArrayOutputStream();
    }
    return e;
  }
}
