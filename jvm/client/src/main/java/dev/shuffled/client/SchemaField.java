package dev.shuffled.client;

import java.util.Objects;

/**
 * One column of a kudo map output's schema (docs/protocol.md, OpenMapOutput {@code schema}).
 *
 * @param name the column's name, at most 255 bytes of UTF-8, may be empty
 * @param sparkType Spark's {@code DataType.simpleString} of the column ({@code bigint}, {@code
 *     string}, {@code decimal(12,2)}, ...), 1..1024 bytes of UTF-8
 */
public record SchemaField(String name, String sparkType) {
  public SchemaField {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(sparkType, "sparkType");
    String bad = Check.text(name, Wire.MAX_NAME);
    if (bad != null) {
      throw new IllegalArgumentException("schema field name: " + bad);
    }
    bad = sparkType.isEmpty() ? "empty" : Check.text(sparkType, Wire.MAX_SPARK_TYPE);
    if (bad != null) {
      throw new IllegalArgumentException("schema field " + name + " sparkType: " + bad);
    }
  }
}
