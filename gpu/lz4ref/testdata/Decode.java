// Decode reads lz4-java block streams with every decompressor lz4-java
// offers, for lz4ref's interop test: LZ4BlockInputStream over the fast
// decompressor of the JNI, pure-Java safe and unsafe factories, and each
// compressed block through each factory's safe decompressor.
//
// Usage: java Decode MANIFEST
//
// Each line of MANIFEST is "IN OUT": the concatenated streams of IN are
// decoded, as Spark's LZ4CompressionCodec reads them (stopOnEmptyBlock
// false), by each decompressor; all must agree, and the bytes go to OUT.
// A line that fails prints "FAIL line N: ..." and the others go on; the
// exit status is 1 if any failed.

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import net.jpountz.lz4.LZ4BlockInputStream;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.xxhash.XXHashFactory;

public class Decode {
  static final int SEED = 0x9747b28c; // LZ4BlockOutputStream.DEFAULT_SEED

  static byte[] read(InputStream in) throws IOException {
    try (InputStream s = in) {
      return s.readAllBytes();
    }
  }

  static List<byte[]> decodeAll(byte[] src) throws IOException {
    List<byte[]> out = new ArrayList<>();
    LZ4Factory[] factories = {
      LZ4Factory.fastestInstance(), LZ4Factory.safeInstance(), LZ4Factory.unsafeInstance()
    };
    for (LZ4Factory f : factories) {
      out.add(read(new LZ4BlockInputStream(new ByteArrayInputStream(src), f.fastDecompressor(),
          XXHashFactory.fastestInstance().newStreamingHash32(SEED).asChecksum(), false)));
      out.add(safeDecode(src, f));
    }
    return out;
  }

  static int le32(byte[] b, int off) {
    return (b[off] & 0xff) | (b[off + 1] & 0xff) << 8 | (b[off + 2] & 0xff) << 16 | (b[off + 3] & 0xff) << 24;
  }

  // safeDecode walks the framing itself and decodes every compressed block
  // with f's safe decompressor, which checks every bound of the block.
  static byte[] safeDecode(byte[] src, LZ4Factory f) throws IOException {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    int off = 0;
    while (off < src.length) {
      int method = src[off + 8] & 0xf0;
      int comp = le32(src, off + 9), orig = le32(src, off + 13);
      byte[] block = new byte[orig];
      if (method == 0x20) {
        int n = f.safeDecompressor().decompress(src, off + 21, comp, block, 0, orig);
        if (n != orig) {
          throw new IOException("block at " + off + " decodes to " + n + " bytes, header says " + orig);
        }
      } else {
        System.arraycopy(src, off + 21, block, 0, orig);
      }
      int sum = XXHashFactory.safeInstance().hash32().hash(block, 0, orig, SEED) & 0x0FFFFFFF;
      if (orig > 0 && sum != le32(src, off + 17)) {
        throw new IOException("block at " + off + ": checksum mismatch");
      }
      out.write(block);
      off += 21 + comp;
    }
    return out.toByteArray();
  }

  public static void main(String[] args) throws IOException {
    List<String> lines = Files.readAllLines(Paths.get(args[0]));
    int failed = 0;
    for (int i = 0; i < lines.size(); i++) {
      String[] f = lines.get(i).trim().split(" ");
      try {
        List<byte[]> got = decodeAll(Files.readAllBytes(Paths.get(f[0])));
        for (int k = 1; k < got.size(); k++) {
          if (!Arrays.equals(got.get(0), got.get(k))) {
            throw new IOException("decompressor " + k + " disagrees with the first");
          }
        }
        Files.write(Paths.get(f[1]), got.get(0));
      } catch (Exception e) {
        failed++;
        System.out.println("FAIL line " + (i + 1) + ": " + f[0] + ": " + e);
      }
    }
    System.out.println(lines.size() - failed + " of " + lines.size() + " streams decoded");
    System.exit(failed == 0 ? 0 : 1);
  }
}
