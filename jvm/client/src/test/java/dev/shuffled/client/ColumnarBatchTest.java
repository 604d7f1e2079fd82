package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** The schema's Spark types and a batch's validation, which names the column and the buffer. */
class ColumnarBatchTest {
  private static ByteBuffer le(int n) {
    return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
  }

  private static void refused(String want, Executable e) {
    IllegalArgumentException x = assertThrows(IllegalArgumentException.class, e);
    assertTrue(x.getMessage().contains(want), "want \"" + want + "\" in: " + x.getMessage());
  }

  @Test
  void sparkTypes() {
    record T(String spark, ColumnType type, int p, int s) {}
    for (T t :
        List.of(
            new T("boolean", ColumnType.BOOL8, 0, 0),
            new T(" TinyInt ", ColumnType.INT8, 0, 0),
            new T("byte", ColumnType.INT8, 0, 0),
            new T("short", ColumnType.INT16, 0, 0),
            new T("integer", ColumnType.INT32, 0, 0),
            new T("long", ColumnType.INT64, 0, 0),
            new T("real", ColumnType.FLOAT32, 0, 0),
            new T("double", ColumnType.FLOAT64, 0, 0),
            new T("date", ColumnType.DATE32, 0, 0),
            new T("timestamp_ltz", ColumnType.TIMESTAMP_US, 0, 0),
            new T("timestamp_ntz", ColumnType.TIMESTAMP_US, 0, 0),
            new T("decimal", ColumnType.DECIMAL64, 10, 0),
            new T("decimal(9,9)", ColumnType.DECIMAL32, 9, 9),
            new T("numeric(18)", ColumnType.DECIMAL64, 18, 0),
            new T("dec(19, 2)", ColumnType.DECIMAL128, 19, 2),
            new T("decimal(38,38)", ColumnType.DECIMAL128, 38, 38),
            new T("string", ColumnType.STRING, 0, 0),
            new T("binary", ColumnType.BINARY, 0, 0))) {
      ColumnarSchema.Field f = ColumnarSchema.Field.of("c", t.spark());
      assertEquals(t.type(), f.type(), t.spark());
      assertEquals(t.p(), f.precision(), t.spark());
      assertEquals(t.s(), f.scale(), t.spark());
      assertEquals(t.spark(), f.sparkType(), "sent as given");
    }
    refused("column c: sparkType decimal(39,0): want precision 1..38",
        () -> ColumnarSchema.Field.of("c", "decimal(39,0)"));
    refused("decimal(5,6)", () -> ColumnarSchema.Field.of("c", "decimal(5,6)"));
    refused("column c: sparkType varchar2: no Spark type", () -> ColumnarSchema.Field.of("c", "varchar2"));
    refused("decimal (10,2): no Spark type", () -> ColumnarSchema.Field.of("c", "decimal (10,2)"));
    for (String nested : List.of("array<int>", "struct<a:int>", "map<string,int>", "interval day to second", "void")) {
      refused("flat types only", () -> ColumnarSchema.Field.of("c", nested));
    }
    refused("column c: sparkType int is int32, not int64",
        () -> new ColumnarSchema.Field("c", "int", ColumnType.INT64, 0, 0, List.of()));
    refused("children: 1 for flat type int",
        () -> new ColumnarSchema.Field("c", "int", ColumnType.INT32, 0, 0, List.of(ColumnarSchema.Field.of("x", "int"))));
  }

  private static final ColumnarSchema S =
      ColumnarSchema.of(ColumnarSchema.Field.of("id", "int"), ColumnarSchema.Field.of("name", "string"));

  private static ByteBuffer offsets(int... o) {
    ByteBuffer b = le(4 * o.length);
    for (int i = 0; i < o.length; i++) {
      b.putInt(4 * i, o[i]);
    }
    return b;
  }

  private static ColumnarBatch batch(long rows, ColumnarBatch.Column id, ColumnarBatch.Column name, long... pr) {
    return ColumnarBatch.of(S, rows, List.of(id, name), pr);
  }

  @Test
  void validation() {
    ColumnarBatch.Column id = ColumnarBatch.Column.fixed(le(12), null);
    ColumnarBatch.Column name = ColumnarBatch.Column.varWidth(offsets(0, 1, 3, 3), le(3), le(1));
    ColumnarBatch ok = batch(3, id, name, 0, 2, 3);
    assertEquals(3, ok.rows());
    assertEquals(2, ok.numPartitions());
    assertTrue(ok.columns().get(0).data().isReadOnly(), "the batch hands out read-only views");

    refused("column 0 (id int): data: 8 bytes for 3 rows of int32, want >= 3 × 4",
        () -> batch(3, ColumnarBatch.Column.fixed(le(8), null), name, 0, 3));
    refused("column 0 (id int): validity: 0 bytes for 3 rows, want >= 1",
        () -> batch(3, ColumnarBatch.Column.fixed(le(12), le(0)), name, 0, 3));
    refused("column 0 (id int): offsets: a buffer for fixed-width int32, want null",
        () -> batch(3, ColumnarBatch.Column.of(null, le(16), le(12)), name, 0, 3));
    refused("column 1 (name string): offsets: 12 bytes for 3 rows, want >= 4 × (rows+1)",
        () -> batch(3, id, ColumnarBatch.Column.varWidth(offsets(0, 1, 3), le(3), null), 0, 3));
    refused("column 1 (name string): offsets: [2] = 0 below [1] = 1",
        () -> batch(3, id, ColumnarBatch.Column.varWidth(offsets(0, 1, 0, 3), le(3), null), 0, 3));
    refused("column 1 (name string): offsets: [0] = 1, want 0",
        () -> batch(3, id, ColumnarBatch.Column.varWidth(offsets(1, 1, 2, 3), le(3), null), 0, 3));
    refused("column 1 (name string): offsets: [3] = 4 past the data's 3 bytes",
        () -> batch(3, id, ColumnarBatch.Column.varWidth(offsets(0, 1, 2, 4), le(3), null), 0, 3));
    refused("column 1 (name string): offsets: null for 3 rows of string",
        () -> batch(3, id, ColumnarBatch.Column.varWidth(null, le(3), null), 0, 3));
    refused("column 1 (name string): data: null",
        () -> batch(3, id, ColumnarBatch.Column.varWidth(offsets(0, 0, 0, 0), null, null), 0, 3));
    refused("column 1 (name string): children: 1 for a flat type",
        () -> batch(3, id, new ColumnarBatch.Column(null, offsets(0, 0, 0, 0), le(0), List.of(id)), 0, 3));
    refused("batch: partitionRows: last = 2, want rows = 3", () -> batch(3, id, name, 0, 2));
    refused("batch: partitionRows: [2] = 1 below [1] = 2",
        () -> batch(3, id, name, 0, 2, 1, 3));
    refused("batch: partitionRows: 1 offsets", () -> batch(3, id, name, 3));
    refused("batch: 1 columns for a schema of 2", () -> ColumnarBatch.of(S, 3, List.of(id), new long[] {0, 3}));
    refused("batch: rows -1", () -> batch(-1, id, name, 0, -1));
    // 0 rows: no offsets needed, a buffer's position and limit are its bytes
    batch(0, ColumnarBatch.Column.fixed(le(0), null), ColumnarBatch.Column.varWidth(null, le(0), null), 0, 0);
    ByteBuffer shifted = le(16).position(4);
    batch(3, ColumnarBatch.Column.fixed(shifted, null), name, 0, 3);
    refused("data: 8 bytes", () -> batch(3, ColumnarBatch.Column.fixed(le(16).position(8), null), name, 0, 3));
  }
}
