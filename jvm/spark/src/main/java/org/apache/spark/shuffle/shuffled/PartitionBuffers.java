package org.apache.spark.shuffle.shuffled;

import java.io.OutputStream;
import java.util.Arrays;

/**
 * The serialized, uncompressed bytes of each partition of one map task since the last batch.
 * {@link #assemble} lays them out as one opaque batch (partitions in order, with offsets) and
 * empties the buffers.
 *
 * <p>What the buffers keep between batches is bounded by the batch size, not by the partitions'
 * history: {@link #assemble} keeps a partition's array for the next batch only while it is at most
 * {@link #keepCapacity()} (four times the batch size's share of one partition), so input whose
 * keys move from partition to partition (clustered) does not leave every partition it passed with
 * an array of the batch's size. The largest array it lets go is kept as one spare, which the next
 * partition to outgrow the cap takes, so such input does not allocate a batch's worth of arrays
 * again for every batch. Between batches a task so keeps at most 4 × batchBytes in partitions'
 * arrays (16 bytes per partition where that is more), a spare of at most 4 × batchBytes and the
 * payload array (a batch, at most twice batchBytes unless the last batch was larger): O(batchBytes)
 * whatever the input's order.
 */
final class PartitionBuffers {
  private static final int MAX_FIRST_CAPACITY = 512;
  private static final int MIN_FIRST_CAPACITY = 16;
  private static final int MAX_ARRAY = Integer.MAX_VALUE - 8;

  private final byte[][] bufs;
  private final int[] lens;
  /** A partition's first array: its share of a batch, 16..512 bytes. */
  private final int firstCapacity;
  /** Arrays up to this size are kept for the next batch. */
  private final int keepCapacity;
  /** Spare arrays up to this size are kept. */
  private final long maxSpare;
  /** The batch size given; a payload array up to twice it is kept. */
  private final long batchBytes;
  private long size;
  private byte[] payload = new byte[0];
  /** The largest array assemble let go, for the next partition that outgrows keepCapacity. */
  private byte[] spare;

  /**
   * @param numPartitions partitions of the map output
   * @param batchBytes the batch size the writer sends at (the bound on what is kept)
   */
  PartitionBuffers(int numPartitions, long batchBytes) {
    bufs = new byte[numPartitions][];
    lens = new int[numPartitions];
    long share = Math.max(1, batchBytes / Math.max(1, numPartitions));
    firstCapacity = (int) Math.max(MIN_FIRST_CAPACITY, Math.min(MAX_FIRST_CAPACITY, share));
    keepCapacity = (int) Math.max(firstCapacity, Math.min(MAX_ARRAY, 4 * share));
    maxSpare = Math.min(MAX_ARRAY, 4 * Math.max(1, batchBytes));
    this.batchBytes = Math.max(1, batchBytes);
  }

  int numPartitions() {
    return lens.length;
  }

  /** Bytes held over all partitions. */
  long size() {
    return size;
  }

  /** The largest array assemble keeps for a partition; for the tests. */
  int keepCapacity() {
    return keepCapacity;
  }

  /** Bytes of every array held: the partitions', the spare and the payload; for the tests. */
  long retainedBytes() {
    long n = payload.length + (spare == null ? 0 : spare.length);
    for (byte[] b : bufs) {
      if (b != null) {
        n += b.length;
      }
    }
    return n;
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
      bufs[p] = new byte[Math.max(firstCapacity, need)];
    } else if (need > b.length) {
      long grown = Math.max(need, Math.min((long) b.length * 2, MAX_ARRAY));
      if (grown > keepCapacity && spare != null && spare.length >= need) {
        byte[] s = spare; // what an earlier partition let go (clustered input)
        spare = null;
        System.arraycopy(b, 0, s, 0, lens[p]);
        bufs[p] = s;
      } else {
        bufs[p] = Arrays.copyOf(b, (int) grown);
      }
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
   * buffers, letting go of arrays over {@link #keepCapacity()}. offsets (numPartitions+1 entries)
   * receives where each partition starts; the payload is {@code payload()[0,
   * offsets[numPartitions])}, valid until the next call.
   */
  void assemble(long[] offsets) {
    if (size > MAX_ARRAY) {
      throw new IllegalStateException("a batch of " + size + " bytes does not fit one array");
    }
    if (payload.length < size) {
      payload = new byte[(int) Math.max(size, Math.min((long) payload.length * 3 / 2, MAX_ARRAY))];
    } else if (payload.length > 2 * Math.max(size, batchBytes)) {
      payload = new byte[(int) size]; // an outsized batch (one huge record) is not kept
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
      byte[] b = bufs[p];
      if (b != null && b.length > keepCapacity) {
        bufs[p] = null;
        if (b.length <= maxSpare && (spare == null || b.length > spare.length)) {
          spare = b;
        }
      }
    }
    offsets[lens.length] = pos;
    size = 0;
  }

  byte[] payload() {
    return payload;
  }
}
