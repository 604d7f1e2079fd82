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
   * The Batch frame (request 3, map output 7, the last batch, device 1) of placement {@code p}
   * with the 64-byte handle a0 a1 … df.
   */
  private static byte[] frame(DeviceBatch.Placement p, long rows, long[] partitionRows) {
    byte[] handle = new byte[64];
    for (int i = 0; i < 64; i++) {
      handle[i] = (byte) (0xa0 + i);
    }
    return Wire.frame(
        3,
        new Wire.ColumnarBatchMsg(7, Wire.PLANE_CUDA_IPC, Wire.BATCH_LAST, rows, p.columns(),
            partitionRows, p.regionOffset(), p.regionLength(), handle, 1),
        0);
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
    byte[] got = frame(p, 5, new long[] {0, 2, 5});
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

  private static final ColumnarSchema NESTED =
      ColumnarSchema.of(
          ColumnarSchema.Field.of("a", "array<int>"),
          ColumnarSchema.Field.of("m", "map<string,bigint>"),
          ColumnarSchema.Field.of("s", "struct<x:int,y:string>"));

  /**
   * A batch of 3 rows of an array, a map and a struct, its buffers from byte 8192 of the
   * allocation: every column below a list is sent whole, the others trimmed to their rows.
   */
  private static DeviceBatch nested() {
    return DeviceBatch.of(
        NESTED,
        3,
        List.of(
            DeviceBatch.Column.list(
                at(8256, 16), DeviceBatch.Column.fixed(at(8384, 20), at(8320, 64)), at(8192, 64)),
            DeviceBatch.Column.list(
                at(8448, 16),
                DeviceBatch.Column.struct(
                    null,
                    List.of(
                        DeviceBatch.Column.varWidth(at(8512, 24), at(8576, 10), null),
                        DeviceBatch.Column.fixed(at(8640, 48), at(8704, 1)))),
                null),
            DeviceBatch.Column.struct(
                at(8768, 64),
                List.of(
                    DeviceBatch.Column.fixed(at(8832, 16), null),
                    DeviceBatch.Column.varWidth(at(8896, 16), at(8960, 5), at(9024, 8))))),
        new long[] {0, 1, 3});
  }

  /**
   * Nested columns travel in pre-order, each with its child count, as the Go encoder writes the
   * same Batch: a list's child with the buffers as given (its row count is in device memory), a
   * struct's children trimmed to the struct's rows.
   */
  @Test
  void nestedGoldenFrame() throws Exception {
    DeviceBatch b = nested();
    DeviceBatch.Placement p = b.place(DeviceBatchTest::resolve);
    assertEquals(8192, p.regionOffset());
    assertEquals(833, p.regionLength());
    assertEquals(9, p.columns().size());
    assertEquals(64, b.sentLength(1, 0)); // a.element: validity whole
    assertEquals(20, b.sentLength(1, 2)); //   and data
    assertEquals(12, b.sentLength(7, 2)); // s.x: 3 rows of int32 of its 16 bytes
    assertEquals(1, b.sentLength(8, 0)); // s.y: validity of 3 rows
    byte[] got = frame(p, 3, new long[] {0, 1, 3});
    String want =
        "534804000000000003000000d50200000700000000000000020301000300000000000000090000000f000100"
            + "0000000000000000010061000000000000000001000000000000004000000000000000100000000000000000"
            + "0000000000000000000000000000000400000000000000000000000700656c656d656e748000000000000000"
            + "400000000000000000000000000000000000000000000000c000000000000000140000000000000011000100"
            + "000000000000000001006d000000000000000000000000000000000001000000000000100000000000000000"
            + "0000000000000000000000000000001000020000000000000000000700656e74726965730000000000000000"
            + "000000000000000000000000000000000000000000000000000000000000000000000000000000000b000000"
            + "000000000000000003006b657900000000000000000000000000000000400100000000000018000000000000"
            + "0080010000000000000a00000000000000050000000000000000000000050076616c75650002000000000000"
            + "010000000000000000000000000000000000000000000000c001000000000000300000000000000010000200"
            + "0000000000000000010073400200000000000001000000000000000000000000000000000000000000000000"
            + "0000000000000000000000000000000400000000000000000000000100780000000000000000000000000000"
            + "00000000000000000000000000000000000080020000000000000c000000000000000b000000000000000000"
            + "000001007940030000000000000100000000000000c002000000000000100000000000000000030000000000"
            + "00050000000000000003000000000000000000000001000000000000000300000000000000a0a1a2a3a4a5a6"
            + "a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2"
            + "d3d4d5d6d7d8d9dadbdcdddedf010000000000000000200000000000004103000000000000";
    assertEquals(want, HexFormat.of().formatHex(got));
  }

  /** Below a list, offsets are sent in whole int32s: the bytes past the last one are not. */
  @Test
  void belowListWholeOffsets() {
    DeviceBatch b =
        DeviceBatch.of(
            ColumnarSchema.of(ColumnarSchema.Field.of("a", "array<string>")),
            2,
            List.of(DeviceBatch.Column.list(at(0, 12), DeviceBatch.Column.varWidth(at(64, 27), at(128, 5), null), null)),
            new long[] {0, 2});
    assertEquals(12, b.sentLength(0, 1));
    assertEquals(24, b.sentLength(1, 1));
    assertEquals(5, b.sentLength(1, 2));
  }

  /** A nested batch of no rows has no device bytes: its children have none either. */
  @Test
  void nestedNoRows() throws Exception {
    DeviceBatch b =
        DeviceBatch.of(
            NESTED,
            0,
            List.of(
                DeviceBatch.Column.list(null, DeviceBatch.Column.fixed(at(0, 8), at(64, 1)), null),
                DeviceBatch.Column.list(
                    null,
                    DeviceBatch.Column.struct(
                        null,
                        List.of(
                            DeviceBatch.Column.varWidth(null, null, null),
                            DeviceBatch.Column.fixed(null, null))),
                    null),
                DeviceBatch.Column.struct(
                    null,
                    List.of(DeviceBatch.Column.fixed(null, null), DeviceBatch.Column.varWidth(null, null, null)))),
            new long[] {0, 0});
    assertEquals(0, b.firstSent());
    assertEquals(9, b.place(a -> fail("resolved 0x" + Long.toHexString(a))).columns().size());
  }

  /** Nested columns are checked level by level, each error naming the column and its field. */
  @Test
  void nestedValidation() {
    DeviceBatch.Column elem = DeviceBatch.Column.fixed(at(8384, 20), null);
    DeviceBatch.Column kv =
        DeviceBatch.Column.struct(
            null,
            List.of(
                DeviceBatch.Column.varWidth(at(8512, 24), at(8576, 10), null),
                DeviceBatch.Column.fixed(at(8640, 48), null)));
    DeviceBatch.Column struct =
        DeviceBatch.Column.struct(
            null, List.of(DeviceBatch.Column.fixed(at(8832, 12), null), DeviceBatch.Column.varWidth(at(8896, 16), at(8960, 5), null)));
    java.util.function.Function<List<DeviceBatch.Column>, Executable> make =
        cols -> () -> DeviceBatch.of(NESTED, 3, cols, new long[] {0, 3});
    refused(
        "column 0 (a array<int>): offsets: 12 bytes for 3 rows, want >= 4 × (rows+1)",
        make.apply(List.of(DeviceBatch.Column.list(at(0, 12), elem, null), DeviceBatch.Column.list(at(8448, 16), kv, null), struct)));
    refused(
        "column 0 (a array<int>): data: 0x7f1200000000+8 for list, want none",
        make.apply(List.of(new DeviceBatch.Column(null, at(0, 16), at(0, 8), List.of(elem)),
            DeviceBatch.Column.list(at(8448, 16), kv, null), struct)));
    refused(
        "column 0 (a array<int>): children: 0 columns for list, want 1",
        make.apply(List.of(DeviceBatch.Column.varWidth(at(0, 16), null, null),
            DeviceBatch.Column.list(at(8448, 16), kv, null), struct)));
    refused(
        "column 1 (m map<string,bigint>).entries: offsets: 0x7f1200000000+16 for struct, want none",
        make.apply(List.of(DeviceBatch.Column.list(at(0, 16), elem, null),
            DeviceBatch.Column.list(at(8448, 16), new DeviceBatch.Column(null, at(0, 16), null, kv.children()), null),
            struct)));
    refused(
        "column 1 (m map<string,bigint>).entries.value: offsets: 0x7f1200000000+8 for fixed-width int64, want none",
        make.apply(List.of(DeviceBatch.Column.list(at(0, 16), elem, null),
            DeviceBatch.Column.list(at(8448, 16), DeviceBatch.Column.struct(null, List.of(kv.children().get(0),
                new DeviceBatch.Column(null, at(0, 8), at(8640, 48)))), null),
            struct)));
    refused(
        "column 1 (m map<string,bigint>).entries.key: offsets: 2 bytes, want none or >= 4",
        make.apply(List.of(DeviceBatch.Column.list(at(0, 16), elem, null),
            DeviceBatch.Column.list(at(8448, 16), DeviceBatch.Column.struct(null, List.of(
                DeviceBatch.Column.varWidth(at(8512, 2), at(8576, 10), null), kv.children().get(1))), null),
            struct)));
    refused(
        "column 2 (s struct<x:int,y:string>).x: data: 8 bytes for 3 rows of int32, want >= 3 × 4",
        make.apply(List.of(DeviceBatch.Column.list(at(0, 16), elem, null), DeviceBatch.Column.list(at(8448, 16), kv, null),
            DeviceBatch.Column.struct(null, List.of(DeviceBatch.Column.fixed(at(8832, 8), null), struct.children().get(1))))));
    refused(
        "column 2 (s struct<x:int,y:string>).y: offsets: 12 bytes for 3 rows, want >= 4 × (rows+1)",
        make.apply(List.of(DeviceBatch.Column.list(at(0, 16), elem, null), DeviceBatch.Column.list(at(8448, 16), kv, null),
            DeviceBatch.Column.struct(null, List.of(struct.children().get(0),
                DeviceBatch.Column.varWidth(at(8896, 12), at(8960, 5), null))))));
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
