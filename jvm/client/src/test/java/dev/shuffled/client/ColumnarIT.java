package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import dev.shuffled.client.ColumnarBatch.Column;
import dev.shuffled.client.ColumnarSchema.Field;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Columnar batches of every Spark type, nested ones too, through the real daemon, as SHFC and as
 * kudo, on the inline plane, the memfd plane (a copy into a fresh memfd) and in place from a
 * {@link ColumnarMemfd} (JDK 22+); each committed output is read back with {@code shuffled cat --rows
 * json} and compared with what was written, value by value.
 */
class ColumnarIT {
  private static final String APP = "app-col";
  private static final String EXEC = "exec-1";
  private static int nextShuffle = 1; // 0: the README example's
  private static final int PARTS = 5;

  /** Every flat type, each with nulls except {@code nn}, which has no validity buffer. */
  static final ColumnarSchema SCHEMA =
      ColumnarSchema.of(
          ColumnarSchema.Field.of("b", "boolean"),
          ColumnarSchema.Field.of("i8", "tinyint"),
          ColumnarSchema.Field.of("i16", "smallint"),
          ColumnarSchema.Field.of("i32", "int"),
          ColumnarSchema.Field.of("i64", "bigint"),
          ColumnarSchema.Field.of("f32", "float"),
          ColumnarSchema.Field.of("f64", "double"),
          ColumnarSchema.Field.of("d", "date"),
          ColumnarSchema.Field.of("ts", "timestamp"),
          ColumnarSchema.Field.of("tsntz", "timestamp_ntz"),
          ColumnarSchema.Field.of("dec9", "decimal(9,2)"),
          ColumnarSchema.Field.of("dec18", "decimal(18,4)"),
          ColumnarSchema.Field.of("dec38", "decimal(38,10)"),
          ColumnarSchema.Field.of("s", "string"),
          ColumnarSchema.Field.of("bin", "binary"),
          ColumnarSchema.Field.of("nn", "bigint"));

  @RegisterExtension static final RunningDaemon RUNNING = new RunningDaemon(APP, EXEC);

  /** Whether this JVM runs the memfd plane: JDK 22+ and the jar's release 22 classes. */
  static boolean memfdHere() {
    return Runtime.version().feature() >= 22 && Boolean.getBoolean("shuffled.memfd.built");
  }

  static Stream<Arguments> formatsAndPlanes() {
    List<Arguments> a = new ArrayList<>();
    for (ColumnarFormat f : ColumnarFormat.values()) {
      for (DataPlane p : DataPlane.values()) {
        a.add(Arguments.of(f, p));
      }
    }
    return a.stream();
  }

  /** Two batches from heap buffers, the second starting again at partition 0 (a second run). */
  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("formatsAndPlanes")
  void everyFlatType(ColumnarFormat format, DataPlane plane) throws Exception {
    int shuffle = nextShuffle++;
    Random rnd = new Random(shuffle * 31L + 7);
    List<Table> tables = List.of(Table.random(rnd, 60), Table.random(rnd, 45), Table.random(rnd, 0));
    try (MapOutput out =
        RUNNING.client().openColumnarOutput(shuffle, 1, PARTS, format, SCHEMA, OpenOptions.DEFAULTS.withPlane(plane))) {
      assertEquals(plane == DataPlane.MEMFD && memfdHere() ? DataPlane.MEMFD : DataPlane.INLINE, out.plane());
      for (Table t : tables) {
        out.write(t.batch(null));
      }
      CommitResult r = out.commit();
      assertFalse(r.existing());
    }
    assertRows(format, shuffle, 1, tables);
  }

  /** A batch filled in place in a memfd travels without a copy and seals the memfd (JDK 22+). */
  @ParameterizedTest(name = "{0}")
  @MethodSource("formats")
  void inPlaceMemfd(ColumnarFormat format) throws Exception {
    if (!memfdHere()) {
      IOException e = assertThrows(IOException.class, () -> ColumnarMemfd.allocate(4096));
      assertTrue(e.getMessage().contains("JDK"), e.getMessage());
      return;
    }
    int shuffle = nextShuffle++;
    Random rnd = new Random(shuffle);
    Table t = Table.random(rnd, 77);
    try (ColumnarMemfd mem = ColumnarMemfd.allocate(t.memfdSize());
        MapOutput out = RUNNING.client().openColumnarOutput(shuffle, 2, PARTS, format, SCHEMA, OpenOptions.DEFAULTS)) {
      assertEquals(DataPlane.MEMFD, out.plane());
      // the MemorySegment view is the same mapping as the ByteBuffer views
      Object seg = ColumnarMemfd.class.getMethod("segment").invoke(mem);
      assertEquals(
          t.memfdSize(), (long) Class.forName("java.lang.foreign.MemorySegment").getMethod("byteSize").invoke(seg));
      ColumnarBatch b = t.batch(mem);
      assertFalse(mem.sealed());
      out.write(b);
      assertTrue(mem.sealed(), "written on the memfd plane, the memfd is sealed");
      ByteBuffer gone = b.columns().get(3).data();
      assertThrows(IllegalStateException.class, () -> gone.get(0), "the writable views are unmapped");
      assertThrows(IllegalStateException.class, () -> mem.buffer(0, 8));
      out.write(b); // the sealed memfd again: the same rows a second time
      out.commit();
    }
    assertRows(format, shuffle, 2, List.of(t, t));
  }

  /** A batch made in a memfd, written to an inline map output, is copied; the memfd stays open. */
  @Test
  void memfdBatchOnInlinePlane() throws Exception {
    if (!memfdHere()) {
      return; // inPlaceMemfd checks that allocate refuses here
    }
    int shuffle = nextShuffle++;
    Table t = Table.random(new Random(5), 33);
    try (ColumnarMemfd mem = ColumnarMemfd.allocate(t.memfdSize());
        MapOutput out =
            RUNNING.client().openColumnarOutput(
                shuffle, 3, PARTS, ColumnarFormat.SHFC, SCHEMA, OpenOptions.DEFAULTS.withPlane(DataPlane.INLINE))) {
      out.write(t.batch(mem));
      assertFalse(mem.sealed());
      out.commit();
    }
    assertRows(ColumnarFormat.SHFC, shuffle, 3, List.of(t));
  }

  /** A batch whose memfd was closed is refused before sending; the map output lives on. */
  @Test
  void closedMemfd() throws Exception {
    if (!memfdHere()) {
      return; // inPlaceMemfd checks that allocate refuses here
    }
    int shuffle = nextShuffle++;
    Table t = Table.random(new Random(6), 20);
    ColumnarBatch b;
    try (ColumnarMemfd mem = ColumnarMemfd.allocate(t.memfdSize())) {
      b = t.batch(mem);
    }
    for (DataPlane plane : DataPlane.values()) {
      try (MapOutput out =
          RUNNING.client().openColumnarOutput(shuffle, plane.ordinal(), PARTS, ColumnarFormat.SHFC, SCHEMA,
              OpenOptions.DEFAULTS.withPlane(plane))) {
        assertThrows(IllegalStateException.class, () -> out.write(b), plane.toString());
        out.write(t.batch(null));
        out.commit();
      }
      assertRows(ColumnarFormat.SHFC, shuffle, plane.ordinal(), List.of(t));
    }
  }

  static Stream<ColumnarFormat> formats() {
    return Stream.of(ColumnarFormat.values());
  }

  /** Every spelling the client takes, the daemon takes too: a kudo Open declares them all. */
  @Test
  void aliasesTheDaemonTakes() throws Exception {
    List<String> types = List.of(" TinyInt ", "byte", "short", "integer", "long", "real", "DOUBLE",
        "timestamp_ltz", "decimal", "dec(5)", "numeric( 20 , 3 )", "decimal(38,38)", "Boolean", "date");
    List<Field> fields = new ArrayList<>();
    List<Column> cols = new ArrayList<>();
    for (int i = 0; i < types.size(); i++) {
      fields.add(Field.of("c" + i, types.get(i)));
      cols.add(Column.fixed(le(0), null));
    }
    ColumnarSchema schema = new ColumnarSchema(fields);
    try (MapOutput out =
        RUNNING.client().openColumnarOutput(nextShuffle++, 1, 1, ColumnarFormat.KUDO, schema, OpenOptions.DEFAULTS)) {
      out.write(ColumnarBatch.of(schema, 0, cols, new long[] {0, 0}));
      out.commit();
    }
  }

  /** A batch of another schema or partition count is refused before sending; the output lives. */
  @Test
  void refusedBeforeSending() throws Exception {
    int shuffle = nextShuffle++;
    Table t = Table.random(new Random(9), 10);
    try (MapOutput out =
        RUNNING.client().openColumnarOutput(shuffle, 4, PARTS, ColumnarFormat.KUDO, SCHEMA, OpenOptions.DEFAULTS)) {
      ColumnarSchema other = ColumnarSchema.of(ColumnarSchema.Field.of("x", "int"));
      ColumnarBatch small =
          ColumnarBatch.of(other, 1, List.of(ColumnarBatch.Column.fixed(le(4).putInt(0, 3), null)), new long[] {0, 1});
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> out.write(small));
      assertTrue(e.getMessage().contains("column 0 is x int, the map output's b boolean"), e.getMessage());
      long[] pr = new long[PARTS]; // one partition short
      pr[PARTS - 1] = t.rows;
      ColumnarBatch fewer = ColumnarBatch.of(SCHEMA, t.rows, t.batch(null).columns(), pr);
      e = assertThrows(IllegalArgumentException.class, () -> out.write(fewer));
      assertTrue(e.getMessage().contains("4 partitions (partitionRows), want 5"), e.getMessage());
      out.write(t.batch(null));
      out.commit();
    }
    assertRows(ColumnarFormat.KUDO, shuffle, 4, List.of(t));
    try (MapOutput opaque = RUNNING.client().openMapOutput(shuffle, 5, PARTS, OpenOptions.DEFAULTS)) {
      assertThrows(IllegalStateException.class, () -> opaque.write(t.batch(null)));
    }
  }

  /**
   * An inline batch over the daemon's max_inline is refused before sending and leaves the map
   * output open; on the memfd plane (JDK 22+) the same batch goes through. After the write that
   * markLast marked, another write throws and sends nothing.
   */
  @Test
  void bigBatchAndLast() throws Exception {
    try (Daemon d = Daemon.start("--max-frame=1MiB");
        ShuffledClient c = d.connect()) {
      c.register(APP, EXEC);
      ColumnarSchema one = ColumnarSchema.of(Field.of("v", "bigint"));
      int rows = 100_000; // 800 KB of data, over max_inline (512 KiB)
      ByteBuffer data = le(8 * rows);
      for (int r = 0; r < rows; r++) {
        data.putLong(8 * r, r * 3L);
      }
      ColumnarBatch big = ColumnarBatch.of(one, rows, List.of(Column.fixed(data, null)), new long[] {0, rows / 2, rows});
      ColumnarBatch small = ColumnarBatch.of(one, 1, List.of(Column.fixed(data, null)), new long[] {0, 0, 1});
      for (DataPlane plane : DataPlane.values()) {
        try (MapOutput out =
            c.openColumnarOutput(1, plane.ordinal(), 2, ColumnarFormat.SHFC, one, OpenOptions.DEFAULTS.withPlane(plane))) {
          if (out.plane() == DataPlane.INLINE) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> out.write(big));
            assertTrue(e.getMessage().contains("exceeds the daemon's max_inline"), e.getMessage());
          } else {
            out.write(big);
          }
          out.markLast();
          out.write(small);
          assertThrows(IllegalStateException.class, () -> out.write(small));
          out.commit();
          StringBuilder want = new StringBuilder();
          boolean bigIn = out.plane() == DataPlane.MEMFD;
          for (int r = 0; bigIn && r < rows; r++) {
            want.append("{\"_partition\":").append(r < rows / 2 ? 0 : 1).append(",\"v\":").append(r * 3L).append("}\n");
          }
          want.append("{\"_partition\":1,\"v\":0}\n");
          assertEquals(want.toString(), cat(d, ColumnarFormat.SHFC, one, 1, plane.ordinal()), plane.toString());
        }
      }
    }
  }

  // ---- nested types, intervals and void -------------------------------------------

  /**
   * Nested columns, intervals and void, with nulls at every level (list, struct, element, key
   * never), empty lists and partitions that start mid-byte. A nested value's string in the nested
   * text cat prints must not need JSON escapes: cat writes nested values' text unescaped.
   */
  static final ColumnarSchema NESTED =
      ColumnarSchema.of(
          Field.of("id", "int"),
          Field.of("a", "array<int>"),
          Field.of("as", "array<string>"),
          Field.of("s", "struct<x:int,`y z`:string>"),
          Field.of("m", "map<string,bigint>"),
          Field.of("al", "array<struct<p:bigint,q:array<string>>>"),
          Field.of("ms", "MAP<int, struct<d:decimal(20,3)>>"),
          Field.of("ym", "interval year to month"),
          Field.of("dt", "interval day to second"),
          Field.of("v", "void"),
          Field.of("ai", "array<interval month>"),
          Field.of("sv", "struct<n:void,t:interval hour to second,b:array<void>>"));

  static Stream<Arguments> nestedModes() {
    List<Arguments> a = new ArrayList<>();
    for (ColumnarFormat f : ColumnarFormat.values()) {
      a.add(Arguments.of(f, DataPlane.INLINE, false));
      a.add(Arguments.of(f, DataPlane.MEMFD, false));
      if (memfdHere()) {
        a.add(Arguments.of(f, DataPlane.MEMFD, true));
      }
    }
    return a.stream();
  }

  /** Three batches (the last empty), written as given, in a fresh memfd, or in place in one. */
  @ParameterizedTest(name = "{0} {1} in place {2}")
  @MethodSource("nestedModes")
  void nestedTypes(ColumnarFormat format, DataPlane plane, boolean inPlace) throws Exception {
    int shuffle = nextShuffle++;
    Random rnd = new Random(shuffle * 17L + 3);
    List<Nested> tables = List.of(
        Nested.random(rnd, 53, new long[] {0, 3, 3, 11, 37, 53}), // partitions from rows 3, 11, 37
        Nested.random(rnd, 21, null),
        Nested.random(rnd, 0, null));
    try (MapOutput out =
        RUNNING.client().openColumnarOutput(shuffle, 3, PARTS, format, NESTED, OpenOptions.DEFAULTS.withPlane(plane))) {
      for (Nested t : tables) {
        if (!inPlace) {
          out.write(ColumnarBatch.of(NESTED, t.rows, t.columns, t.partitionRows));
          continue;
        }
        long size = 64;
        for (Column c : t.columns) {
          size += memfdBytes(c);
        }
        try (ColumnarMemfd mem = ColumnarMemfd.allocate(size)) {
          mem.buffer(0, (int) size).put(0, new byte[(int) size]); // no holes, even with no rows
          long[] at = {64};
          List<Column> cols = new ArrayList<>();
          for (Column c : t.columns) {
            cols.add(intoMemfd(c, mem, at));
          }
          out.write(mem.batch(NESTED, t.rows, cols, t.partitionRows));
          assertTrue(mem.sealed(), "in place: the memfd itself went");
        }
      }
      out.commit();
    }
    String got = cat(format, NESTED, shuffle, 3);
    List<Map<String, Object>> rows = new ArrayList<>();
    for (String line : got.split("\n")) {
      if (!line.isEmpty()) {
        rows.add(Json.object(line));
      }
    }
    int n = 0;
    for (int part = 0; part < PARTS; part++) {
      for (Nested t : tables) {
        for (long r = t.partitionRows[part]; r < t.partitionRows[part + 1]; r++) {
          assertTrue(n < rows.size(), "only " + rows.size() + " rows read back");
          Map<String, Object> row = rows.get(n++);
          String where = format + " row " + (n - 1) + " (partition " + part + ")";
          assertEquals(new Num(Integer.toString(part)), row.get("_partition"), where);
          for (int c = 0; c < NESTED.size(); c++) {
            Field f = NESTED.field(c);
            assertTrue(row.containsKey(f.name()), where + ": no " + f.name() + " in " + row);
            Object want = t.values.get(c).get((int) r);
            Object json = row.get(f.name());
            if (want == null) {
              assertNull(json, where + " " + f.name());
            } else if (f.type() == ColumnType.INT32) {
              assertEquals(new Num(want.toString()), json, where + " " + f.name());
            } else {
              assertEquals(text(f, want), json, where + " " + f.name());
            }
          }
        }
      }
    }
    assertEquals(n, rows.size(), "rows read back");
  }

  /** The bytes a column and its children take in a memfd, each buffer on 64 bytes. */
  private static long memfdBytes(Column c) {
    long n = 0;
    for (ByteBuffer b : new ByteBuffer[] {c.validity(), c.offsets(), c.data()}) {
      n += b == null ? 0 : (b.remaining() + 63) & -64;
    }
    for (Column k : c.children()) {
      n += memfdBytes(k);
    }
    return n;
  }

  /**
   * A copy of c and its children in mem, from {@code at[0]} on: nested columns made by {@code
   * ColumnarMemfd.column} of {@code MemorySegment} slices and children (by reflection: the tests
   * compile for JDK 17), flat ones of {@code ByteBuffer} views.
   */
  private static Column intoMemfd(Column c, ColumnarMemfd mem, long[] at) throws ReflectiveOperationException {
    Class<?> ms = Class.forName("java.lang.foreign.MemorySegment");
    Object seg = ColumnarMemfd.class.getMethod("segment").invoke(mem);
    ByteBuffer[] put = new ByteBuffer[3];
    Object[] slices = new Object[3];
    ByteBuffer[] bs = {c.validity(), c.offsets(), c.data()};
    for (int k = 0; k < 3; k++) {
      if (bs[k] != null) {
        put[k] = mem.buffer(at[0], bs[k].remaining());
        put[k].put(0, bs[k], 0, bs[k].remaining());
        slices[k] = ms.getMethod("asSlice", long.class, long.class).invoke(seg, at[0], (long) bs[k].remaining());
        at[0] += (bs[k].remaining() + 63) & -64;
      }
    }
    List<Column> kids = new ArrayList<>();
    for (Column k : c.children()) {
      kids.add(intoMemfd(k, mem, at));
    }
    if (kids.isEmpty()) {
      return new Column(put[0], put[1], put[2], kids);
    }
    return (Column) ColumnarMemfd.class.getMethod("column", ms, ms, ms, List.class)
        .invoke(mem, slices[0], slices[1], slices[2], kids);
  }

  /** A struct's values, one per field. */
  record Struct(List<Object> fields) {}

  /** One entry of a map. */
  record Entry(Object key, Object value) {}

  /** A value as cat prints it (Spark's cast to string): the text of a non-null value. */
  static String text(Field f, Object v) {
    if (v == null) {
      return "null";
    }
    return switch (f.type()) {
      case INT32, INT64, STRING -> v.toString();
      case DECIMAL128 -> new BigDecimal((BigInteger) v, f.scale()).toPlainString();
      case INTERVAL_YM -> {
        long m = (Integer) v;
        String sign = m < 0 ? "-" : "";
        m = Math.abs(m);
        yield "INTERVAL '" + sign + m / 12 + "-" + m % 12 + "' YEAR TO MONTH";
      }
      case INTERVAL_DT -> {
        long us = (Long) v;
        String sign = us < 0 ? "-" : "";
        BigInteger mag = BigInteger.valueOf(us).abs();
        long day = 86_400_000_000L;
        long days = mag.divide(BigInteger.valueOf(day)).longValue();
        long rest = mag.mod(BigInteger.valueOf(day)).longValue();
        yield String.format("INTERVAL '%s%d %02d:%02d:%02d.%06d' DAY TO SECOND", sign, days,
            rest / 3_600_000_000L, rest % 3_600_000_000L / 60_000_000L, rest % 60_000_000L / 1_000_000L,
            rest % 1_000_000L);
      }
      case LIST -> {
        StringBuilder b = new StringBuilder("[");
        for (Object e : (List<?>) v) {
          b.append(b.length() == 1 ? "" : ", ").append(text(f.children().get(0), e));
        }
        yield b.append(']').toString();
      }
      case MAP -> {
        Field kf = f.children().get(0).children().get(0);
        Field vf = f.children().get(0).children().get(1);
        StringBuilder b = new StringBuilder("{");
        for (Object e : (List<?>) v) {
          Entry en = (Entry) e;
          b.append(b.length() == 1 ? "" : ", ").append(text(kf, en.key())).append(" -> ").append(text(vf, en.value()));
        }
        yield b.append('}').toString();
      }
      case STRUCT -> {
        StringBuilder b = new StringBuilder("{");
        List<Object> fs = ((Struct) v).fields();
        for (int i = 0; i < fs.size(); i++) {
          b.append(i == 0 ? "" : ", ").append(text(f.children().get(i), fs.get(i)));
        }
        yield b.append('}').toString();
      }
      default -> throw new AssertionError(f);
    };
  }

  /** A batch of {@link #NESTED}: its rows as Java values, per column, and its columns. */
  static final class Nested {
    final long rows;
    final long[] partitionRows;
    final List<List<Object>> values = new ArrayList<>();
    final List<Column> columns = new ArrayList<>();

    private Nested(long rows, long[] partitionRows) {
      this.rows = rows;
      this.partitionRows = partitionRows;
    }

    /** Random rows; partitionRows null: random ones. */
    static Nested random(Random rnd, int rows, long[] partitionRows) {
      long[] pr = partitionRows;
      if (pr == null) {
        pr = new long[PARTS + 1];
        for (int p = 1; p < PARTS; p++) {
          pr[p] = rnd.nextInt(rows + 1);
        }
        pr[PARTS] = rows;
        java.util.Arrays.sort(pr);
      }
      Nested t = new Nested(rows, pr);
      for (Field f : NESTED.fields()) {
        List<Object> vals = new ArrayList<>();
        for (int r = 0; r < rows; r++) {
          boolean isNull = f.type() == ColumnType.VOID || (!f.name().equals("id") && rnd.nextInt(5) == 0);
          vals.add(isNull ? null : f.name().equals("id") ? (Object) r : value(f, rnd));
        }
        t.values.add(vals);
        t.columns.add(encode(f, vals));
      }
      return t;
    }

    private static final String[] WORDS = {"", "a", "é中文😀", "plain words of some length", "k"};

    private static Object value(Field f, Random rnd) {
      return switch (f.type()) {
        case INT32 -> rnd.nextInt();
        case INT64 -> rnd.nextLong();
        case STRING -> WORDS[rnd.nextInt(WORDS.length)] + rnd.nextInt(100);
        case DECIMAL128 -> new BigInteger(60, rnd).multiply(BigInteger.valueOf(rnd.nextBoolean() ? -1000 : 1000));
        case INTERVAL_YM -> rnd.nextInt(2_000_000) - 1_000_000;
        case INTERVAL_DT -> rnd.nextLong(-400_000_000_000_000L, 400_000_000_000_000L);
        case VOID -> null;
        case LIST -> {
          List<Object> l = new ArrayList<>();
          int len = rnd.nextInt(4); // empty lists too
          for (int i = 0; i < len; i++) {
            l.add(rnd.nextInt(5) == 0 ? null : value(f.children().get(0), rnd));
          }
          yield l;
        }
        case MAP -> {
          Field kv = f.children().get(0);
          List<Object> l = new ArrayList<>();
          int len = rnd.nextInt(4);
          for (int i = 0; i < len; i++) { // keys never null, values sometimes
            Object v = rnd.nextInt(5) == 0 ? null : value(kv.children().get(1), rnd);
            l.add(new Entry(value(kv.children().get(0), rnd), v));
          }
          yield l;
        }
        case STRUCT -> {
          List<Object> fs = new ArrayList<>();
          for (Field c : f.children()) {
            fs.add(rnd.nextInt(5) == 0 ? null : value(c, rnd));
          }
          yield new Struct(fs);
        }
        default -> throw new AssertionError(f);
      };
    }

    /** The column of these values and its children; a validity buffer only where a value is null. */
    static Column encode(Field f, List<Object> vals) {
      int rows = vals.size();
      ByteBuffer validity = null;
      if (vals.contains(null)) {
        validity = le((rows + 7) / 8);
        for (int r = 0; r < rows; r++) {
          if (vals.get(r) != null) {
            validity.put(r / 8, (byte) (validity.get(r / 8) | (1 << (r % 8))));
          }
        }
      }
      ColumnType t = f.type();
      switch (t) {
        case STRING -> {
          ByteBuffer offsets = rows == 0 ? null : le(4 * (rows + 1));
          java.io.ByteArrayOutputStream data = new java.io.ByteArrayOutputStream();
          for (int r = 0; r < rows; r++) {
            Object v = vals.get(r);
            data.writeBytes(v == null ? new byte[0] : ((String) v).getBytes(StandardCharsets.UTF_8));
            offsets.putInt(4 * (r + 1), data.size());
          }
          return Column.varWidth(offsets, ByteBuffer.wrap(data.toByteArray()), validity);
        }
        case LIST, MAP -> {
          ByteBuffer offsets = rows == 0 ? null : le(4 * (rows + 1));
          List<Object> child = new ArrayList<>();
          for (int r = 0; r < rows; r++) {
            Object v = vals.get(r);
            if (v != null) {
              for (Object e : (List<?>) v) {
                child.add(t == ColumnType.MAP ? new Struct(java.util.Arrays.asList(((Entry) e).key(), ((Entry) e).value())) : e);
              }
            }
            offsets.putInt(4 * (r + 1), child.size());
          }
          return Column.list(offsets, encode(f.children().get(0), child), validity);
        }
        case STRUCT -> {
          List<Column> kids = new ArrayList<>();
          for (int k = 0; k < f.children().size(); k++) {
            List<Object> kv = new ArrayList<>();
            for (Object v : vals) {
              kv.add(v == null ? null : ((Struct) v).fields().get(k));
            }
            kids.add(encode(f.children().get(k), kv));
          }
          return Column.struct(validity, kids);
        }
        default -> {
          int w = t.width();
          ByteBuffer data = le(rows * w);
          for (int r = 0; r < rows; r++) {
            Object v = vals.get(r);
            if (v == null) {
              data.put(r * w, (byte) 0x5a); // a null's bytes are whatever
              continue;
            }
            switch (t) {
              case INT32, INTERVAL_YM -> data.putInt(r * w, (Integer) v);
              case INT64, INTERVAL_DT -> data.putLong(r * w, (Long) v);
              case DECIMAL128 -> {
                BigInteger b = (BigInteger) v;
                data.putLong(r * w, b.longValue());
                data.putLong(r * w + 8, b.shiftRight(64).longValue());
              }
              default -> throw new AssertionError(t);
            }
          }
          if (t == ColumnType.VOID && rows > 0 && validity == null) {
            validity = le((rows + 7) / 8);
          }
          return Column.fixed(data, validity);
        }
      }
    }
  }

  // ---- reading back ------------------------------------------------------------------

  /** {@code shuffled cat --rows json} of a committed map output: its rows, one JSON object a line. */
  private static String cat(ColumnarFormat format, ColumnarSchema schema, int shuffle, long map)
      throws Exception {
    return cat(RUNNING.daemon(), format, schema, shuffle, map);
  }

  private static String cat(Daemon daemon, ColumnarFormat format, ColumnarSchema schema, int shuffle, long map)
      throws Exception {
    List<String> cmd = new ArrayList<>(List.of(
        Daemon.binary().toString(), "cat", "--rows", "json",
        "--dir", daemon.outputDir(APP, EXEC).toString(),
        "--shuffle", Integer.toString(shuffle), "--map", Long.toString(map)));
    if (format == ColumnarFormat.KUDO) {
      StringBuilder ddl = new StringBuilder();
      for (ColumnarSchema.Field f : schema.fields()) {
        ddl.append(ddl.length() == 0 ? "" : ", ").append(f.name()).append(' ').append(f.sparkType());
      }
      cmd.add("--schema");
      cmd.add(ddl.toString());
    }
    Path err = Files.createTempFile("cat", ".err");
    Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue(), () -> "shuffled cat: " + read(err));
    Files.delete(err);
    return out;
  }

  /** The README's columnar example, verbatim but for the client and options, writes its rows. */
  @Test
  void readmeExample() throws Exception {
    OpenOptions opts = OpenOptions.DEFAULTS;
    // --- README example begins ---
    ColumnarSchema schema = ColumnarSchema.of(Field.of("id", "bigint"), Field.of("s", "string"));
    try (MapOutput out = RUNNING.client().openColumnarOutput(0, 7, 2, ColumnarFormat.KUDO, schema, opts)) {
      ByteBuffer ids = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(0, 1).putLong(8, 2);
      ByteBuffer offs = ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN).putInt(4, 1).putInt(8, 3);
      ByteBuffer chars = ByteBuffer.wrap("abc".getBytes(StandardCharsets.UTF_8));
      out.write(ColumnarBatch.of(schema, 2, List.of(Column.fixed(ids, null),
          Column.varWidth(offs, chars, null)), new long[] {0, 1, 2})); // row 0 to partition 0, row 1 to 1
      out.commit();
    }
    // --- README example ends ---
    assertEquals(
        "{\"_partition\":0,\"id\":1,\"s\":\"a\"}\n{\"_partition\":1,\"id\":2,\"s\":\"bc\"}\n",
        cat(ColumnarFormat.KUDO, schema, 0, 7));
  }

  private static void assertRows(ColumnarFormat format, int shuffle, long map, List<Table> tables)
      throws Exception {
    String out = cat(format, SCHEMA, shuffle, map);
    List<Map<String, Object>> got = new ArrayList<>();
    for (String line : out.split("\n")) {
      if (!line.isEmpty()) {
        got.add(Json.object(line));
      }
    }
    // expected: partition by partition, the batches' rows in the order they were written
    int n = 0;
    for (int part = 0; part < PARTS; part++) {
      for (Table t : tables) {
        for (long r = t.partitionRows[part]; r < t.partitionRows[part + 1]; r++) {
          assertTrue(n < got.size(), "only " + got.size() + " rows read back");
          Map<String, Object> row = got.get(n++);
          String where = format + " row " + (n - 1) + " (partition " + part + ")";
          assertEquals(new Num(Integer.toString(part)), row.get("_partition"), where);
          for (int c = 0; c < SCHEMA.size(); c++) {
            ColumnarSchema.Field f = SCHEMA.field(c);
            assertTrue(row.containsKey(f.name()), where + ": no " + f.name() + " in " + row);
            assertValue(f, t.values.get(c).get((int) r), row.get(f.name()), where + " " + f.name());
          }
        }
      }
    }
    assertEquals(n, got.size(), "rows read back");
  }

  private static String read(Path p) {
    try {
      return Files.readString(p);
    } catch (IOException e) {
      return e.toString();
    }
  }

  private static void assertValue(ColumnarSchema.Field f, Object want, Object got, String where) {
    if (want == null) {
      assertNull(got, where);
      return;
    }
    assertNotNull(got, where);
    switch (f.type()) {
      case BOOL8 -> assertEquals(want, got, where);
      case INT8, INT16, INT32, INT64 -> assertEquals(((Number) want).longValue(), Long.parseLong(((Num) got).raw()), where);
      case FLOAT32 -> {
        float w = (Float) want;
        float g = got instanceof String s ? special(s).floatValue() : Float.parseFloat(((Num) got).raw());
        assertEquals(Float.floatToIntBits(w), Float.floatToIntBits(g), where + ": " + w + " vs " + got);
      }
      case FLOAT64 -> {
        double w = (Double) want;
        double g = got instanceof String s ? special(s) : Double.parseDouble(((Num) got).raw());
        assertEquals(Double.doubleToLongBits(w), Double.doubleToLongBits(g), where + ": " + w + " vs " + got);
      }
      case DATE32 -> assertEquals(LocalDate.ofEpochDay((Integer) want).toString(), got, where);
      case TIMESTAMP_US -> {
        LocalDateTime t = LocalDateTime.parse(((String) got).replace(' ', 'T'));
        long micros = t.toEpochSecond(ZoneOffset.UTC) * 1_000_000 + t.getNano() / 1000;
        assertEquals((long) (Long) want, micros, where + ": " + got);
      }
      case DECIMAL32, DECIMAL64, DECIMAL128 -> {
        BigDecimal w = new BigDecimal((BigInteger) want, f.scale());
        assertEquals(w, new BigDecimal(((Num) got).raw()), where); // the same digits and scale
      }
      case STRING -> assertEquals(want, got, where);
      case BINARY -> assertEquals(HexFormat.of().formatHex((byte[]) want), got, where);
    }
  }

  private static Double special(String s) {
    return switch (s) {
      case "NaN" -> Double.NaN;
      case "Infinity" -> Double.POSITIVE_INFINITY;
      case "-Infinity" -> Double.NEGATIVE_INFINITY;
      default -> throw new AssertionError("float as string " + s);
    };
  }

  static ByteBuffer le(int n) {
    return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
  }

  // ---- test tables -------------------------------------------------------------------

  /** A batch's rows as Java values (null for null), per column, and its buffers. */
  static final class Table {
    final long rows;
    final long[] partitionRows;
    final List<List<Object>> values = new ArrayList<>();
    final List<ByteBuffer[]> buffers = new ArrayList<>(); // validity, offsets, data per column

    private Table(long rows, long[] partitionRows) {
      this.rows = rows;
      this.partitionRows = partitionRows;
    }

    static Table random(Random rnd, int rows) {
      long[] pr = new long[PARTS + 1];
      for (int p = 1; p < PARTS; p++) {
        pr[p] = rnd.nextInt(rows + 1);
      }
      pr[PARTS] = rows;
      java.util.Arrays.sort(pr);
      pr[2] = pr[1]; // partition 1 stays empty
      Table t = new Table(rows, pr);
      for (ColumnarSchema.Field f : SCHEMA.fields()) {
        boolean nullable = !f.name().equals("nn");
        List<Object> vals = new ArrayList<>();
        for (int r = 0; r < rows; r++) {
          vals.add(nullable && rnd.nextInt(5) == 0 ? null : value(f, rnd, r));
        }
        t.values.add(vals);
        t.buffers.add(encode(f, vals, nullable));
      }
      return t;
    }

    private static final float[] FLOATS = {1.5f, -0.25f, 3.1415927f, Float.NaN, Float.POSITIVE_INFINITY,
        Float.NEGATIVE_INFINITY, 0f, 1e-7f, 65504f, Float.MIN_VALUE, Float.MAX_VALUE};
    private static final double[] DOUBLES = {1.5, -0.1, Math.PI, Double.NaN, Double.POSITIVE_INFINITY,
        Double.NEGATIVE_INFINITY, -0.0, 1e300, 4.9e-324, 123456789.125};
    private static final String[] STRINGS = {"", "a", "quote \" and \\ back", "line\nbreak\ttab",
        "é中文😀", "\u0001ctl", "plain text of some length that is longer than a few bytes"};

    private static Object value(ColumnarSchema.Field f, Random rnd, int r) {
      return switch (f.type()) {
        case BOOL8 -> rnd.nextBoolean();
        case INT8 -> (byte) rnd.nextInt();
        case INT16 -> (short) rnd.nextInt();
        case INT32 -> r == 0 ? Integer.MIN_VALUE : rnd.nextInt();
        case INT64 -> r == 0 ? Long.MAX_VALUE : rnd.nextLong();
        case FLOAT32 -> rnd.nextBoolean() ? FLOATS[rnd.nextInt(FLOATS.length)] : rnd.nextFloat() * 1000 - 500;
        case FLOAT64 -> rnd.nextBoolean() ? DOUBLES[rnd.nextInt(DOUBLES.length)] : rnd.nextGaussian() * 1e6;
        case DATE32 -> rnd.nextInt(2_932_896) - 719_162; // years 0001..9999
        case TIMESTAMP_US -> rnd.nextLong(-30_000_000_000_000_000L, 100_000_000_000_000_000L); // ~1020..5140
        case DECIMAL32, DECIMAL64, DECIMAL128 -> {
          BigInteger v = new BigInteger(f.precision() * 33 / 10 + 1, rnd);
          BigInteger max = BigInteger.TEN.pow(f.precision());
          v = v.mod(max);
          yield rnd.nextBoolean() ? v.negate() : v;
        }
        case STRING -> STRINGS[rnd.nextInt(STRINGS.length)] + (rnd.nextBoolean() ? "" : Integer.toString(r));
        case BINARY -> {
          byte[] b = new byte[rnd.nextInt(9)];
          rnd.nextBytes(b);
          yield b;
        }
        default -> throw new AssertionError(f);
      };
    }

    private static ByteBuffer[] encode(ColumnarSchema.Field f, List<Object> vals, boolean nullable) {
      int rows = vals.size();
      ByteBuffer validity = null;
      if (nullable) {
        validity = le((rows + 7) / 8 + 3); // a few spare bytes: more than the rows need is fine
        for (int r = 0; r < rows; r++) {
          if (vals.get(r) != null) {
            validity.put(r / 8, (byte) (validity.get(r / 8) | (1 << (r % 8))));
          }
        }
      }
      ColumnType t = f.type();
      if (t.varWidth()) {
        List<byte[]> bs = new ArrayList<>();
        int total = 0;
        for (Object v : vals) {
          byte[] b = v == null ? new byte[0] : v instanceof String s ? s.getBytes(StandardCharsets.UTF_8) : (byte[]) v;
          bs.add(b);
          total += b.length;
        }
        ByteBuffer offsets = rows == 0 ? null : le(4 * (rows + 1));
        ByteBuffer data = le(total);
        int at = 0;
        for (int r = 0; r < rows; r++) {
          data.put(at, bs.get(r));
          at += bs.get(r).length;
          offsets.putInt(4 * (r + 1), at);
        }
        return new ByteBuffer[] {validity, offsets, data};
      }
      ByteBuffer data = le(rows * t.width());
      for (int r = 0; r < rows; r++) {
        Object v = vals.get(r);
        if (v == null) {
          continue; // a null's bytes are whatever: 0 here
        }
        int at = r * t.width();
        switch (t) {
          case BOOL8 -> data.put(at, (byte) ((Boolean) v ? 1 : 0));
          case INT8 -> data.put(at, (Byte) v);
          case INT16 -> data.putShort(at, (Short) v);
          case INT32, DATE32 -> data.putInt(at, (Integer) v);
          case INT64, TIMESTAMP_US -> data.putLong(at, (Long) v);
          case FLOAT32 -> data.putFloat(at, (Float) v);
          case FLOAT64 -> data.putDouble(at, (Double) v);
          case DECIMAL32 -> data.putInt(at, ((BigInteger) v).intValueExact());
          case DECIMAL64 -> data.putLong(at, ((BigInteger) v).longValueExact());
          case DECIMAL128 -> {
            BigInteger b = (BigInteger) v;
            data.putLong(at, b.longValue());
            data.putLong(at + 8, b.shiftRight(64).longValue());
          }
          default -> throw new AssertionError(t);
        }
      }
      return new ByteBuffer[] {validity, null, data};
    }

    /** The memfd bytes {@link #batch} places the buffers in: each on 64 bytes, plus a gap. */
    long memfdSize() {
      long n = 64;
      for (ByteBuffer[] bs : buffers) {
        for (ByteBuffer b : bs) {
          n += b == null ? 0 : (b.capacity() + 64 + 63) & -64;
        }
      }
      return n;
    }

    /**
     * The batch: of the heap buffers, or of copies filled into {@code mem}: the even columns
     * through {@code ColumnarMemfd.column} of {@code MemorySegment} slices (by reflection: the
     * tests compile for JDK 17), the odd ones through ByteBuffer views.
     */
    ColumnarBatch batch(ColumnarMemfd mem) throws ReflectiveOperationException {
      List<ColumnarBatch.Column> cols = new ArrayList<>();
      long at = 64; // nothing at 0: offsets into the memfd are not all 0
      Class<?> ms = mem == null ? null : Class.forName("java.lang.foreign.MemorySegment");
      for (int c = 0; c < buffers.size(); c++) {
        ByteBuffer[] bs = buffers.get(c);
        ByteBuffer[] put = new ByteBuffer[3];
        Object[] slices = new Object[3];
        for (int k = 0; k < 3; k++) {
          if (bs[k] == null) {
            continue;
          }
          if (mem == null) {
            put[k] = bs[k];
            continue;
          }
          put[k] = mem.buffer(at, bs[k].capacity());
          put[k].put(0, bs[k], 0, bs[k].capacity());
          Object seg = ColumnarMemfd.class.getMethod("segment").invoke(mem);
          slices[k] = ms.getMethod("asSlice", long.class, long.class).invoke(seg, at, (long) bs[k].capacity());
          at += (bs[k].capacity() + 64 + 63) & -64;
        }
        if (mem != null && c % 2 == 0) {
          cols.add((ColumnarBatch.Column)
              ColumnarMemfd.class.getMethod("column", ms, ms, ms).invoke(mem, slices));
        } else {
          cols.add(ColumnarBatch.Column.of(put[0], put[1], put[2]));
        }
      }
      return mem == null
          ? ColumnarBatch.of(SCHEMA, rows, cols, partitionRows)
          : mem.batch(SCHEMA, rows, cols, partitionRows);
    }
  }

  /** A JSON number as printed. */
  record Num(String raw) {}

  /** Just enough JSON for cat's rows: one flat object of strings, numbers, booleans and null. */
  static final class Json {
    private final String s;
    private int i;

    private Json(String s) {
      this.s = s;
    }

    static Map<String, Object> object(String line) {
      Json j = new Json(line);
      Map<String, Object> m = new java.util.LinkedHashMap<>();
      j.expect('{');
      if (j.peek() != '}') {
        do {
          String k = j.string();
          j.expect(':');
          m.put(k, j.value());
        } while (j.take(','));
      }
      j.expect('}');
      assertEquals(line.length(), j.i, "trailing bytes in " + line);
      return m;
    }

    private char peek() {
      return s.charAt(i);
    }

    private boolean take(char c) {
      if (i < s.length() && s.charAt(i) == c) {
        i++;
        return true;
      }
      return false;
    }

    private void expect(char c) {
      assertTrue(take(c), "want " + c + " at " + i + " of " + s);
    }

    private Object value() {
      char c = peek();
      if (c == '"') {
        return string();
      }
      for (String lit : new String[] {"null", "true", "false"}) {
        if (s.startsWith(lit, i)) {
          i += lit.length();
          return lit.equals("null") ? null : Boolean.valueOf(lit);
        }
      }
      int start = i;
      while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
        i++;
      }
      return new Num(s.substring(start, i));
    }

    private String string() {
      expect('"');
      StringBuilder b = new StringBuilder();
      while (true) {
        char c = s.charAt(i++);
        if (c == '"') {
          return b.toString();
        }
        if (c != '\\') {
          b.append(c);
          continue;
        }
        char e = s.charAt(i++);
        switch (e) {
          case 'n' -> b.append('\n');
          case 'r' -> b.append('\r');
          case 't' -> b.append('\t');
          case 'b' -> b.append('\b');
          case 'f' -> b.append('\f');
          case 'u' -> {
            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
            i += 4;
          }
          default -> b.append(e);
        }
      }
    }
  }
}
