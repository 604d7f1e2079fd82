package dev.shuffled.client;

/** How the daemon serializes a columnar map output's records (OpenMapOutput {@code format}). */
public enum ColumnarFormat {
  /** The daemon's own columnar blocks (docs/format.md section 2). */
  SHFC(Wire.FORMAT_SHFC),
  /** spark-rapids' kudo tables (docs/format.md section 7), which its reducers read. */
  KUDO(Wire.FORMAT_KUDO);

  final int wire;

  ColumnarFormat(int wire) {
    this.wire = wire;
  }
}
