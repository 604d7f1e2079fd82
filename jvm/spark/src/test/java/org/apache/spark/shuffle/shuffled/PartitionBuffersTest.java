package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

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
    PartitionBuffers b = new PartitionBuffers(n);
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
}
