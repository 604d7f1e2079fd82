package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

class PartitionBuffersTest {
  @Test
  void assemblesPartitionsInOrderAndEmpties() throws IOException {
    int n = 7;
    PartitionBuffers b = new PartitionBuffers(n, 1 << 20);
    ByteArrayOutputStream[] want = new ByteArrayOutputStream[n];
    for (int p = 0; p < n; p++) {
      want[p] = new ByteArrayOutputStream();
    }
    Random r = new Random(1);
    // Writes in any partition order, single bytes and slices, past the first capacity.
    for (int i = 0; i < 5000; i++) {
      int p = r.nextInt(n - 1); // the last partition stays empty
      if (r.nextBoolean()) {
        int v = r.nextInt(256);
        b.write(p, v);
        want[p].write(v);
      } else {
        byte[] chunk = new byte[r.nextInt(700)];
        r.nextBytes(chunk);
        int off = chunk.length == 0 ? 0 : r.nextInt(chunk.length);
        OutputStream s = b.stream(p);
        s.write(chunk, off, chunk.length - off);
        want[p].write(chunk, off, chunk.length - off);
      }
    }
    long total = 0;
    for (ByteArrayOutputStream w : want) {
      total += w.size();
    }
    assertEquals(total, b.size());

    long[] offsets = new long[n + 1];
    b.assemble(offsets);
    assertEquals(0, b.size());
    assertEquals(0, offsets[0]);
    assertEquals(total, offsets[n]);
    for (int p = 0; p < n; p++) {
      byte[] got = Arrays.copyOfRange(b.payload(), (int) offsets[p], (int) offsets[p + 1]);
      assertArrayEquals(want[p].toByteArray(), got, "partition " + p);
    }

    // The next batch starts empty and reuses the arrays.
    b.write(3, 42);
    b.assemble(offsets);
    assertArrayEquals(new long[] {0, 0, 0, 0, 1, 1, 1, 1}, offsets);
    assertEquals(42, b.payload()[0]);
  }

  /** Writes {@code bytes} to partition p in records of 100 bytes, as a serializer would. */
  private static void fill(PartitionBuffers b, int p, int bytes, byte v) {
    byte[] rec = new byte[100];
    Arrays.fill(rec, v);
    for (int done = 0; done < bytes; done += rec.length) {
      b.write(p, rec, 0, Math.min(rec.length, bytes - done));
    }
  }

  @Test
  void clusteredInputRetainsOnlyABatchsWorth() {
    // Keys sorted or clustered: each batch goes to another partition. Every partition's array
    // grew to about twice a batch once; kept, they would add up to partitions x 2 batches.
    int n = 64;
    int batch = 64 << 10;
    PartitionBuffers b = new PartitionBuffers(n, batch);
    long[] offsets = new long[n + 1];
    long most = 0;
    for (int k = 0; k < n; k++) {
      fill(b, k, batch, (byte) k);
      b.assemble(offsets);
      assertEquals(batch, offsets[n]);
      assertEquals(batch, offsets[k + 1] - offsets[k], "batch " + k + " is partition " + k);
      assertEquals((byte) k, b.payload()[0]);
      most = Math.max(most, b.retainedBytes());
    }
    assertTrue(most <= 8L * batch,
        "retained up to " + most + " bytes over " + n + " clustered batches of " + batch
            + " (at most 8 batches' worth wanted)");
  }

  @Test
  void evenInputKeepsItsArrays() {
    // Every partition gets its share of every batch: the arrays are kept (nothing over the cap).
    int n = 64;
    int batch = 64 << 10;
    PartitionBuffers b = new PartitionBuffers(n, batch);
    long[] offsets = new long[n + 1];
    long first = -1;
    for (int round = 0; round < 10; round++) {
      for (int p = 0; p < n; p++) {
        fill(b, p, batch / n, (byte) p);
      }
      b.assemble(offsets);
      assertEquals(batch, offsets[n]);
      if (first < 0) {
        first = b.retainedBytes();
      }
      assertEquals(first, b.retainedBytes(), "round " + round + ": arrays reallocated");
    }
    assertTrue(first <= 4L * batch, first + " bytes retained for batches of " + batch);
  }

  @Test
  void manyPartitionsStartSmall() {
    // 2^20 partitions and 8 MiB batches: 512-byte first arrays would be 512 MiB for one byte in
    // each partition; a partition's first array is its share of the batch instead (16 B at least).
    int n = 1 << 20;
    PartitionBuffers b = new PartitionBuffers(n, 8 << 20);
    for (int p = 0; p < n; p++) {
      b.write(p, p);
    }
    assertTrue(b.retainedBytes() <= 16L * n, b.retainedBytes() + " bytes for " + n + " bytes");
    long[] offsets = new long[n + 1];
    b.assemble(offsets);
    assertEquals(n, offsets[n]);
    assertEquals(7, b.payload()[7]);
  }
}
