package dev.shuffled.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;

import net.jpountz.lz4.LZ4Compressor;
import net.jpountz.lz4.LZ4Factory;

/**
 * lz4-java's fast compressor (the native one where its JNI library loads, as Spark's
 * LZ4CompressionCodec takes it) on a file's bytes, in blocks of 32 KiB, as LZ4BlockOutputStream
 * cuts them: the JVM side of codec's BenchmarkLZ4Block on the same bytes.
 *
 * <p>Usage: {@code CodecBench FILE [REPS]}. Per repetition it prints one line of JSON with the
 * input MB per second of the thread's CPU time (cpu_mb_s, as the Go benchmark's cpu-MB/s) and
 * of wall-clock time, after an untimed pass that lets the JIT compile.
 */
public final class CodecBench {
  private CodecBench() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 1 || args.length > 2) {
      throw new IllegalArgumentException("usage: CodecBench FILE [REPS]");
    }
    byte[] src = Files.readAllBytes(Path.of(args[0]));
    int reps = args.length == 2 ? Integer.parseInt(args[1]) : 5;
    if (src.length == 0 || reps < 1) {
      throw new IllegalArgumentException("want a non-empty file and REPS >= 1, got " + src.length
          + " bytes and " + reps);
    }
    int block = 32 << 10;
    LZ4Compressor c = LZ4Factory.fastestInstance().fastCompressor();
    byte[] dst = new byte[c.maxCompressedLength(block)];
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    // Enough passes per repetition for about 100 MB of input.
    int passes = Math.max(1, (int) (100e6 / src.length));
    long out = pass(c, src, dst, block);
    for (int r = 0; r < reps; r++) {
      long cpu0 = mx.getCurrentThreadCpuTime();
      long t0 = System.nanoTime();
      for (int p = 0; p < passes; p++) {
        out = pass(c, src, dst, block);
      }
      double wall = (System.nanoTime() - t0) / 1e9;
      double cpu = (mx.getCurrentThreadCpuTime() - cpu0) / 1e9;
      double mb = (double) src.length * passes / 1e6;
      System.out.printf(Locale.ROOT,
          "{\"compressor\":\"%s\",\"bytes\":%d,\"passes\":%d,\"cpu_mb_s\":%.1f,\"mb_s\":%.1f,"
              + "\"ratio\":%.3f}%n",
          c.getClass().getSimpleName(), src.length, passes, mb / cpu, mb / wall,
          (double) src.length / out);
    }
    Arrays.fill(dst, (byte) 0);
  }

  private static long pass(LZ4Compressor c, byte[] src, byte[] dst, int block) {
    long out = 0;
    for (int off = 0; off < src.length; off += block) {
      out += c.compress(src, off, Math.min(block, src.length - off), dst, 0, dst.length);
    }
    return out;
  }
}
