package dev.shuffled.client;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The client's own CPU for one device batch, no GPU needed: {@link DeviceBatch#of}, its placement
 * in a made-up allocation and the Batch frame, for the lineitem-like batch of {@link DeviceProof}
 * (16 columns, 100 000 rows, 200 partitions), as a fresh JVM runs them: the calling thread's CPU
 * time a batch over batches 1-150 (what one worker of a DeviceProof run writes, cold), then
 * 151-1000, 1001-5000 and 5001-20000. The JIT's own threads are not counted. Prints one line each.
 *
 * <p>Usage: DeviceBatchCost
 */
public final class DeviceBatchCost {
  public static void main(String[] a) throws CudaException {
    ColumnarSchema s = DeviceProof.SCHEMA;
    long rows = 100_000, base = 0x7f00_0000_0000L, pos = 0;
    List<DeviceBatch.Column> cols = new ArrayList<>();
    for (int c = 0; c < s.size(); c++) {
      ColumnType t = s.field(c).type();
      if (t.varWidth()) {
        cols.add(DeviceBatch.Column.varWidth(
            new DeviceBatch.Buffer(base + pos, 4 * (rows + 1)),
            new DeviceBatch.Buffer(base + pos + (1 << 20), 3_000_000),
            c == 15 ? new DeviceBatch.Buffer(base + pos + (8 << 20), rows / 8) : null));
      } else {
        cols.add(DeviceBatch.Column.fixed(new DeviceBatch.Buffer(base + pos, rows * t.width()), null));
      }
      pos += 16 << 20;
    }
    long[] pr = new long[201];
    for (int p = 1; p <= 200; p++) {
      pr[p] = rows * p / 200;
    }
    byte[] handle = new byte[64];
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    long sink = 0;
    int done = 0;
    for (int upto : new int[] {150, 1000, 5000, 20000}) {
      long t0 = mx.getCurrentThreadCpuTime();
      int n = upto - done;
      for (int i = 0; i < n; i++) {
        DeviceBatch b = DeviceBatch.of(s, rows, cols, pr);
        DeviceBatch.Placement p = b.place(x -> new CudaDriver.AddressRange(base, 1L << 32));
        sink += Wire.frame(3, new Wire.ColumnarBatchMsg(7, Wire.PLANE_CUDA_IPC, 0, rows, p.columns(),
            b.partitionRowsRef(), p.regionOffset(), p.regionLength(), handle, 0), 0).length;
      }
      System.out.printf(Locale.ROOT, "batches %d-%d: %.1f us of thread CPU a batch%n",
          done + 1, upto, (mx.getCurrentThreadCpuTime() - t0) / 1e3 / n);
      done = upto;
    }
    if (sink == 42) {
      System.out.println(); // keeps the frames from being optimized away
    }
  }
}
