package dev.shuffled.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * One partitioned columnar batch whose buffers are in GPU memory (JDK 22+, a daemon built with
 * CUDA): per column of its {@link ColumnarSchema} a validity, offsets and data buffer given as
 * device address and length (what cuDF's {@code BaseDeviceMemoryBuffer.getAddress()} and {@code
 * getLength()} give), in the Arrow/cuDF layout that {@link ColumnarBatch} describes, and the
 * partition row offsets. {@link MapOutput#write(DeviceBatch)} hands it to the daemon on the CUDA
 * IPC data plane (docs/protocol.md): the daemon copies the bytes out of the caller's device memory.
 *
 * <p>Every buffer of a batch must lie in one device allocation, as the buffers of a cuDF {@code
 * ContiguousTable} (the result of a contiguous split) do: the batch travels as that allocation's
 * IPC handle plus the offsets of its buffers. A sub-allocation of an RMM pool is fine: the driver
 * names the pool's enclosing allocation, and the batch is the byte range of it that its buffers
 * span. docs/gpu-executors.md maps a cuDF table onto this.
 *
 * <p>The batch is validated when it is made, without touching the device: every error names the
 * column and the buffer. Whether string offsets are monotonic and inside the data is checked by
 * the daemon against the bytes.
 */
public final class DeviceBatch {
  /** A device buffer: {@code length} bytes from {@code address}; length 0 means absent. */
  public record Buffer(long address, long length) {
    /** The absent buffer. */
    public static final Buffer NONE = new Buffer(0, 0);

    public Buffer {
      if (length < 0) {
        throw new IllegalArgumentException("device buffer: length " + length + ", want >= 0");
      }
      if (length > 0 && address == 0) {
        throw new IllegalArgumentException("device buffer: address 0 for " + length + " bytes");
      }
      if (length > 0 && Long.compareUnsigned(address, -1L - length) > 0) {
        throw new IllegalArgumentException(
            "device buffer: 0x" + Long.toHexString(address) + " + " + length + " bytes overflows");
      }
    }

    /** Null as {@link #NONE}. */
    static Buffer orNone(Buffer b) {
      return b == null ? NONE : b;
    }

    @Override
    public String toString() {
      return length == 0 ? "none" : "0x" + Long.toHexString(address) + "+" + length;
    }
  }

  /**
   * The device buffers of one flat column; absent ({@code null} or {@link Buffer#NONE}): no nulls
   * (validity), a fixed-width type (offsets).
   */
  public record Column(Buffer validity, Buffer offsets, Buffer data) {
    public Column {
      validity = Buffer.orNone(validity);
      offsets = Buffer.orNone(offsets);
      data = Buffer.orNone(data);
    }

    /** A fixed-width column: its data, and its validity (null for no nulls). */
    public static Column fixed(Buffer data, Buffer validity) {
      return new Column(validity, null, data);
    }

    /** A string or binary column: int32 offsets, data, and validity (null for no nulls). */
    public static Column varWidth(Buffer offsets, Buffer data, Buffer validity) {
      return new Column(validity, offsets, data);
    }
  }

  private final ColumnarSchema schema;
  private final long rows;
  private final List<Column> columns;
  private final long[] partitionRows;

  private DeviceBatch(ColumnarSchema schema, long rows, List<Column> columns, long[] partitionRows) {
    this.schema = schema;
    this.rows = rows;
    this.columns = columns;
    this.partitionRows = partitionRows;
  }

  /**
   * A batch of {@code rows} rows of these columns, one per field of {@code schema}.
   *
   * @param partitionRows numPartitions+1 row offsets: the first 0, non-decreasing, the last {@code
   *     rows}
   * @throws IllegalArgumentException naming the column and buffer, or the offset, that is wrong
   */
  public static DeviceBatch of(
      ColumnarSchema schema, long rows, List<Column> columns, long[] partitionRows) {
    Objects.requireNonNull(schema, "schema");
    Objects.requireNonNull(columns, "columns");
    Objects.requireNonNull(partitionRows, "partitionRows");
    List<Column> cols = List.copyOf(columns);
    if (rows < 0) {
      throw new IllegalArgumentException("device batch: rows " + rows + ", want >= 0");
    }
    if (cols.size() != schema.size()) {
      throw new IllegalArgumentException(
          "device batch: " + cols.size() + " columns for a schema of " + schema.size());
    }
    long[] pr = partitionRows.clone();
    String bad = ColumnarBatch.partitionRowsError(pr, rows);
    if (bad != null) {
      throw new IllegalArgumentException("device batch: partitionRows: " + bad);
    }
    for (int i = 0; i < cols.size(); i++) {
      check(i, schema.field(i), cols.get(i), rows);
    }
    return new DeviceBatch(schema, rows, cols, pr);
  }

  private static String name(int i, ColumnarSchema.Field f) {
    return "column " + i + " (" + f + ")";
  }

  private static void check(int i, ColumnarSchema.Field f, Column c, long rows) {
    String col = name(i, f);
    if (!f.children().isEmpty() || f.type().nested()) {
      throw new IllegalArgumentException(
          col + ": device batches take flat columns only; write nested columns from host buffers"
              + " (ColumnarBatch)");
    }
    long need = rows / 8 + (rows % 8 == 0 ? 0 : 1);
    if (c.validity().length() != 0 && c.validity().length() < need) {
      throw new IllegalArgumentException(
          col + ": validity: " + c.validity().length() + " bytes for " + rows + " rows, want >= " + need);
    }
    ColumnType t = f.type();
    if (!t.varWidth()) {
      if (c.offsets().length() != 0) {
        throw new IllegalArgumentException(
            col + ": offsets: " + c.offsets() + " for fixed-width " + t.label() + ", want none");
      }
      if (rows > c.data().length() / t.width()) {
        throw new IllegalArgumentException(
            col + ": data: " + c.data().length() + " bytes for " + rows + " rows of " + t.label()
                + ", want >= " + rows + " × " + t.width());
      }
      return;
    }
    if (rows > 0 && c.offsets().length() / 4 <= rows) {
      throw new IllegalArgumentException(
          col + ": offsets: " + c.offsets().length() + " bytes for " + rows
              + " rows, want >= 4 × (rows+1)");
    }
  }

  public ColumnarSchema schema() {
    return schema;
  }

  public long rows() {
    return rows;
  }

  /** The columns, one per schema field. */
  public List<Column> columns() {
    return columns;
  }

  /** The partition row offsets (a copy). */
  public long[] partitionRows() {
    return partitionRows.clone();
  }

  /** The number of partitions: partitionRows().length - 1. */
  public int numPartitions() {
    return partitionRows.length - 1;
  }

  long[] partitionRowsRef() {
    return partitionRows;
  }

  /** The bytes of buffer {@code k} (0 validity, 1 offsets, 2 data) of column {@code i} sent. */
  long sentLength(int i, int k) {
    Column c = columns.get(i);
    ColumnType t = schema.field(i).type();
    return switch (k) {
      case 0 -> c.validity().length() == 0 ? 0 : rows / 8 + (rows % 8 == 0 ? 0 : 1);
      case 1 -> c.offsets().length() == 0 || rows == 0 ? 0 : 4 * (rows + 1);
      default -> t.varWidth() ? (rows == 0 ? 0 : c.data().length()) : rows * t.width();
    };
  }

  /** The address of the first buffer sent, or 0 when none is (the batch has no device bytes). */
  long firstSent() {
    for (int i = 0; i < columns.size(); i++) {
      for (int k = 0; k < 3; k++) {
        if (sentLength(i, k) != 0) {
          return buffer(i, k).address();
        }
      }
    }
    return 0;
  }

  private Buffer buffer(int i, int k) {
    Column c = columns.get(i);
    return k == 0 ? c.validity() : k == 1 ? c.offsets() : c.data();
  }

  /** Finds the device allocation that encloses an address (cuMemGetAddressRange). */
  interface Resolver {
    CudaDriver.AddressRange range(long address) throws CudaException;
  }

  /**
   * Where the batch lies: the allocation at {@code base}, bytes [regionOffset,
   * regionOffset+regionLength) of it, and each column's buffers relative to the region. {@code
   * first} is the address of a buffer sent (0 when none is: the batch needs no device memory).
   */
  record Placement(long base, long regionOffset, long regionLength, List<Wire.Col> columns, long first) {}

  private static final String[] BUFFERS = {"validity", "offsets", "data"};

  /**
   * The batch's placement in device memory.
   *
   * @throws IllegalArgumentException a buffer outside the allocation that encloses the first
   *     buffer, naming both
   */
  Placement place(Resolver resolver) throws CudaException {
    long base = 0, end = 0, lo = Long.MAX_VALUE, hi = 0, first = 0;
    String firstName = null;
    for (int i = 0; i < columns.size(); i++) {
      for (int k = 0; k < 3; k++) {
        long len = sentLength(i, k);
        if (len == 0) {
          continue;
        }
        long addr = buffer(i, k).address();
        String what = name(i, schema.field(i)) + ": " + BUFFERS[k] + " (" + buffer(i, k) + ")";
        if (firstName == null) {
          CudaDriver.AddressRange r = resolver.range(addr);
          base = r.base();
          end = base + r.size();
          first = addr;
          firstName = what;
        }
        if (Long.compareUnsigned(addr, base) < 0 || Long.compareUnsigned(addr + len, end) > 0) {
          throw new IllegalArgumentException(
              what + ": bytes outside the device allocation 0x" + Long.toHexString(base) + "+"
                  + (end - base) + " that holds " + firstName
                  + "; a device batch's buffers must lie in one allocation (a contiguous split)");
        }
        lo = Math.min(lo, addr - base);
        hi = Math.max(hi, addr - base + len);
      }
    }
    List<Wire.Col> cols = new ArrayList<>(columns.size());
    for (int i = 0; i < columns.size(); i++) {
      Wire.Buf[] w = new Wire.Buf[3];
      for (int k = 0; k < 3; k++) {
        long len = sentLength(i, k);
        w[k] = len == 0 ? Wire.Buf.NONE : new Wire.Buf(buffer(i, k).address() - base - lo, len);
      }
      ColumnarSchema.Field f = schema.field(i);
      cols.add(new Wire.Col(f.type().wireId, 0, f.precision(), f.scale(), f.name(), w[0], w[1], w[2]));
    }
    if (firstName == null) {
      return new Placement(0, 0, 0, cols, 0);
    }
    return new Placement(base, lo, hi - lo, cols, first);
  }
}
