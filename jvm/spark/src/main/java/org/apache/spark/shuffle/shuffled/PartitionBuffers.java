package org.apache.spark.shuffle.shuffled;

import java.io.OutputStream;
import java.util.Arrays;

/**
 * The serialized, uncompressed bytes of each partition of one map task since the last batch.
 * {@link #assemble} lays them out as one opaque batch (partitions in order, with offsets) and
 * empties the buffers, keeping their arrays for the next batch.
 */
final class PartitionBuffers {
  private static final int FIRST_CAPACITY = 512;
  private static final int MAX_ARRAY = Integer.MAX_VALUE - 8;

  private final byte[][] bufs;
  private final int[] lens;
  private long size;
  private byte[] payload = new byte[0];

  PartitionBuffers(int numPartitions) {
    bufs = new byte[numPartitions][];
    lens = new int[numPartitions];
  }

  int numPartitions() {
    return lens.length;
  }

  /** Bytes held over all partitions. */
  long size() {
    return size;
  }

  void write(int p, int b) {
    ensure(p, 1);
    bufs[p][lens[p]++] = (byte) b;
    size++;
  }

  void write(int p, byte[] b, int off, int len) {
    if (len == 0) {
      return;
    }
    ensure(p, len);
    System.arraycopy(b, off, bufs[p], lens[p], len);
    lens[p] += len;
    size += len;
  }

  private void ensure(int p, int extra) {
    byte[] b = bufs[p];
    int need = lens[p] + extra;
    if (need < 0 || need > MAX_ARRAY) {
      throw new IllegalStateException(
          "partition " + p + " holds " + lens[p] + " bytes, cannot take " + extra + " more");
    }
    if (b == null) {
      bufs[p] = new byte[Math.max(FIRST_CAPACITY, need)];
    } else if (need > b.length) {
      long grown = Math.max(need, Math.min((long) b.length * 2, MAX_ARRAY));
      bufs[p] = Arrays.copyOf(b, (int) grown);
    }
  }

  /** An output stream that appends to partition p. */
  OutputStream stream(int p) {
    return new OutputStream() {
      @Override
      public void write(int b) {
        PartitionBuffers.this.write(p, b);
      }

      @Override
      public void write(byte[] b, int off, int len) {
        PartitionBuffers.this.write(p, b, off, len);
      }
    };
  }

  /**
   * Copies every partition's bytes, in partition order, into the payload array and empties the
   * buffers. offsets (numPartitions+1 entries) receives where each partition starts; the payload
   * is {@code payload()[0, offsets[numPartitions])}, valid until the next call.
   */
  void assemble(long[] offsets) {
    if (size > MAX_ARRAY) {
      throw new IllegalStateException("a batch of " + size + " bytes does not fit one array");
    }
    if (payload.length < size) {
      payload = new byte[(int) Math.max(size, Math.min((long) payload.length * 3 / 2, MAX_ARRAY))];
    }
    int pos = 0;
    for (int p = 0; p < lens.length; p++) {
      offsets[p] = pos;
      int n = lens[p];
      if (n > 0) {
        System.arraycopy(bufs[p], 0, payload, pos, n);
        pos += n;
        lens[p] = 0;
      }
    }
    offsets[lens.length] = pos;
    size = 0;
  }

  byte[] payload() {
    return payload;
  }
}
