package dev.shuffled.client;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Objects;

/**
 * One partitioned batch of a columnar map output, in the Arrow/cuDF memory layout: a row count,
 * per column of its {@link ColumnarSchema} a validity, offsets and data buffer, and the partition
 * row offsets: partition {@code p} holds rows {@code [partitionRows[p], partitionRows[p+1])}, the
 * rows already grouped by partition. {@link MapOutput#write(ColumnarBatch)} writes it.
 *
 * <p>Buffers are {@link ByteBuffer}s: each is the bytes from its position to its limit, numbers in
 * little-endian order whatever the buffer's {@link ByteBuffer#order()}. Validity: bit {@code i}
 * (LSB first) set means row {@code i} is valid; null means no nulls (void: required when there
 * are rows, every bit 0). Offsets (string, binary, list and map only): {@code rows+1} int32
 * offsets into data, or a list's child rows, the first 0, non-decreasing (null for 0 rows). Data:
 * {@code rows × width} bytes for fixed-width types (booleans one byte 0 or 1, decimals the unscaled
 * value, decimal128 low 8 bytes first, year-month intervals int32 months, day-time intervals int64
 * microseconds, void one ignored byte a row), the bytes the offsets point into for string and
 * binary, null for list, struct and map. Any buffer may hold more bytes than the rows need.
 *
 * <p>Nested columns carry their children ({@link Column#children}), in the order of their field's
 * children, each a column of its own row count: a struct's children have the struct's rows (a row
 * of a struct is null where the struct's validity says so, whatever its children hold), a list's
 * child has {@code offsets[rows]} rows, row {@code i} of the list being the child's rows {@code
 * [offsets[i], offsets[i+1])}; a map is a list whose child is a struct of the keys and values.
 *
 * <p>The batch is validated when it is made: every error names the column ({@code column 2 (price
 * decimal(12,2))}, a child after its parent: {@code column 0 (m map<string,int>).entries.key}) and
 * the buffer. It keeps read-only views of the caller's buffers, not copies:
 * the caller must not change their bytes until the batch is written. A batch whose buffers live in
 * a {@link ColumnarMemfd} travels to the daemon without a copy on the memfd plane.
 */
public final class ColumnarBatch extends PartitionedBatch {
  private final List<Column> columns;
  private final BatchMemory memory; // null: the caller's buffers, copied when written
  private final List<Flat> flat; // the columns and their children, in pre-order

  /**
   * One column as the wire has it: the columns and their children in pre-order.
   *
   * @param rows its own row count: a top-level column's is the batch's, a struct's children's the
   *     struct's, a list's child's its last offset
   * @param used the data bytes its rows use
   * @param memOffsets memory != null: where its validity, offsets and data start in it
   */
  record Flat(ColumnarSchema.Field field, Column column, long rows, long used, long[] memOffsets) {}

  /**
   * The buffers of one column.
   *
   * @param validity null for no nulls
   * @param offsets string, binary, list and map: the int32 offsets; else null
   * @param data the values; null for list, struct and map
   * @param children the child columns of a nested type, in its field's order (list and map: one,
   *     struct: one per field); empty for flat types
   */
  public record Column(ByteBuffer validity, ByteBuffer offsets, ByteBuffer data, List<Column> children) {
    public Column {
      validity = view(validity);
      offsets = view(offsets);
      data = view(data);
      children = List.copyOf(children);
    }

    /** A flat column's buffers. */
    public static Column of(ByteBuffer validity, ByteBuffer offsets, ByteBuffer data) {
      return new Column(validity, offsets, data, List.of());
    }

    /** A fixed-width column with these data bytes and validity (null for no nulls). */
    public static Column fixed(ByteBuffer data, ByteBuffer validity) {
      return of(validity, null, data);
    }

    /** A string or binary column with these offsets, data and validity (null for no nulls). */
    public static Column varWidth(ByteBuffer offsets, ByteBuffer data, ByteBuffer validity) {
      return of(validity, offsets, data);
    }

    /**
     * A list (array) or map column: these offsets into the rows of {@code child} (a map's: the
     * struct of keys and values) and validity (null for no nulls).
     */
    public static Column list(ByteBuffer offsets, Column child, ByteBuffer validity) {
      return new Column(validity, offsets, null, List.of(Objects.requireNonNull(child, "child")));
    }

    /** A struct column: one child per field, and validity (null for no nulls). */
    public static Column struct(ByteBuffer validity, List<Column> children) {
      return new Column(validity, null, null, children);
    }

    /** {@link #validity}: a read-only view of it, or null. */
    @Override
    public ByteBuffer validity() {
      return view(validity);
    }

    @Override
    public ByteBuffer offsets() {
      return view(offsets);
    }

    @Override
    public ByteBuffer data() {
      return view(data);
    }

    private static ByteBuffer view(ByteBuffer b) {
      return b == null ? null : b.slice().asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
    }
  }

  private ColumnarBatch(
      ColumnarSchema schema,
      long rows,
      List<Column> columns,
      long[] partitionRows,
      BatchMemory memory,
      List<Flat> flat) {
    super(schema, rows, partitionRows);
    this.flat = flat;
    this.columns = columns;
    this.memory = memory;
  }

  /**
   * A batch of {@code rows} rows of these columns, one per field of {@code schema}.
   *
   * @param partitionRows numPartitions+1 row offsets: the first 0, non-decreasing, the last {@code
   *     rows}
   * @throws IllegalArgumentException naming the column and buffer, or the offset, that is wrong
   */
  public static ColumnarBatch of(
      ColumnarSchema schema, long rows, List<Column> columns, long[] partitionRows) {
    return make(schema, rows, columns, partitionRows, null);
  }

  static ColumnarBatch make(
      ColumnarSchema schema, long rows, List<Column> columns, long[] partitionRows, BatchMemory memory) {
    long[] pr = checkShape("batch", schema, rows, columns, partitionRows);
    List<Column> cols = List.copyOf(columns);
    List<Flat> flat = new java.util.ArrayList<>(cols.size());
    for (int i = 0; i < cols.size(); i++) {
      ColumnarSchema.Field f = schema.field(i);
      check("column " + i + " (" + f + ")", f, cols.get(i), rows, memory, flat);
    }
    return new ColumnarBatch(schema, rows, cols, pr, memory, List.copyOf(flat));
  }

  /**
   * Checks a column of {@code rows} rows and its children, named {@code col} in errors (a child:
   * its parent's name, then {@code .} and its own), and appends them to {@code flat} in pre-order.
   */
  private static void check(
      String col, ColumnarSchema.Field f, Column c, long rows, BatchMemory memory, List<Flat> flat) {
    ColumnType t = f.type();
    if (c.children().size() != f.children().size()) {
      throw new IllegalArgumentException(
          col + ": children: " + c.children().size() + " columns for " + t.label() + ", want "
              + f.children().size());
    }
    long[] memOffsets = memory == null ? null : new long[3];
    if (memory != null) {
      String[] names = {"validity", "offsets", "data"};
      ByteBuffer[] bufs = {c.validity, c.offsets, c.data};
      for (int k = 0; k < 3; k++) {
        if (bufs[k] == null) {
          continue;
        }
        memOffsets[k] = memory.offsetOf(bufs[k]);
        if (memOffsets[k] < 0) {
          throw new IllegalArgumentException(
              col + ": " + names[k] + ": not a view of the memfd the batch is made in");
        }
      }
    }
    if (c.validity != null) {
      checkValidity(col, c.validity.remaining(), rows);
    }
    if (t == ColumnType.VOID && rows > 0) {
      if (c.validity == null) {
        throw new IllegalArgumentException(
            col + ": validity: null for " + rows + " rows of void, want every bit 0");
      }
      for (long r = 0; r < rows; r++) {
        if ((c.validity.get((int) (r >>> 3)) >>> (r & 7) & 1) != 0) {
          throw new IllegalArgumentException(
              col + ": validity: bit " + r + " set, want every row of void null");
        }
      }
    }
    if (t.nested()) {
      if (c.data != null) {
        throw new IllegalArgumentException(col + ": data: a buffer for " + t.label() + ", want null");
      }
    } else if (c.data == null) {
      throw new IllegalArgumentException(col + ": data: null, want a buffer");
    }
    if (!t.hasOffsets()) {
      if (c.offsets != null) {
        throw new IllegalArgumentException(
            col + ": offsets: a buffer for " + (t.nested() ? "" : "fixed-width ") + t.label() + ", want null");
      }
      long used = 0;
      if (!t.nested()) {
        checkFixedData(col, t, c.data.remaining(), rows);
        used = rows * t.width();
      }
      flat.add(new Flat(f, c, rows, used, memOffsets));
      for (int k = 0; k < f.children().size(); k++) { // a struct's: each of its rows
        ColumnarSchema.Field cf = f.children().get(k);
        check(col + "." + cf.name(), cf, c.children().get(k), rows, memory, flat);
      }
      return;
    }
    long last = 0;
    if (c.offsets == null) {
      if (rows != 0) {
        throw new IllegalArgumentException(col + ": offsets: null for " + rows + " rows of " + t.label());
      }
    } else {
      checkOffsetsLength(col, c.offsets.remaining(), rows);
      ByteBuffer o = c.offsets; // little-endian, position 0
      int prev = o.getInt(0);
      if (prev != 0) {
        throw new IllegalArgumentException(col + ": offsets: [0] = " + prev + ", want 0");
      }
      for (int r = 1; r <= rows; r++) {
        int v = o.getInt(4 * r);
        if (v < prev) {
          throw new IllegalArgumentException(
              col + ": offsets: [" + r + "] = " + v + " below [" + (r - 1) + "] = " + prev);
        }
        prev = v;
      }
      last = prev;
    }
    if (t.varWidth()) {
      if (last > c.data.remaining()) {
        throw new IllegalArgumentException(
            col + ": offsets: [" + rows + "] = " + last + " past the data's " + c.data.remaining() + " bytes");
      }
      flat.add(new Flat(f, c, rows, last, memOffsets));
      return;
    }
    flat.add(new Flat(f, c, rows, 0, memOffsets)); // list, map: the child has offsets[rows] rows
    ColumnarSchema.Field cf = f.children().get(0);
    check(col + "." + cf.name(), cf, c.children().get(0), last, memory, flat);
  }

  /** The columns, one per schema field. */
  public List<Column> columns() {
    return columns;
  }

  BatchMemory memory() {
    return memory;
  }

  /** The columns and their children as the wire has them, in pre-order. */
  List<Flat> flat() {
    return flat;
  }
}
