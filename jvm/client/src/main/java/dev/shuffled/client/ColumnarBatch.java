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
 * (LSB first) set means row {@code i} is valid; null means no nulls. Offsets (string and binary
 * only): {@code rows+1} int32 offsets into data, the first 0, non-decreasing (null for 0 rows).
 * Data: {@code rows × width} bytes for fixed-width types (booleans one byte 0 or 1, decimals the
 * unscaled value, decimal128 low 8 bytes first), the bytes the offsets point into for string and
 * binary. Any buffer may hold more bytes than the rows need.
 *
 * <p>The batch is validated when it is made: every error names the column ({@code column 2 (price
 * decimal(12,2))}) and the buffer. It keeps read-only views of the caller's buffers, not copies:
 * the caller must not change their bytes until the batch is written. A batch whose buffers live in
 * a {@link ColumnarMemfd} travels to the daemon without a copy on the memfd plane.
 */
public final class ColumnarBatch {
  private final ColumnarSchema schema;
  private final long rows;
  private final List<Column> columns;
  private final long[] partitionRows;
  private final BatchMemory memory; // null: the caller's buffers, copied when written
  private final long[] memOffsets; // memory != null: where each column's 3 buffers start in it
  private final long[] used; // per column: the data bytes its rows use

  /**
   * The buffers of one column.
   *
   * @param validity null for no nulls
   * @param offsets string and binary: the int32 offsets; else null
   * @param data the values
   * @param children the child columns of a nested type, in its field's order; empty for flat
   *     types (the only kind this client writes yet)
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
      long[] memOffsets,
      long[] used) {
    this.memOffsets = memOffsets;
    this.used = used;
    this.schema = schema;
    this.rows = rows;
    this.columns = columns;
    this.partitionRows = partitionRows;
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
    Objects.requireNonNull(schema, "schema");
    Objects.requireNonNull(columns, "columns");
    Objects.requireNonNull(partitionRows, "partitionRows");
    List<Column> cols = List.copyOf(columns);
    if (rows < 0) {
      throw new IllegalArgumentException("batch: rows " + rows + ", want >= 0");
    }
    if (cols.size() != schema.size()) {
      throw new IllegalArgumentException(
          "batch: " + cols.size() + " columns for a schema of " + schema.size());
    }
    long[] pr = partitionRows.clone();
    String bad = partitionRowsError(pr, rows);
    if (bad != null) {
      throw new IllegalArgumentException("batch: partitionRows: " + bad);
    }
    long[] memOffsets = memory == null ? null : new long[3 * cols.size()];
    long[] used = new long[cols.size()];
    for (int i = 0; i < cols.size(); i++) {
      used[i] = check(i, schema.field(i), cols.get(i), rows, memory, memOffsets);
    }
    return new ColumnarBatch(schema, rows, cols, pr, memory, memOffsets, used);
  }

  static String partitionRowsError(long[] off, long rows) {
    if (off.length < 2) {
      return off.length + " offsets, want numPartitions+1 >= 2";
    }
    if (off[0] != 0) {
      return "[0] = " + off[0] + ", want 0";
    }
    for (int i = 1; i < off.length; i++) {
      if (off[i] < off[i - 1]) {
        return "[" + i + "] = " + off[i] + " below [" + (i - 1) + "] = " + off[i - 1];
      }
    }
    if (off[off.length - 1] != rows) {
      return "last = " + off[off.length - 1] + ", want rows = " + rows;
    }
    return null;
  }

  /** Checks column i and returns the data bytes its rows use. */
  private static long check(
      int i, ColumnarSchema.Field f, Column c, long rows, BatchMemory memory, long[] memOffsets) {
    String col = "column " + i + " (" + f + ")";
    if (!c.children().isEmpty()) {
      throw new IllegalArgumentException(
          col + ": children: " + c.children().size() + " for a flat type, want none");
    }
    if (c.data == null) {
      throw new IllegalArgumentException(col + ": data: null, want a buffer");
    }
    if (memory != null) {
      String[] names = {"validity", "offsets", "data"};
      ByteBuffer[] bufs = {c.validity, c.offsets, c.data};
      for (int k = 0; k < 3; k++) {
        if (bufs[k] == null) {
          continue;
        }
        memOffsets[3 * i + k] = memory.offsetOf(bufs[k]);
        if (memOffsets[3 * i + k] < 0) {
          throw new IllegalArgumentException(
              col + ": " + names[k] + ": not a view of the memfd the batch is made in");
        }
      }
    }
    long need = rows / 8 + (rows % 8 == 0 ? 0 : 1);
    if (c.validity != null && c.validity.remaining() < need) {
      throw new IllegalArgumentException(
          col + ": validity: " + c.validity.remaining() + " bytes for " + rows + " rows, want >= " + need);
    }
    ColumnType t = f.type();
    if (!t.varWidth()) {
      if (c.offsets != null) {
        throw new IllegalArgumentException(col + ": offsets: a buffer for fixed-width " + t.label() + ", want null");
      }
      if (rows > c.data.remaining() / t.width()) {
        throw new IllegalArgumentException(
            col + ": data: " + c.data.remaining() + " bytes for " + rows + " rows of " + t.label()
                + ", want >= " + rows + " × " + t.width());
      }
      return rows * t.width();
    }
    if (c.offsets == null) {
      if (rows == 0) {
        return 0;
      }
      throw new IllegalArgumentException(col + ": offsets: null for " + rows + " rows of " + t.label());
    }
    if (rows >= c.offsets.remaining() / 4) {
      throw new IllegalArgumentException(
          col + ": offsets: " + c.offsets.remaining() + " bytes for " + rows + " rows, want >= 4 × (rows+1)");
    }
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
    if (prev > c.data.remaining()) {
      throw new IllegalArgumentException(
          col + ": offsets: [" + rows + "] = " + prev + " past the data's " + c.data.remaining() + " bytes");
    }
    return prev;
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

  /** The number of partitions the batch is cut into: partitionRows().length - 1. */
  public int numPartitions() {
    return partitionRows.length - 1;
  }

  long[] partitionRowsRef() {
    return partitionRows;
  }

  BatchMemory memory() {
    return memory;
  }

  /** Where buffer {@code k} (0 validity, 1 offsets, 2 data) of column {@code i} starts in memory. */
  long memOffset(int i, int k) {
    return memOffsets[3 * i + k];
  }

  /** The data bytes column {@code i}'s rows use. */
  long usedData(int i) {
    return used[i];
  }
}
