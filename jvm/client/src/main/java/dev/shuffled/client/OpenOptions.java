package dev.shuffled.client;

import java.util.Objects;

/**
 * How one map output is written: codec and checksum. The codec's block size and zstd level are
 * the daemon's settings ({@code shuffled serve --block-size}; zstd level 1, as Spark), not the
 * protocol's. Immutable; {@link #DEFAULTS} leaves both to the daemon.
 *
 * @param codec the codec; {@link Codec#DEFAULT} for the daemon's
 * @param checksum the checksum; {@link ChecksumAlgorithm#DEFAULT} for the daemon's
 * @param plane the data plane; null for the client's ({@link ClientOptions#dataPlane()})
 */
public record OpenOptions(Codec codec, ChecksumAlgorithm checksum, DataPlane plane) {
  /** The daemon's codec and checksum, the client's data plane. */
  public static final OpenOptions DEFAULTS =
      new OpenOptions(Codec.DEFAULT, ChecksumAlgorithm.DEFAULT, null);

  public OpenOptions {
    Objects.requireNonNull(codec, "codec");
    Objects.requireNonNull(checksum, "checksum");
  }

  /** Options with this codec and checksum and the client's data plane. */
  public static OpenOptions of(Codec codec, ChecksumAlgorithm checksum) {
    return new OpenOptions(codec, checksum, null);
  }

  /** These options with another codec. */
  public OpenOptions withCodec(Codec c) {
    return new OpenOptions(c, checksum, plane);
  }

  /** These options with another checksum. */
  public OpenOptions withChecksum(ChecksumAlgorithm c) {
    return new OpenOptions(codec, c, plane);
  }

  /**
   * These options with a data plane for this map output; {@link DataPlane#MEMFD} falls back to
   * inline where memfd is unavailable.
   */
  public OpenOptions withPlane(DataPlane p) {
    return new OpenOptions(codec, checksum, p);
  }
}
