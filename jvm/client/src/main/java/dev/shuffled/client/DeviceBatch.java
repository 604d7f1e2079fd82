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
 * <p>Nested columns (array, struct, map) carry their children ({@link Column#children}) as {@link
 * ColumnarBatch.Column} does: a struct's children have the struct's rows, a list's (or map's) child
 * the rows its offsets point to, and they travel after their parent in pre-order, with their own
 * validity, offsets and data, the way cuDF lays out a nested column's child views.
 *
 * <p>The batch is validated when it is made, without touching the device: every error names the
 * column (a child after its parent: {@code column 0 (m map<string,int>).entries.key}) and the
 * buffer. Whether offsets are monotonic and inside the data (or a list's child) is checked by the
 * daemon against the bytes; so are the buffer sizes of the columns below a list, whose row count
 * is its last offset, in device memory: their buffers are sent whole.
 */
public final class DeviceBatch extends PartitionedBatch {
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
   * The device buffers of one column; absent ({@code null} or {@link Buffer#NONE}): no nulls
   * (validity), a fixed-width type or a struct (offsets), a list, struct or map (data).
   *
   * @param children the child columns of a nested type, in its field's order (list and map: one,
   *     struct: one per field), as {@link ColumnarBatch.Column} has them; empty for flat types
   */
  public record Column(Buffer validity, Buffer offsets, Buffer data, List<Column> children) {
    public Column {
      validity = Buffer.orNone(validity);
      offsets = Buffer.orNone(offsets);
      data = Buffer.orNone(data);
      children = List.copyOf(children);
    }

    /** A flat column's buffers. */
    public Column(Buffer validity, Buffer offsets, Buffer data) {
      this(validity, offsets, data, List.of());
    }

    /** A fixed-width column: its data, and its validity (null for no nulls). */
    public static Column fixed(Buffer data, Buffer validity) {
      return new Column(validity, null, data);
    }

    /** A string or binary column: int32 offsets, data, and validity (null for no nulls). */
    public static Column varWidth(Buffer offsets, Buffer data, Buffer validity) {
      return new Column(validity, offsets, data);
    }

    /**
     * A list (array) or map column: int32 offsets into the rows of {@code child} (a map's: the
     * struct of keys and values), and validity (null for no nulls); cuDF's {@code getOffsets()}
     * and {@code getValid()} of the list column, its child {@code getChildColumnView(0)}.
     */
    public static Column list(Buffer offsets, Column child, Buffer validity) {
      return new Column(validity, offsets, null, List.of(Objects.requireNonNull(child, "child")));
    }

    /** A struct column: one child per field, and validity (null for no nulls). */
    public static Column struct(Buffer validity, List<Column> children) {
      return new Column(validity, null, null, children);
    }
  }

  /**
   * One column as the wire has it: the columns and their children in pre-order.
   *
   * @param rows its row count: a top-level column's is the batch's, a struct's children's the
   *     struct's; -1 below a list with rows, whose offsets (in device memory) give it: the daemon
   *     checks them against the bytes, and every buffer of such a column is sent whole
   * @param parent the column it is a child of; null for a top-level column
   * @param index a top-level column's index in the schema
   */
  record Flat(ColumnarSchema.Field field, Column column, long rows, Flat parent, int index) {
    /** How errors name it: {@code column 0 (m map<string,int>).entries.key}. */
    String name() {
      return parent == null ? "column " + index + " (" + field + ")" : parent.name() + "." + field.name();
    }

    /** Its {@link #name}: the checks of {@link PartitionedBatch} make it on error only. */
    @Override
    public String toString() {
      return name();
    }
  }

  private final List<Column> columns;
  private final List<Flat> flat;

  private DeviceBatch(
      ColumnarSchema schema, long rows, List<Column> columns, long[] partitionRows, List<Flat> flat) {
    super(schema, rows, partitionRows);
    this.columns = columns;
    this.flat = flat;
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
    long[] pr = checkShape("device batch", schema, rows, columns, partitionRows);
    List<Column> cols = List.copyOf(columns);
    List<Flat> flat = new ArrayList<>(cols.size());
    for (int i = 0; i < cols.size(); i++) {
      check(new Flat(schema.field(i), cols.get(i), rows, null, i), flat);
    }
    return new DeviceBatch(schema, rows, cols, pr, List.copyOf(flat));
  }

  /**
   * Checks column {@code fc} of {@code fc.rows()} rows (-1: unknown, below a list) and its
   * children, naming it as {@link Flat#name} does (a child: its parent's name, then {@code .} and
   * its own; made on error only: this runs for every batch), and appends them to {@code flat} in
   * pre-order.
   */
  private static void check(Flat fc, List<Flat> flat) {
    ColumnarSchema.Field f = fc.field();
    Column c = fc.column();
    long rows = fc.rows();
    ColumnType t = f.type();
    if (c.children().size() != f.children().size()) {
      throw new IllegalArgumentException(
          fc.name() + ": children: " + c.children().size() + " columns for " + t.label() + ", want "
              + f.children().size());
    }
    if (t.nested() && c.data().length() != 0) {
      throw new IllegalArgumentException(fc.name() + ": data: " + c.data() + " for " + t.label() + ", want none");
    }
    if (!t.hasOffsets() && c.offsets().length() != 0) {
      throw new IllegalArgumentException(
          fc.name() + ": offsets: " + c.offsets() + " for " + (t.nested() ? "" : "fixed-width ") + t.label()
              + ", want none");
    }
    flat.add(fc);
    if (rows >= 0) {
      if (c.validity().length() != 0) {
        checkValidity(fc, c.validity().length(), rows);
      }
      if (!t.nested() && !t.varWidth()) {
        checkFixedData(fc, t, c.data().length(), rows);
      }
      if (t.hasOffsets() && rows > 0) {
        checkOffsetsLength(fc, c.offsets().length(), rows);
      }
    } else if (t.hasOffsets() && c.offsets().length() != 0 && c.offsets().length() < 4) {
      throw new IllegalArgumentException(
          fc.name() + ": offsets: " + c.offsets().length() + " bytes, want none or >= 4 (rows+1 int32)");
    }
    if (t == ColumnType.STRUCT) {
      for (int k = 0; k < f.children().size(); k++) { // each of the struct's rows
        check(new Flat(f.children().get(k), c.children().get(k), rows, fc, 0), flat);
      }
    } else if (t == ColumnType.LIST || t == ColumnType.MAP) {
      // The child's rows are offsets[rows], in device memory; none when the list has no rows.
      check(new Flat(f.children().get(0), c.children().get(0), rows == 0 ? 0 : -1, fc, 0), flat);
    }
  }

  /** The columns, one per schema field. */
  public List<Column> columns() {
    return columns;
  }

  /** The columns and their children as the wire has them, in pre-order. */
  List<Flat> flat() {
    return flat;
  }

  /**
   * The bytes of buffer {@code k} (0 validity, 1 offsets, 2 data) of column {@code i} (in
   * pre-order, children after their parent) sent: what its rows use, or the whole buffer where
   * they are not known here (below a list: offsets in whole int32s) and for the data of string
   * and binary.
   */
  long sentLength(int i, int k) {
    Flat fc = flat.get(i);
    Buffer b = buffer(fc.column(), k);
    long n = fc.rows();
    if (b.length() == 0 || n == 0) {
      return 0;
    }
    if (n < 0) {
      return k == 1 ? b.length() & -4L : b.length(); // offsets: whole int32s
    }
    ColumnType t = fc.field().type();
    return switch (k) {
      case 0 -> n / 8 + (n % 8 == 0 ? 0 : 1);
      case 1 -> 4 * (n + 1);
      default -> t.varWidth() ? b.length() : n * t.width();
    };
  }

  /** The address of the first buffer sent, or 0 when none is (the batch has no device bytes). */
  long firstSent() {
    for (int i = 0; i < flat.size(); i++) {
      for (int k = 0; k < 3; k++) {
        if (sentLength(i, k) != 0) {
          return buffer(flat.get(i).column(), k).address();
        }
      }
    }
    return 0;
  }

  private static Buffer buffer(Column c, int k) {
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
    int firstAt = -1; // 3 × column + buffer of the first buffer sent; names are made on error only
    for (int i = 0; i < flat.size(); i++) {
      Column c = flat.get(i).column();
      for (int k = 0; k < 3; k++) {
        long len = sentLength(i, k);
        if (len == 0) {
          continue;
        }
        long addr = buffer(c, k).address();
        if (firstAt < 0) {
          CudaDriver.AddressRange r = resolver.range(addr);
          base = r.base();
          end = base + r.size();
          first = addr;
          firstAt = 3 * i + k;
        }
        if (Long.compareUnsigned(addr, base) < 0 || Long.compareUnsigned(addr + len, end) > 0) {
          throw new IllegalArgumentException(
              what(i, k) + ": bytes outside the device allocation 0x" + Long.toHexString(base) + "+"
                  + (end - base) + " that holds " + what(firstAt / 3, firstAt % 3)
                  + "; a device batch's buffers must lie in one allocation (a contiguous split)");
        }
        lo = Math.min(lo, addr - base);
        hi = Math.max(hi, addr - base + len);
      }
    }
    List<Wire.Col> cols = new ArrayList<>(flat.size());
    for (int i = 0; i < flat.size(); i++) {
      Flat fc = flat.get(i);
      Wire.Buf[] w = new Wire.Buf[3];
      for (int k = 0; k < 3; k++) {
        long len = sentLength(i, k);
        w[k] = len == 0 ? Wire.Buf.NONE : new Wire.Buf(buffer(fc.column(), k).address() - base - lo, len);
      }
      ColumnarSchema.Field f = fc.field();
      cols.add(new Wire.Col(
          f.type().wireId, f.children().size(), f.precision(), f.scale(), f.name(), w[0], w[1], w[2]));
    }
    if (firstAt < 0) {
      return new Placement(0, 0, 0, cols, 0);
    }
    return new Placement(base, lo, hi - lo, cols, first);
  }

  /** Buffer {@code k} of column {@code i} (pre-order) as errors name it. */
  private String what(int i, int k) {
    Flat fc = flat.get(i);
    return fc.name() + ": " + BUFFERS[k] + " (" + buffer(fc.column(), k) + ")";
  }
}
