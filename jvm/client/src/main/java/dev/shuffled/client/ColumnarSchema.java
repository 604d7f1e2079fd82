package dev.shuffled.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The columns of a columnar map output ({@link ShuffledClient#openColumnarOutput}) and of every
 * {@link ColumnarBatch} written to it: per column its name and Spark type, from which follow its
 * {@link ColumnType} and, for decimals, precision and scale. Immutable.
 *
 * <p>Spark types are spelled as Spark's {@code DataType.simpleString} (case-insensitive, spaces
 * around ignored): {@code boolean}, {@code tinyint}, {@code smallint}, {@code int}, {@code bigint},
 * {@code float}, {@code double}, {@code date}, {@code timestamp}, {@code timestamp_ltz}, {@code
 * timestamp_ntz}, {@code decimal(p,s)} (p 1..38, s 0..p; {@code decimal(p)} is scale 0, bare
 * {@code decimal} is {@code decimal(10,0)}), {@code string}, {@code binary}, and the DDL aliases
 * {@code byte}, {@code short}, {@code integer}, {@code long}, {@code real}, {@code dec}, {@code
 * numeric}. Nested types ({@code array<..>}, {@code struct<..>}, {@code map<..>}), intervals and
 * {@code void} are refused: this client does not lay them out yet.
 *
 * @param fields the columns, in order; at most 16384
 */
public record ColumnarSchema(List<Field> fields) {
  public ColumnarSchema {
    fields = List.copyOf(fields);
    if (fields.size() > Wire.MAX_COLUMNS) {
      throw new IllegalArgumentException(
          "schema: " + fields.size() + " columns exceed " + Wire.MAX_COLUMNS);
    }
  }

  /** A schema of these columns. */
  public static ColumnarSchema of(Field... fields) {
    return new ColumnarSchema(List.of(fields));
  }

  /** The number of columns. */
  public int size() {
    return fields.size();
  }

  /** Column {@code i}. */
  public Field field(int i) {
    return fields.get(i);
  }

  /** The schema a kudo map output declares at Open (OpenMapOutput {@code schema}). */
  List<SchemaField> wireFields() {
    List<SchemaField> out = new ArrayList<>(fields.size());
    for (Field f : fields) {
      out.add(new SchemaField(f.name(), f.sparkType()));
    }
    return out;
  }

  /**
   * One column: its name and Spark type, and what that type means for its buffers.
   *
   * @param name at most 255 bytes of UTF-8, may be empty
   * @param sparkType as given, e.g. {@code decimal(12,2)}
   * @param type the physical type its buffers hold
   * @param precision a decimal's precision, else 0
   * @param scale a decimal's scale, else 0
   * @param children the child columns of a nested type (an array's element, a struct's fields, a
   *     map's key-value struct), in the order their buffers follow the parent's; empty for every
   *     flat type, the only kind this client lays out yet
   */
  public record Field(
      String name, String sparkType, ColumnType type, int precision, int scale, List<Field> children) {
    public Field {
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(sparkType, "sparkType");
      Objects.requireNonNull(type, "type");
      children = List.copyOf(children);
      String bad = Check.text(name, Wire.MAX_NAME);
      if (bad != null) {
        throw new IllegalArgumentException("column name: " + bad);
      }
      bad = sparkType.isEmpty() ? "empty" : Check.text(sparkType, Wire.MAX_SPARK_TYPE);
      if (bad != null) {
        throw new IllegalArgumentException("column " + name + ": sparkType: " + bad);
      }
      Parsed want = parse(name, sparkType);
      Parsed got = new Parsed(type, precision, scale);
      if (!want.equals(got)) {
        throw new IllegalArgumentException(
            "column " + name + ": sparkType " + sparkType + " is " + want + ", not " + got);
      }
      if (!children.isEmpty()) {
        throw new IllegalArgumentException(
            "column " + name + ": children: " + children.size() + " for flat type " + sparkType
                + ", want none");
      }
    }

    /**
     * The column {@code name} of Spark type {@code sparkType}.
     *
     * @throws IllegalArgumentException naming the column for a type that is no Spark type or one
     *     this client cannot lay out
     */
    public static Field of(String name, String sparkType) {
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(sparkType, "sparkType");
      Parsed f = parse(name, sparkType);
      return new Field(name, sparkType, f.type, f.precision, f.scale, List.of());
    }

    /** A Spark type's physical type, precision and scale. */
    private record Parsed(ColumnType type, int precision, int scale) {
      @Override
      public String toString() {
        return type.decimal() ? type.label() + "(" + precision + "," + scale + ")" : type.label();
      }
    }

    @Override
    public String toString() {
      return (name.isEmpty() ? "\"\"" : name) + " " + sparkType;
    }

    private static final Pattern DECIMAL =
        Pattern.compile("(?:decimal|dec|numeric)(?:\\(\\s*(\\d{1,9})\\s*(?:,\\s*(\\d{1,9})\\s*)?\\))?");

    private static Parsed parse(String name, String sparkType) {
      String t = sparkType.trim().toLowerCase(Locale.ROOT);
      ColumnType ct =
          switch (t) {
            case "boolean" -> ColumnType.BOOL8;
            case "tinyint", "byte" -> ColumnType.INT8;
            case "smallint", "short" -> ColumnType.INT16;
            case "int", "integer" -> ColumnType.INT32;
            case "bigint", "long" -> ColumnType.INT64;
            case "float", "real" -> ColumnType.FLOAT32;
            case "double" -> ColumnType.FLOAT64;
            case "date" -> ColumnType.DATE32;
            case "timestamp", "timestamp_ltz", "timestamp_ntz" -> ColumnType.TIMESTAMP_US;
            case "string" -> ColumnType.STRING;
            case "binary" -> ColumnType.BINARY;
            default -> null;
          };
      if (ct != null) {
        return new Parsed(ct, 0, 0);
      }
      Matcher m = DECIMAL.matcher(t);
      if (m.matches()) {
        int p = m.group(1) == null ? 10 : Integer.parseInt(m.group(1));
        int s = m.group(2) == null ? 0 : Integer.parseInt(m.group(2));
        if (p < 1 || p > 38 || s > p) {
          throw new IllegalArgumentException(
              "column " + name + ": sparkType " + sparkType + ": want precision 1..38, scale 0..precision");
        }
        ColumnType d = p <= 9 ? ColumnType.DECIMAL32 : p <= 18 ? ColumnType.DECIMAL64 : ColumnType.DECIMAL128;
        return new Parsed(d, p, s);
      }
      if (t.startsWith("array<") || t.startsWith("struct<") || t.startsWith("map<")
          || t.startsWith("interval") || t.startsWith("calendarinterval") || t.startsWith("void")
          || t.startsWith("null") || t.startsWith("char(") || t.startsWith("varchar(")
          || t.startsWith("variant")) {
        throw new IllegalArgumentException(
            "column " + name + ": sparkType " + sparkType + ": this client lays out flat types only"
                + " (nested types, intervals and void not yet)");
      }
      throw new IllegalArgumentException("column " + name + ": sparkType " + sparkType + ": no Spark type");
    }
  }
}
