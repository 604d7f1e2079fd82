package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** A device batch's validation and its placement in one device allocation, without a GPU. */
class DeviceBatchTest {
  private static final ColumnarSchema SCHEMA =
      ColumnarSchema.of(ColumnarSchema.Field.of("k", "bigint"), ColumnarSchema.Field.of("s", "string"));
  private static final long BASE = 0x7f12_0000_0000L;
  private static final long SIZE = 1 << 20;

  private static DeviceBatch.Buffer at(long off, long len) {
    return new DeviceBatch.Buffer(BASE + off, len);
  }

  private static void refused(String want, Executable e) {
    IllegalArgumentException x = assertThrows(IllegalArgumentException.class, e);
    assertTrue(x.getMessage().contains(want), "want \"" + want + "\" in: " + x.getMessage());
  }

  /** The batch of the golden frame: 5 rows, its buffers from byte 4096 of the allocation. */
  private static DeviceBatch golden() {
    return DeviceBatch.of(
        SCHEMA,
        5,
        List.of(
            DeviceBatch.Column.fixed(at(4096 + 64, 64), at(4096, 64)),
            DeviceBatch.Column.varWidth(at(4096 + 128, 24), at(4096 + 192, 8), null)),
        new long[] {0, 2, 5});
  }

  private static CudaDriver.AddressRange resolve(long address) {
    assertTrue(address >= BASE && address < BASE + SIZE, "resolved 0x" + Long.toHexString(address));
    return new CudaDriver.AddressRange(BASE, SIZE);
  }

  /**
   * The frame of a device batch, byte for byte as the Go encoder (protocol.AppendFrame) writes the
   * same Batch: layout offsets relative to the region, the region's offset in the allocation, the
   * 64-byte handle, the device ordinal and a reserved u32 (docs/protocol.md, "Data planes").
   */
  @Test
  void goldenFrame() throws Exception {
    DeviceBatch.Placement p = golden().place(DeviceBatchTest::resolve);
    assertEquals(BASE, p.base());
    assertEquals(4096, p.regionOffset());
    assertEquals(200, p.regionLength());
    byte[] handle = new byte[64];
    for (int i = 0; i < 64; i++) {
      handle[i] = (byte) (0xa0 + i);
    }
    byte[] got =
        Wire.frame(
            3,
            new Wire.ColumnarBatchMsg(7, Wire.PLANE_CUDA_IPC, Wire.BATCH_LAST, 5, p.columns(),
                new long[] {0, 2, 5}, p.regionOffset(), p.regionLength(), handle, 1),
            0);
    String want =
        "5348040000000000030000000a01000007000000000000000203010005000000000000000200000005000000"
            + "000000000000000001006b0000000000000000010000000000000000000000000000000000000000000000"
            + "400000000000000028000000000000000b000000000000000000000001007300000000000000000000000000"
            + "00000080000000000000001800000000000000c0000000000000000800000000000000030000000000000000"
            + "00000002000000000000000500000000000000a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8"
            + "b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf0100000000"
            + "0000000010000000000000c800000000000000";
    assertEquals(want, HexFormat.of().formatHex(got));
  }

  /** What is sent is what the rows need: validity ceil(rows/8), data rows × width. */
  @Test
  void sentLengths() throws Exception {
    DeviceBatch b = golden();
    assertEquals(1, b.sentLength(0, 0));
    assertEquals(0, b.sentLength(0, 1));
    assertEquals(40, b.sentLength(0, 2));
    assertEquals(0, b.sentLength(1, 0));
    assertEquals(24, b.sentLength(1, 1));
    assertEquals(8, b.sentLength(1, 2));
    assertEquals(BASE + 4096, b.firstSent());
  }

  /** A buffer outside the allocation of the first one is refused, naming both. */
  @Test
  void oneAllocation() {
    DeviceBatch b =
        DeviceBatch.of(
            SCHEMA,
            5,
            List.of(
                DeviceBatch.Column.fixed(at(0, 40), null),
                DeviceBatch.Column.varWidth(at(SIZE - 8, 24), at(64, 8), null)),
            new long[] {0, 5});
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> b.place(DeviceBatchTest::resolve));
    assertTrue(e.getMessage().startsWith("column 1 (s string): offsets"), e.getMessage());
    assertTrue(e.getMessage().contains("column 0 (k bigint): data"), e.getMessage());
    DeviceBatch other =
        DeviceBatch.of(
            SCHEMA,
            5,
            List.of(
                DeviceBatch.Column.fixed(at(0, 40), null),
                DeviceBatch.Column.varWidth(at(64, 24), new DeviceBatch.Buffer(BASE - 4096, 8), null)),
            new long[] {0, 5});
    refused("column 1 (s string): data", () -> other.place(DeviceBatchTest::resolve));
  }

  /** A batch with no device bytes needs no driver: nothing to resolve. */
  @Test
  void noDeviceBytes() throws Exception {
    DeviceBatch b =
        DeviceBatch.of(
            SCHEMA, 0, List.of(new DeviceBatch.Column(null, null, null), DeviceBatch.Column.varWidth(null, null, null)),
            new long[] {0, 0, 0});
    assertEquals(0, b.firstSent());
    DeviceBatch.Placement p = b.place(a -> fail("resolved 0x" + Long.toHexString(a)));
    assertEquals(0, p.regionLength());
    assertEquals(2, p.columns().size());
  }

  /** Device batches carry flat columns: a nested one is refused, naming it. */
  @Test
  void nestedRefused() {
    ColumnarSchema nested = ColumnarSchema.of(ColumnarSchema.Field.of("a", "array<int>"));
    refused(
        "column 0 (a array<int>): device batches take flat columns only",
        () ->
            DeviceBatch.of(
                nested, 1, List.of(DeviceBatch.Column.varWidth(at(0, 8), at(64, 4), null)), new long[] {0, 1}));
  }

  @Test
  void validation() {
    refused("device buffer: length -1", () -> new DeviceBatch.Buffer(BASE, -1));
    refused("device buffer: address 0 for 8 bytes", () -> new DeviceBatch.Buffer(0, 8));
    refused("overflows", () -> new DeviceBatch.Buffer(-16, 32));
    refused(
        "device batch: 1 columns for a schema of 2",
        () -> DeviceBatch.of(SCHEMA, 0, List.of(new DeviceBatch.Column(null, null, null)), new long[] {0, 0}));
    refused(
        "device batch: partitionRows: last = 4, want rows = 5",
        () -> DeviceBatch.of(SCHEMA, 5, List.of(DeviceBatch.Column.fixed(at(0, 40), null),
            DeviceBatch.Column.varWidth(at(64, 24), at(128, 8), null)), new long[] {0, 4}));
    refused(
        "column 0 (k bigint): data: 39 bytes for 5 rows of int64, want >= 5 × 8",
        () -> DeviceBatch.of(SCHEMA, 5, List.of(DeviceBatch.Column.fixed(at(0, 39), null),
            DeviceBatch.Column.varWidth(at(64, 24), at(128, 8), null)), new long[] {0, 5}));
    refused(
        "column 0 (k bigint): validity: 1 bytes for 9 rows, want >= 2",
        () -> DeviceBatch.of(SCHEMA, 9, List.of(DeviceBatch.Column.fixed(at(0, 72), at(100, 1)),
            DeviceBatch.Column.varWidth(at(200, 40), at(300, 8), null)), new long[] {0, 9}));
    refused(
        "column 0 (k bigint): offsets",
        () -> DeviceBatch.of(SCHEMA, 5, List.of(new DeviceBatch.Column(null, at(0, 24), at(64, 40)),
            DeviceBatch.Column.varWidth(at(64, 24), at(128, 8), null)), new long[] {0, 5}));
    refused(
        "column 1 (s string): offsets: 20 bytes for 5 rows, want >= 4 × (rows+1)",
        () -> DeviceBatch.of(SCHEMA, 5, List.of(DeviceBatch.Column.fixed(at(0, 40), null),
            DeviceBatch.Column.varWidth(at(64, 20), at(128, 8), null)), new long[] {0, 5}));
  }
}
