package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import com.github.luben.zstd.ZstdInputStream;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.zip.Adler32;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;
import net.jpountz.lz4.LZ4BlockInputStream;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.xxhash.XXHashFactory;
import org.xerial.snappy.SnappyInputStream;

/**
 * A small reader of Spark's shuffle files, as Spark's IndexShuffleBlockResolver and the reducer's
 * wrapStream read them: index (numPartitions+1 big-endian longs), data, and checksum
 * (numPartitions big-endian longs), decompressed with the codec libraries Spark ships.
 */
final class SparkFiles {
  private SparkFiles() {}

  /** One committed map output, read from disk. */
  record Output(long[] lengths, long[] checksums, byte[][] onDisk) {}

  /** Spark's ExecutorDiskUtils: the file's path under localDirs with subDirs sub-dirs each. */
  static Path hashed(List<Path> localDirs, int subDirs, String name) {
    int h = name.hashCode();
    h = h == Integer.MIN_VALUE ? 0 : Math.abs(h);
    int dir = h % localDirs.size();
    int sub = (h / localDirs.size()) % subDirs;
    return localDirs.get(dir).resolve(String.format("%02x", sub)).resolve(name);
  }

  static String base(int shuffle, long map) {
    return "shuffle_" + shuffle + "_" + map + "_0";
  }

  /** Reads the index, data and (unless algo is NONE) checksum file from {@code dir}. */
  static Output read(Path dir, int shuffle, long map, ChecksumAlgorithm algo) throws IOException {
    String b = base(shuffle, map);
    return read(dir.resolve(b + ".index"), dir.resolve(b + ".data"),
        algo == ChecksumAlgorithm.NONE ? null : dir.resolve(b + ".checksum." + algo.wireName()));
  }

  static Output read(Path index, Path data, Path checksum) throws IOException {
    long[] offsets = longs(Files.readAllBytes(index));
    assertTrue(offsets.length >= 2, "index of " + offsets.length + " offsets");
    assertEquals(0, offsets[0], "index[0]");
    byte[] bytes = Files.readAllBytes(data);
    assertEquals(bytes.length, offsets[offsets.length - 1], "data file length = last index offset");
    int n = offsets.length - 1;
    long[] lengths = new long[n];
    byte[][] parts = new byte[n][];
    for (int p = 0; p < n; p++) {
      lengths[p] = offsets[p + 1] - offsets[p];
      assertTrue(lengths[p] >= 0, "partition " + p + " length " + lengths[p]);
      parts[p] = java.util.Arrays.copyOfRange(bytes, (int) offsets[p], (int) offsets[p + 1]);
    }
    long[] sums = new long[0];
    if (checksum != null) {
      sums = longs(Files.readAllBytes(checksum));
      assertEquals(n, sums.length, "checksum file entries");
    } else {
      assertFalse(Files.exists(data.resolveSibling(data.getFileName().toString().replace(".data", ".checksum.ADLER32"))));
    }
    return new Output(lengths, sums, parts);
  }

  private static long[] longs(byte[] b) throws IOException {
    assertEquals(0, b.length % 8, "file of " + b.length + " bytes is not whole longs");
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(b));
    long[] v = new long[b.length / 8];
    for (int i = 0; i < v.length; i++) {
      v[i] = in.readLong();
    }
    return v;
  }

  /** Spark's checksum of one partition's on-disk bytes. */
  static long checksum(ChecksumAlgorithm algo, byte[] onDisk) {
    Checksum c =
        switch (algo) {
          case ADLER32 -> new Adler32();
          case CRC32 -> new CRC32();
          case CRC32C -> new CRC32C();
          default -> throw new IllegalArgumentException(algo.name());
        };
    c.update(onDisk, 0, onDisk.length);
    return c.getValue();
  }

  /** Decompresses one partition's on-disk bytes as Spark's codec input streams do. */
  @SuppressWarnings("deprecation") // the constructor Spark 3.5 calls; still there in Spark 4's lz4-java
  static byte[] decompress(Codec codec, byte[] onDisk) throws IOException {
    if (onDisk.length == 0) {
      return onDisk; // Spark never opens a stream on an empty block
    }
    InputStream raw = new ByteArrayInputStream(onDisk);
    InputStream in =
        switch (codec) {
          case NONE -> raw;
          case LZ4 -> new LZ4BlockInputStream(
              raw,
              LZ4Factory.fastestInstance().fastDecompressor(),
              XXHashFactory.fastestInstance().newStreamingHash32(0x9747b28c).asChecksum(),
              false); // Spark: continue after an end mark (concatenated streams)
          case ZSTD -> new ZstdInputStream(raw);
          case SNAPPY -> new SnappyInputStream(raw);
          default -> throw new IllegalArgumentException(codec.name());
        };
    try (in) {
      return in.readAllBytes();
    }
  }
}
