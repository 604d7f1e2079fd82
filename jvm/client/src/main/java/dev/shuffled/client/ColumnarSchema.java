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
 * {@code decimal} is {@code decimal(10,0)}), {@code string}, {@code binary}, the ANSI intervals
 * {@code interval U} and {@code interval U to V} (year, month: year-month, int32 months; day,
 * hour, minute, second: day-time, int64 microseconds), {@code void}, and the DDL aliases {@code
 * byte}, {@code short}, {@code integer}, {@code long}, {@code real}, {@code dec}, {@code numeric};
 * and nested, to at most 256 levels: {@code array<T>} (a list whose child is named {@code
 * element}), {@code struct<a:T,b:U>} (also {@code struct<a T>}; a name may be in backticks, a
 * doubled backtick standing for one) and {@code map<K,V>} (a list of key-value structs: its child
 * {@code entries}, a struct of {@code key} and {@code value}), as cuDF lays them out. Calendar
 * intervals, {@code char}, {@code varchar} and {@code variant} are refused.
 *
 * @param fields the columns, in order; at most 16384
 */
public record ColumnarSchema(List<Field> fields) {
  public ColumnarSchema {
    fields = List.copyOf(fields);
    long n = 0;
    for (Field f : fields) {
      n += f.flatSize();
    }
    if (n > Wire.MAX_COLUMNS) {
      throw new IllegalArgumentException(
          "schema: " + n + " columns, children included, exceed " + Wire.MAX_COLUMNS);
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
   *     map's key-value struct), in the order their buffers follow the parent's, as {@link
   *     #of} derives them from {@code sparkType}; empty for every flat type
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
      Parsed want = parse(name, sparkType, 0);
      Parsed got = shape(name, type, precision, scale, children);
      if (!want.equals(got)) {
        throw new IllegalArgumentException(
            "column " + name + ": sparkType " + sparkType + " is " + want + ", not " + got);
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
      return of(parse(name, sparkType, 0));
    }

    private static Field of(Parsed p) {
      List<Field> kids = new ArrayList<>(p.children.size());
      for (Parsed c : p.children) {
        kids.add(of(c));
      }
      return new Field(p.name, p.sparkType, p.type, p.precision, p.scale, kids);
    }

    /** The columns it stands for on the wire: itself and its children at every depth. */
    int flatSize() {
      int n = 1;
      for (Field c : children) {
        n += c.flatSize();
      }
      return n;
    }

    /**
     * A Spark type's physical type, precision, scale and children (sparkType is not compared: a
     * child's is what {@link #of} cut from its parent's).
     */
    private record Parsed(
        String name, String sparkType, ColumnType type, int precision, int scale, List<Parsed> children) {
      @Override
      public boolean equals(Object o) {
        return o instanceof Parsed p && name.equals(p.name) && type == p.type && precision == p.precision
            && scale == p.scale && children.equals(p.children);
      }

      @Override
      public int hashCode() {
        return Objects.hash(name, type, precision, scale, children);
      }

      @Override
      public String toString() {
        String t = type.decimal() ? type.label() + "(" + precision + "," + scale + ")" : type.label();
        if (children.isEmpty()) {
          return t;
        }
        StringBuilder b = new StringBuilder(t).append('<');
        for (int i = 0; i < children.size(); i++) {
          b.append(i == 0 ? "" : ",").append(children.get(i).name).append(':').append(children.get(i));
        }
        return b.append('>').toString();
      }
    }

    private static Parsed shape(String name, ColumnType type, int precision, int scale, List<Field> children) {
      List<Parsed> kids = new ArrayList<>(children.size());
      for (Field c : children) {
        kids.add(shape(c.name, c.type, c.precision, c.scale, c.children));
      }
      return new Parsed(name, "", type, precision, scale, kids);
    }

    @Override
    public String toString() {
      return (name.isEmpty() ? "\"\"" : name) + " " + sparkType;
    }

    private static final Pattern DECIMAL =
        Pattern.compile("(?:decimal|dec|numeric)(?:\\(\\s*(\\d{1,9})\\s*(?:,\\s*(\\d{1,9})\\s*)?\\))?");

    /** The deepest nesting a type may have, as the daemon reads it. */
    static final int MAX_DEPTH = 256;

    private static Parsed parse(String name, String sparkType, int depth) {
      if (depth > MAX_DEPTH) {
        throw new IllegalArgumentException(
            "column " + name + ": sparkType nested deeper than " + MAX_DEPTH + " levels");
      }
      String orig = sparkType.trim();
      String t = orig.toLowerCase(Locale.ROOT);
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
            case "void" -> ColumnType.VOID;
            default -> interval(t);
          };
      if (ct != null) {
        return new Parsed(name, sparkType, ct, 0, 0, List.of());
      }
      Parsed nested = nested(name, sparkType, orig, t, depth);
      if (nested != null) {
        return nested;
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
        return new Parsed(name, sparkType, d, p, s, List.of());
      }
      if (t.startsWith("interval") || t.startsWith("calendarinterval") || t.startsWith("char(")
          || t.startsWith("varchar(") || t.startsWith("variant")) {
        throw new IllegalArgumentException(
            "column " + name + ": sparkType " + sparkType + ": calendar intervals, char, varchar and"
                + " variant are not carried");
      }
      throw new IllegalArgumentException("column " + name + ": sparkType " + sparkType + ": no Spark type");
    }

    /** {@code interval U} or {@code interval U to V} of one kind (t lower case), else null. */
    private static ColumnType interval(String t) {
      String[] w = t.split("\\s+");
      if (!w[0].equals("interval") || !(w.length == 2 || (w.length == 4 && w[2].equals("to")))) {
        return null;
      }
      ColumnType a = intervalUnit(w[1]);
      if (a == null || (w.length == 4 && intervalUnit(w[3]) != a)) {
        return null;
      }
      return a;
    }

    private static ColumnType intervalUnit(String u) {
      return switch (u) {
        case "year", "month" -> ColumnType.INTERVAL_YM;
        case "day", "hour", "minute", "second" -> ColumnType.INTERVAL_DT;
        default -> null;
      };
    }

    /** array, map or struct (orig with its case, t lower case), else null. */
    private static Parsed nested(String name, String sparkType, String orig, String t, int depth) {
      String kind = null;
      for (String k : new String[] {"array", "map", "struct"}) {
        if (t.startsWith(k) && t.endsWith(">") && t.substring(k.length()).trim().startsWith("<")) {
          kind = k;
        }
      }
      if (kind == null) {
        return null;
      }
      String inner = orig.substring(orig.indexOf('<') + 1, orig.lastIndexOf('>'));
      List<String> parts = splitTopLevel(inner);
      String where = "column " + name + ": sparkType " + orig + ": ";
      switch (kind) {
        case "array" -> {
          if (parts.size() != 1) {
            throw new IllegalArgumentException(where + "array<...> takes one element type, got " + parts.size());
          }
          return new Parsed(name, sparkType, ColumnType.LIST, 0, 0, List.of(parse("element", parts.get(0).trim(), depth + 1)));
        }
        case "map" -> {
          if (parts.size() != 2) {
            throw new IllegalArgumentException(
                where + "map<...> takes a key and a value type, got " + parts.size() + " types");
          }
          Parsed k = parse("key", parts.get(0).trim(), depth + 1);
          Parsed v = parse("value", parts.get(1).trim(), depth + 1);
          String kv = "struct<key:" + parts.get(0).trim() + ",value:" + parts.get(1).trim() + ">";
          Parsed entries = new Parsed("entries", kv, ColumnType.STRUCT, 0, 0, List.of(k, v));
          return new Parsed(name, sparkType, ColumnType.MAP, 0, 0, List.of(entries));
        }
        default -> {
          List<Parsed> kids = new ArrayList<>();
          if (!inner.trim().isEmpty()) {
            for (int i = 0; i < parts.size(); i++) {
              String[] nt = splitNameType(parts.get(i).trim());
              if (nt == null) {
                throw new IllegalArgumentException(
                    where + "struct field " + i + ": want \"name:type\" or \"name type\", got " + parts.get(i).trim());
              }
              kids.add(parse(nt[0], nt[1], depth + 1));
            }
          }
          return new Parsed(name, sparkType, ColumnType.STRUCT, 0, 0, kids);
        }
      }
    }

    /** Splits s at the commas outside {@code <>} and {@code ()}. */
    private static List<String> splitTopLevel(String s) {
      List<String> parts = new ArrayList<>();
      int depth = 0;
      int start = 0;
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        if (c == '<' || c == '(') {
          depth++;
        } else if (c == '>' || c == ')') {
          depth--;
        } else if (c == ',' && depth == 0) {
          parts.add(s.substring(start, i));
          start = i + 1;
        }
      }
      parts.add(s.substring(start));
      return parts;
    }

    /**
     * "name:type" or "name type", the name perhaps in backticks (a doubled backtick standing for
     * one): {name, type}, or null.
     */
    private static String[] splitNameType(String part) {
      String n;
      String rest;
      if (part.startsWith("`")) {
        StringBuilder b = new StringBuilder();
        int i = 1;
        for (; i < part.length(); i++) {
          char c = part.charAt(i);
          if (c == '`') {
            if (i + 1 < part.length() && part.charAt(i + 1) == '`') {
              b.append('`');
              i++;
              continue;
            }
            break;
          }
          b.append(c);
        }
        if (i >= part.length()) {
          return null;
        }
        n = b.toString();
        rest = part.substring(i + 1).trim();
      } else {
        int end = 0;
        while (end < part.length() && ":  \t".indexOf(part.charAt(end)) < 0) {
          end++;
        }
        if (end == part.length()) {
          return null;
        }
        n = part.substring(0, end);
        rest = part.substring(end).trim();
      }
      if (rest.startsWith(":")) {
        rest = rest.substring(1).trim();
      }
      return rest.isEmpty() ? null : new String[] {n, rest};
    }
  }
}
