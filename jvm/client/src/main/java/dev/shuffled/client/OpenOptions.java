package dev.shuffled.client;

import java.util.List;
import java.util.Objects;

/**
 * How one map output is written: codec and its parameters, checksum, data plane, and for kudo map
 * outputs the schema. Immutable; {@link #DEFAULTS} leaves codec, block size, level and checksum
 * to the daemon.
 *
 * @param codec the codec; {@link Codec#DEFAULT} for the daemon's
 * @param checksum the checksum; {@link ChecksumAlgorithm#DEFAULT} for the daemon's
 * @param plane the data plane; null for the client's ({@link ClientOptions#dataPlane()})
 * @param blockSize the lz4 or snappy block size in bytes (Spark's {@code
 *     spark.io.compression.lz4.blockSize}, {@code .snappy.blockSize}); 0 for the daemon's ({@code
 *     shuffled serve --block-size}). The daemon takes 64 B..32 MiB for lz4, 1 B..32 MiB for snappy,
 *     and refuses any but 0 for zstd and none
 * @param level the zstd level (Spark's {@code spark.io.compression.zstd.level}, 1..22); 0 for the
 *     daemon's (1). The daemon refuses any but 0 for lz4, snappy and none
 * @param kudoSchema null for an ordinary map output; else the map output is columnar in
 *     spark-rapids' kudo format (docs/protocol.md, OpenMapOutput {@code format} 1) with these
 *     columns, at most 16384. Such a map output takes no {@link ColumnarBatch}: open one with
 *     {@link ShuffledClient#openColumnarOutput} to write batches; this one commits empty partitions
 */
public record OpenOptions(
    Codec codec,
    ChecksumAlgorithm checksum,
    DataPlane plane,
    int blockSize,
    int level,
    List<SchemaField> kudoSchema) {
  /** The daemon's codec and checksum, the client's data plane. */
  public static final OpenOptions DEFAULTS =
      new OpenOptions(Codec.DEFAULT, ChecksumAlgorithm.DEFAULT, null);

  public OpenOptions {
    Objects.requireNonNull(codec, "codec");
    Objects.requireNonNull(checksum, "checksum");
    if (blockSize < 0 || blockSize > Wire.MAX_BLOCK_SIZE) {
      throw new IllegalArgumentException(
          "blockSize " + blockSize + ": want 0 (the daemon's) or 1.." + Wire.MAX_BLOCK_SIZE);
    }
    if (kudoSchema != null) {
      kudoSchema = List.copyOf(kudoSchema);
      if (kudoSchema.size() > Wire.MAX_COLUMNS) {
        throw new IllegalArgumentException(
            "kudoSchema: " + kudoSchema.size() + " fields exceed " + Wire.MAX_COLUMNS);
      }
    }
  }

  /** Options with this codec, checksum and data plane, the daemon's block size and level. */
  public OpenOptions(Codec codec, ChecksumAlgorithm checksum, DataPlane plane) {
    this(codec, checksum, plane, 0, 0, null);
  }

  /** Options with this codec and checksum and the client's data plane. */
  public static OpenOptions of(Codec codec, ChecksumAlgorithm checksum) {
    return new OpenOptions(codec, checksum, null);
  }

  /** These options with another codec. */
  public OpenOptions withCodec(Codec c) {
    return new OpenOptions(c, checksum, plane, blockSize, level, kudoSchema);
  }

  /** These options with another checksum. */
  public OpenOptions withChecksum(ChecksumAlgorithm c) {
    return new OpenOptions(codec, c, plane, blockSize, level, kudoSchema);
  }

  /**
   * These options with a data plane for this map output; {@link DataPlane#MEMFD} falls back to
   * inline where memfd is unavailable.
   */
  public OpenOptions withPlane(DataPlane p) {
    return new OpenOptions(codec, checksum, p, blockSize, level, kudoSchema);
  }

  /** These options with an lz4 or snappy block size in bytes; 0 for the daemon's. */
  public OpenOptions withBlockSize(int bytes) {
    return new OpenOptions(codec, checksum, plane, bytes, level, kudoSchema);
  }

  /** These options with a zstd level; 0 for the daemon's. */
  public OpenOptions withLevel(int zstdLevel) {
    return new OpenOptions(codec, checksum, plane, blockSize, zstdLevel, kudoSchema);
  }

  /** These options for a kudo map output of these columns; null for an ordinary one. */
  public OpenOptions withKudoSchema(List<SchemaField> schema) {
    return new OpenOptions(codec, checksum, plane, blockSize, level, schema);
  }
}
