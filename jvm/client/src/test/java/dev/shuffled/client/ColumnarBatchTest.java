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
            new T("binary", ColumnType.BINARY, 0, 0),
            new T("interval year", ColumnType.INTERVAL_YM, 0, 0),
            new T("INTERVAL Year To Month", ColumnType.INTERVAL_YM, 0, 0),
            new T("interval month", ColumnType.INTERVAL_YM, 0, 0),
            new T("interval day to second", ColumnType.INTERVAL_DT, 0, 0),
            new T("interval  hour  to   minute", ColumnType.INTERVAL_DT, 0, 0),
            new T("interval second", ColumnType.INTERVAL_DT, 0, 0),
            new T("void", ColumnType.VOID, 0, 0))) {
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
    for (String no : List.of("interval year to second", "calendarinterval", "interval", "char(3)", "variant")) {
      refused("column c: sparkType " + no + ": ", () -> ColumnarSchema.Field.of("c", no));
    }
    refused("column c: sparkType int is int32, not int64",
        () -> new ColumnarSchema.Field("c", "int", ColumnType.INT64, 0, 0, List.of()));
  }

  @Test
  void nestedTypes() {
    ColumnarSchema.Field a = ColumnarSchema.Field.of("a", "array<int>");
    assertEquals(ColumnType.LIST, a.type());
    assertEquals(List.of(ColumnarSchema.Field.of("element", "int")), a.children());

    ColumnarSchema.Field s = ColumnarSchema.Field.of("s", "Struct< x : decimal(12,2), `y ``z``` string,w:array<string>>");
    assertEquals(ColumnType.STRUCT, s.type());
    assertEquals(3, s.children().size());
    assertEquals("x", s.children().get(0).name());
    assertEquals(ColumnType.DECIMAL64, s.children().get(0).type());
    assertEquals(12, s.children().get(0).precision());
    assertEquals("y `z`", s.children().get(1).name(), "backticks quote a name, doubled for one");
    assertEquals(ColumnType.STRING, s.children().get(1).type());
    assertEquals(ColumnType.LIST, s.children().get(2).type());
    assertEquals(ColumnType.STRING, s.children().get(2).children().get(0).type());

    ColumnarSchema.Field m = ColumnarSchema.Field.of("m", "map<string,array<bigint>>");
    assertEquals(ColumnType.MAP, m.type());
    ColumnarSchema.Field entries = m.children().get(0);
    assertEquals("entries", entries.name());
    assertEquals(ColumnType.STRUCT, entries.type());
    assertEquals("key", entries.children().get(0).name());
    assertEquals(ColumnType.STRING, entries.children().get(0).type());
    assertEquals("value", entries.children().get(1).name());
    assertEquals(ColumnType.LIST, entries.children().get(1).type());
    assertEquals(5, m.flatSize());

    assertEquals(List.of(), ColumnarSchema.Field.of("e", "struct<>").children());
    assertEquals(ColumnarSchema.Field.of("s", "struct<a int>"), ColumnarSchema.Field.of("s", "struct<a int>"));

    refused("array<...> takes one element type, got 2", () -> ColumnarSchema.Field.of("c", "array<int,int>"));
    refused("map<...> takes a key and a value type, got 1", () -> ColumnarSchema.Field.of("c", "map<int>"));
    refused("struct field 1: want \"name:type\"", () -> ColumnarSchema.Field.of("c", "struct<a:int,b>"));
    refused("column b: sparkType foo: no Spark type", () -> ColumnarSchema.Field.of("c", "struct<a:int,b:foo>"));
    refused("column element: sparkType varchar(3)", () -> ColumnarSchema.Field.of("c", "array<varchar(3)>"));
    String deep = "array<".repeat(257) + "int" + ">".repeat(257);
    refused("nested deeper than 256 levels", () -> ColumnarSchema.Field.of("c", deep));
    ColumnarSchema.Field ok = ColumnarSchema.Field.of("c", "array<".repeat(256) + "int" + ">".repeat(256));
    assertEquals(257, ok.flatSize());
    // the children must be those the Spark type has
    refused("is list<element:int32>, not list<element:int64>",
        () -> new ColumnarSchema.Field("c", "array<int>", ColumnType.LIST, 0, 0, List.of(ColumnarSchema.Field.of("element", "bigint"))));
    refused("is list<element:int32>, not list",
        () -> new ColumnarSchema.Field("c", "array<int>", ColumnType.LIST, 0, 0, List.of()));
    refused("is int32, not int32<x:int32>",
        () -> new ColumnarSchema.Field("c", "int", ColumnType.INT32, 0, 0, List.of(ColumnarSchema.Field.of("x", "int"))));
    // 16384 columns on the wire at most, children included
    List<ColumnarSchema.Field> many = new java.util.ArrayList<>();
    for (int i = 0; i < 8192; i++) {
      many.add(ColumnarSchema.Field.of("c" + i, "array<int>"));
    }
    assertEquals(8192, new ColumnarSchema(many).size());
    many.add(ColumnarSchema.Field.of("x", "int"));
    refused("schema: 16385 columns, children included, exceed 16384", () -> new ColumnarSchema(many));
  }

  private static final ColumnarSchema NESTED =
      ColumnarSchema.of(
          ColumnarSchema.Field.of("l", "array<struct<a:int,s:string>>"),
          ColumnarSchema.Field.of("v", "void"));

  /** Rows: [{1,"x"}, null-struct], null, [] ; v: 3 nulls. */
  private static List<ColumnarBatch.Column> nested(ByteBuffer listOffsets, ByteBuffer structValidity,
      ByteBuffer aData, ByteBuffer sOffsets, ByteBuffer voidValidity) {
    ColumnarBatch.Column a = ColumnarBatch.Column.fixed(aData, null);
    ColumnarBatch.Column str = ColumnarBatch.Column.varWidth(sOffsets, le(1).put(0, (byte) 'x'), null);
    ColumnarBatch.Column st = ColumnarBatch.Column.struct(structValidity, List.of(a, str));
    ColumnarBatch.Column l = ColumnarBatch.Column.list(listOffsets, st, le(1).put(0, (byte) 0b101));
    return List.of(l, ColumnarBatch.Column.fixed(le(3), voidValidity));
  }

  @Test
  void nestedValidation() {
    long[] pr = {0, 1, 3};
    ColumnarBatch b = ColumnarBatch.of(NESTED, 3,
        nested(offsets(0, 2, 2, 2), le(1).put(0, (byte) 1), le(8), offsets(0, 1, 1), le(1)), pr);
    List<ColumnarBatch.Flat> flat = b.flat();
    assertEquals(5, flat.size(), "pre-order: l, its struct, a, s, v");
    assertEquals(List.of("l", "element", "a", "s", "v"), flat.stream().map(f -> f.field().name()).toList());
    assertEquals(List.of(3L, 2L, 2L, 2L, 3L), flat.stream().map(ColumnarBatch.Flat::rows).toList());
    assertEquals(List.of(0L, 0L, 8L, 1L, 3L), flat.stream().map(ColumnarBatch.Flat::used).toList());

    refused("column 0 (l array<struct<a:int,s:string>>).element.a: data: 4 bytes for 2 rows of int32",
        () -> ColumnarBatch.of(NESTED, 3,
            nested(offsets(0, 2, 2, 2), null, le(4), offsets(0, 1, 1), le(1)), pr));
    refused("column 0 (l array<struct<a:int,s:string>>).element.s: offsets: 8 bytes for 2 rows",
        () -> ColumnarBatch.of(NESTED, 3,
            nested(offsets(0, 2, 2, 2), null, le(8), offsets(0, 1), le(1)), pr));
    refused("column 0 (l array<struct<a:int,s:string>>): offsets: [2] = 1 below [1] = 2",
        () -> ColumnarBatch.of(NESTED, 3,
            nested(offsets(0, 2, 1, 2), null, le(8), offsets(0, 1, 1), le(1)), pr));
    refused("column 0 (l array<struct<a:int,s:string>>).element.a: data: 8 bytes for 3 rows",
        () -> ColumnarBatch.of(NESTED, 3,
            nested(offsets(0, 2, 2, 3), null, le(8), offsets(0, 1, 1, 1), le(1)), pr));
    refused("column 1 (v void): validity: null for 3 rows of void",
        () -> ColumnarBatch.of(NESTED, 3,
            nested(offsets(0, 2, 2, 2), null, le(8), offsets(0, 1, 1), null), pr));
    refused("column 1 (v void): validity: bit 2 set",
        () -> ColumnarBatch.of(NESTED, 3,
            nested(offsets(0, 2, 2, 2), null, le(8), offsets(0, 1, 1), le(1).put(0, (byte) 4)), pr));
    refused("column 0 (l array<struct<a:int,s:string>>): children: 0 columns for list, want 1",
        () -> ColumnarBatch.of(NESTED, 3,
            List.of(ColumnarBatch.Column.of(null, offsets(0, 0, 0, 0), null), ColumnarBatch.Column.fixed(le(3), le(1))), pr));
    refused("column 0 (l array<struct<a:int,s:string>>): data: a buffer for list, want null",
        () -> ColumnarBatch.of(NESTED, 3,
            List.of(new ColumnarBatch.Column(null, offsets(0, 0, 0, 0), le(1),
                    List.of(ColumnarBatch.Column.struct(null, List.of(ColumnarBatch.Column.fixed(le(0), null),
                        ColumnarBatch.Column.varWidth(null, le(0), null))))),
                ColumnarBatch.Column.fixed(le(3), le(1))), pr));
    refused("column 0 (l array<struct<a:int,s:string>>).element: offsets: a buffer for struct",
        () -> ColumnarBatch.of(NESTED, 3,
            List.of(ColumnarBatch.Column.list(offsets(0, 0, 0, 0),
                    new ColumnarBatch.Column(null, offsets(0), null, List.of(ColumnarBatch.Column.fixed(le(0), null),
                        ColumnarBatch.Column.varWidth(null, le(0), null))), null),
                ColumnarBatch.Column.fixed(le(3), le(1))), pr));
    // no rows: no offsets needed anywhere
    ColumnarBatch.of(NESTED, 0, List.of(ColumnarBatch.Column.list(null,
        ColumnarBatch.Column.struct(null, List.of(ColumnarBatch.Column.fixed(le(0), null),
            ColumnarBatch.Column.varWidth(null, le(0), null))), null), ColumnarBatch.Column.fixed(le(0), null)),
        new long[] {0, 0});
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
    refused("column 1 (name string): children: 1 columns for string, want 0",
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
