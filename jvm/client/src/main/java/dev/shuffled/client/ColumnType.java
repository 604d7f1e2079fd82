package dev.shuffled.client;

/**
 * The physical type of one column of a {@link ColumnarBatch}: how its buffers hold values, in the
 * Arrow/cuDF memory layout (docs/protocol.md, "Columnar layout"). A column's {@link
 * ColumnarSchema.Field} gives its Spark type, which decides this.
 */
public enum ColumnType {
  /** One byte per row, 0 or 1 (cuDF BOOL8); Spark {@code boolean}. */
  BOOL8(1, 1),
  /** Spark {@code tinyint}. */
  INT8(2, 1),
  /** Spark {@code smallint}. */
  INT16(3, 2),
  /** Spark {@code int}. */
  INT32(4, 4),
  /** Spark {@code bigint}. */
  INT64(5, 8),
  /** IEEE 754; Spark {@code float}. */
  FLOAT32(6, 4),
  /** IEEE 754; Spark {@code double}. */
  FLOAT64(7, 8),
  /** Days since 1970-01-01; Spark {@code date}. */
  DATE32(8, 4),
  /** Microseconds since the epoch, UTC; Spark {@code timestamp}, {@code timestamp_ntz}. */
  TIMESTAMP_US(9, 8),
  /** Unscaled, precision 10..18; Spark {@code decimal(p,s)}. */
  DECIMAL64(10, 8),
  /** i32 offsets into UTF-8 data; Spark {@code string}. */
  STRING(11, 0),
  /** i32 offsets into bytes; Spark {@code binary}. */
  BINARY(12, 0),
  /** Unscaled, precision 1..9; Spark {@code decimal(p,s)}. */
  DECIMAL32(13, 4),
  /** Unscaled, low 8 bytes first, precision 19..38; Spark {@code decimal(p,s)}. */
  DECIMAL128(14, 16),
  /**
   * i32 offsets into the rows of its one child column, no data; Spark {@code array<T>}.
   */
  LIST(15, 0),
  /** Validity only; one child column per field, each of the struct's rows; Spark {@code struct<..>}. */
  STRUCT(16, 0),
  /**
   * A list whose one child is a struct of two children, the keys then the values (as cuDF lays a
   * map out); Spark {@code map<K,V>}.
   */
  MAP(17, 0),
  /** Int32 months; Spark {@code interval year}, {@code interval year to month}, {@code interval month}. */
  INTERVAL_YM(18, 4),
  /** Int64 microseconds; Spark {@code interval day to second} and its other day-time forms. */
  INTERVAL_DT(19, 8),
  /** One byte per row, every row null (validity required, all bits 0); Spark {@code void}. */
  VOID(20, 1);

  final int wireId;
  private final int width;

  ColumnType(int wireId, int width) {
    this.wireId = wireId;
    this.width = width;
  }

  /**
   * Bytes per row in the data buffer; 0 for the variable-width {@link #STRING} and {@link #BINARY}
   * and the nested {@link #LIST}, {@link #STRUCT} and {@link #MAP}, which have no data buffer.
   */
  public int width() {
    return width;
  }

  /** Whether the column has an offsets buffer (string, binary). */
  public boolean varWidth() {
    return this == STRING || this == BINARY;
  }

  /** Whether the column has child columns (list, struct, map). */
  public boolean nested() {
    return this == LIST || this == STRUCT || this == MAP;
  }

  /** Whether the column has an offsets buffer: string, binary, list, map. */
  boolean hasOffsets() {
    return varWidth() || this == LIST || this == MAP;
  }

  /** Whether the column is a decimal, with a precision and scale. */
  public boolean decimal() {
    return this == DECIMAL32 || this == DECIMAL64 || this == DECIMAL128;
  }

  /** Its name in errors: lower case, as docs/protocol.md spells it. */
  String label() {
    return name().toLowerCase(java.util.Locale.ROOT);
  }
}
