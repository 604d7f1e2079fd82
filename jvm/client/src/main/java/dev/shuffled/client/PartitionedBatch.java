package dev.shuffled.client;

import java.util.List;
import java.util.Objects;

/**
 * What a host {@link ColumnarBatch} and a {@link DeviceBatch} share: the schema, the row count,
 * the partition row offsets, and the checks of their shape and of each column's buffer sizes,
 * worded alike for both.
 */
abstract class PartitionedBatch {
  private final ColumnarSchema schema;
  private final long rows;
  private final long[] partitionRows;

  /** {@code partitionRows}: checked by {@link #checkShape}, the batch's own copy. */
  PartitionedBatch(ColumnarSchema schema, long rows, long[] partitionRows) {
    this.schema = schema;
    this.rows = rows;
    this.partitionRows = partitionRows;
  }

  public ColumnarSchema schema() {
    return schema;
  }

  public long rows() {
    return rows;
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

  /**
   * Checks a batch's arguments, named {@code what} in errors ({@code batch}, {@code device batch}):
   * none null, rows not negative, one column per field of the schema, the partition row offsets.
   *
   * @return a copy of {@code partitionRows}
   */
  static long[] checkShape(
      String what, ColumnarSchema schema, long rows, List<?> columns, long[] partitionRows) {
    Objects.requireNonNull(schema, "schema");
    Objects.requireNonNull(columns, "columns");
    Objects.requireNonNull(partitionRows, "partitionRows");
    if (rows < 0) {
      throw new IllegalArgumentException(what + ": rows " + rows + ", want >= 0");
    }
    if (columns.size() != schema.size()) {
      throw new IllegalArgumentException(
          what + ": " + columns.size() + " columns for a schema of " + schema.size());
    }
    long[] pr = partitionRows.clone();
    String bad = Check.offsets(pr, rows, "rows =");
    if (bad != null) {
      throw new IllegalArgumentException(what + ": partitionRows: " + bad);
    }
    return pr;
  }

  /**
   * Throws naming column {@code col} unless a validity of {@code length} bytes covers {@code rows}
   * rows. In this and the checks below, {@code col} names the column by its {@code toString()},
   * made on error only.
   */
  static void checkValidity(Object col, long length, long rows) {
    long need = rows / 8 + (rows % 8 == 0 ? 0 : 1);
    if (length < need) {
      throw new IllegalArgumentException(
          col + ": validity: " + length + " bytes for " + rows + " rows, want >= " + need);
    }
  }

  /** Throws naming column {@code col} unless {@code length} data bytes hold {@code rows} values of fixed-width {@code t}. */
  static void checkFixedData(Object col, ColumnType t, long length, long rows) {
    if (rows > length / t.width()) {
      throw new IllegalArgumentException(
          col + ": data: " + length + " bytes for " + rows + " rows of " + t.label() + ", want >= "
              + rows + " × " + t.width());
    }
  }

  /** Throws naming column {@code col} unless {@code length} offset bytes hold rows+1 int32 offsets. */
  static void checkOffsetsLength(Object col, long length, long rows) {
    if (rows >= length / 4) {
      throw new IllegalArgumentException(
          col + ": offsets: " + length + " bytes for " + rows + " rows, want >= 4 × (rows+1)");
    }
  }
}
