// Decode reads and writes codec streams with the JVM classes that Spark's
// CompressionCodec builds, for codec's interop test.
//
// Usage: java Decode MANIFEST
//
// Each line of MANIFEST is one job:
//
//	decode KIND OUT IN          decode the concatenated streams in IN into OUT
//	encode KIND PARAM OUT IN... encode each IN as its own stream, appended to OUT
//
// KIND is lz4, zstd or snappy; PARAM is the block size (lz4, snappy) or the
// level (zstd). A job that fails prints "FAIL line N: ..." and the others go
// on; the exit status is 1 if any failed.

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;

import com.github.luben.zstd.NoPool;
import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import com.github.luben.zstd.ZstdOutputStreamNoFinalizer;
import net.jpountz.lz4.LZ4BlockInputStream;
import net.jpountz.lz4.LZ4BlockOutputStream;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.xxhash.XXHashFactory;
import org.xerial.snappy.SnappyInputStream;
import org.xerial.snappy.SnappyOutputStream;

public class Decode {
  static final int SEED = 0x9747b28c; // LZ4BlockOutputStream.DEFAULT_SEED
  static final int BUFFER = 32 * 1024; // spark.io.compression.zstd.bufferSize

  // As LZ4CompressionCodec.compressedInputStream: stopOnEmptyBlock false,
  // so that concatenated streams read as one.
  static InputStream lz4In(InputStream in, LZ4Factory f) {
    return new LZ4BlockInputStream(in, f.fastDecompressor(),
        XXHashFactory.fastestInstance().newStreamingHash32(SEED).asChecksum(), false);
  }

  static InputStream in(String kind, InputStream in) throws IOException {
    switch (kind) {
      case "lz4":
        return lz4In(in, LZ4Factory.fastestInstance());
      case "zstd":
        return new BufferedInputStream(new ZstdInputStreamNoFinalizer(in, NoPool.INSTANCE), BUFFER);
      case "snappy":
        return new SnappyInputStream(in);
    }
    throw new IllegalArgumentException("unknown kind " + kind);
  }

  static OutputStream out(String kind, int param, OutputStream out) throws IOException {
    switch (kind) {
      case "lz4":
        return new LZ4BlockOutputStream(out, param, LZ4Factory.fastestInstance().fastCompressor(),
            XXHashFactory.fastestInstance().newStreamingHash32(SEED).asChecksum(), false);
      case "zstd":
        return new BufferedOutputStream(
            new ZstdOutputStreamNoFinalizer(out, NoPool.INSTANCE).setLevel(param), BUFFER);
      case "snappy":
        return new SnappyOutputStream(out, param);
    }
    throw new IllegalArgumentException("unknown kind " + kind);
  }

  static byte[] readAll(InputStream in) throws IOException {
    try (InputStream s = in) {
      return s.readAllBytes();
    }
  }

  static void job(String[] f) throws IOException {
    switch (f[0]) {
      case "decode": {
        byte[] src = Files.readAllBytes(Paths.get(f[3]));
        byte[] got = readAll(in(f[1], new ByteArrayInputStream(src)));
        if (f[1].equals("lz4")) {
          // The pure-Java decoder must agree with the native one.
          byte[] safe = readAll(lz4In(new ByteArrayInputStream(src), LZ4Factory.safeInstance()));
          if (!Arrays.equals(got, safe)) {
            throw new IOException("native and Java lz4 decoders disagree");
          }
        }
        Files.write(Paths.get(f[2]), got);
        return;
      }
      case "encode": {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        for (int i = 4; i < f.length; i++) {
          // Each input is its own stream; closing one must not close buf.
          OutputStream o = out(f[1], Integer.parseInt(f[2]), new NonClosing(buf));
          o.write(Files.readAllBytes(Paths.get(f[i])));
          o.close();
        }
        Files.write(Paths.get(f[3]), buf.toByteArray());
        return;
      }
    }
    throw new IllegalArgumentException("unknown job " + f[0]);
  }

  static final class NonClosing extends OutputStream {
    private final OutputStream out;

    NonClosing(OutputStream out) {
      this.out = out;
    }

    @Override
    public void write(int b) throws IOException {
      out.write(b);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      out.write(b, off, len);
    }
  }

  public static void main(String[] args) throws IOException {
    List<String> lines = Files.readAllLines(Paths.get(args[0]));
    int failed = 0;
    for (int i = 0; i < lines.size(); i++) {
      try {
        job(lines.get(i).split(" "));
      } catch (Exception | Error e) {
        failed++;
        System.out.println("FAIL line " + (i + 1) + ": " + lines.get(i) + ": " + e);
      }
    }
    System.out.println("jobs " + lines.size() + " failed " + failed);
    System.exit(failed == 0 ? 0 : 1);
  }
}
