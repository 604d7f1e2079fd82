package dev.shuffled.bench;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.RandomAccessFile;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import java.util.zip.Adler32;

import net.jpountz.lz4.LZ4BlockOutputStream;
import net.jpountz.lz4.LZ4Compressor;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.xxhash.XXHashFactory;

/**
 * A model of spark-rapids' multithreaded shuffle writer, V2 (the three-stage pipeline of
 * RapidsShuffleThreadedWriter: a task thread, a shared pool of writer threads, a merger thread
 * per batch), writing Spark's map output files from the input that
 * {@code shuffled-loadgen --dump-input} writes.
 *
 * <p>Per map task, on the task's own thread, for each batch and each partition in order, for
 * each record (at most record_size bytes of the partition's slice): acquire the record's bytes
 * from a limiter shared by all tasks (the bytes in flight), then queue its compression on the
 * writer pool. A writer thread compresses the record as one lz4 stream, the way Spark's
 * LZ4CompressionCodec wraps a stream (LZ4BlockOutputStream, the fastest LZ4Factory's fast
 * compressor, the fastest XXHashFactory's streaming xxHash32), into the partition's buffer. The
 * batch's merger thread waits for partition 0's records, then 1's, and so on, appends each
 * partition's bytes to the batch's partial file and releases the records' bytes. A partial file
 * is a growable buffer in memory ({@code memory}: MEMORY_WITH_SPILL that never spills) or a file
 * written through a buffer ({@code file}: FILE_ONLY). At the end of a task: one batch: its
 * partial file becomes the data file (written out, if in memory); several batches: a final merge
 * copies each partition of each partial file, in order, into a new data file. Then the index
 * (partitions+1 big-endian longs) and the ADLER32 checksum file (one big-endian long per
 * partition, over the compressed bytes), each written to a temporary name and renamed, as
 * Spark commits.
 *
 * <p>Usage: {@code WriterModel --input DIR --output DIR [--mode memory|file] [--threads 2]
 * [--limit-mib 128] [--concurrency 2] [--warmup 1]}. It prints one line of JSON.
 */
public final class WriterModel {
  private static final int TEMP_BUFFER = 32 << 10; // spark.shuffle.file.buffer

  private final Input in;
  private final boolean memory;
  private final ExecutorService writers;
  private final ExecutorService mergers = Executors.newCachedThreadPool(daemon("merger"));
  private final Semaphore limiter;
  private final int limitKiB;
  private final LZ4Compressor compressor = LZ4Factory.fastestInstance().fastCompressor();
  private final XXHashFactory xxhash = XXHashFactory.fastestInstance();

  private WriterModel(Input in, boolean memory, int threads, long limitBytes) {
    this.in = in;
    this.memory = memory;
    this.writers = Executors.newFixedThreadPool(threads, daemon("writer"));
    // The limiter counts KiB, so that a semaphore's int holds any limit.
    this.limitKiB = (int) Math.min(Integer.MAX_VALUE, limitBytes >> 10);
    this.limiter = new Semaphore(limitKiB);
  }

  private static java.util.concurrent.ThreadFactory daemon(String name) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, name + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  /** The dumped input: batches in memory, as the executor holds them after the GPU. */
  static final class Input {
    int partitions;
    int tasks;
    int blockSize;
    int recordSize;
    long serialized;
    byte[][] batches;
    long[][] offsets;
    int[][] taskBatches;

    static Input read(Path dir) throws IOException {
      Properties p = new Properties();
      try (var r = Files.newBufferedReader(dir.resolve("input.properties"))) {
        p.load(r);
      }
      Input in = new Input();
      if (!"1".equals(p.getProperty("format"))) {
        throw new IOException("input.properties: format " + p.getProperty("format") + ", want 1");
      }
      if (!"lz4".equals(p.getProperty("codec")) || !"ADLER32".equals(p.getProperty("checksum"))) {
        throw new IOException("input.properties: codec " + p.getProperty("codec") + ", checksum "
            + p.getProperty("checksum") + "; the model writes lz4 and ADLER32 only");
      }
      in.partitions = intProp(p, "partitions");
      in.tasks = intProp(p, "tasks");
      in.blockSize = intProp(p, "block_size");
      in.recordSize = intProp(p, "record_size");
      in.serialized = Long.parseLong(p.getProperty("serialized_bytes", "-1"));
      int pool = intProp(p, "pool_batches");
      in.batches = new byte[pool][];
      in.offsets = new long[pool][];
      for (int j = 0; j < pool; j++) {
        in.batches[j] = Files.readAllBytes(dir.resolve("batch-" + j + ".bin"));
        ByteBuffer ob = ByteBuffer.wrap(Files.readAllBytes(dir.resolve("batch-" + j + ".offsets")))
            .order(ByteOrder.LITTLE_ENDIAN);
        if (ob.remaining() != 8L * (in.partitions + 1)) {
          throw new IOException("batch-" + j + ".offsets: " + ob.remaining() + " bytes, want "
              + 8L * (in.partitions + 1));
        }
        long[] o = new long[in.partitions + 1];
        for (int q = 0; q <= in.partitions; q++) {
          o[q] = ob.getLong();
          if (q > 0 && o[q] < o[q - 1] || o[q] > in.batches[j].length) {
            throw new IOException("batch-" + j + ".offsets: offset " + q + " = " + o[q]
                + " out of order or past the " + in.batches[j].length + " bytes");
          }
        }
        in.offsets[j] = o;
      }
      in.taskBatches = new int[in.tasks][];
      for (int i = 0; i < in.tasks; i++) {
        String v = p.getProperty("task." + i);
        if (v == null) {
          throw new IOException("input.properties: no task." + i);
        }
        String[] parts = v.split(",");
        in.taskBatches[i] = new int[parts.length];
        for (int b = 0; b < parts.length; b++) {
          int j = Integer.parseInt(parts[b].trim());
          if (j < 0 || j >= pool) {
            throw new IOException("input.properties: task." + i + " names batch " + j + " of " + pool);
          }
          in.taskBatches[i][b] = j;
        }
      }
      return in;
    }

    long poolBytes() {
      long n = 0;
      for (byte[] b : batches) {
        n += b.length;
      }
      return n;
    }

    private static int intProp(Properties p, String key) throws IOException {
      String v = p.getProperty(key);
      try {
        int n = Integer.parseInt(v);
        if (n < 1) {
          throw new NumberFormatException("not positive");
        }
        return n;
      } catch (NumberFormatException e) {
        throw new IOException("input.properties: " + key + " = " + v + ": " + e.getMessage());
      }
    }
  }

  /** A partial file: memory (a growable buffer) or a file written through a buffer. */
  private final class Partial {
    final Path file;
    final OutputStream out;
    final ExposedBuffer mem;
    long length;

    Partial(Path file) throws IOException {
      this.file = file;
      if (memory) {
        mem = new ExposedBuffer(1 << 20);
        out = mem;
      } else {
        mem = null;
        out = new java.io.BufferedOutputStream(Files.newOutputStream(file), TEMP_BUFFER);
      }
    }

    void write(byte[] b, int off, int len) throws IOException {
      out.write(b, off, len);
      length += len;
    }

    void finish() throws IOException {
      out.close();
    }
  }

  /** A ByteArrayOutputStream whose array can be read without a copy. */
  private static final class ExposedBuffer extends ByteArrayOutputStream {
    ExposedBuffer(int size) {
      super(size);
    }

    byte[] array() {
      return buf;
    }
  }

  /** One batch of a task: its records' futures per partition and its merger. */
  private final class BatchState {
    final List<List<Future<ExposedBuffer>>> futures = new ArrayList<>();
    final List<List<Integer>> quotas = new ArrayList<>();
    final long[] lengths;
    final long[] sums;
    final Partial partial;
    final boolean checksums;
    Future<Void> merger;

    BatchState(Path file, boolean checksums) throws IOException {
      int n = in.partitions;
      for (int q = 0; q < n; q++) {
        futures.add(new ArrayList<>());
        quotas.add(new ArrayList<>());
      }
      this.lengths = new long[n];
      this.sums = new long[n];
      this.partial = new Partial(file);
      this.checksums = checksums;
    }

    /**
     * The merger: partitions in order, each record's bytes as soon as it is compressed (not
     * waiting for the partition's last record to be queued, which may wait for the limiter).
     */
    Void merge() throws IOException, InterruptedException, ExecutionException {
      Adler32 adler = new Adler32();
      for (int q = 0; q < in.partitions; q++) {
        adler.reset();
        for (int r = 0; ; r++) {
          Future<ExposedBuffer> f;
          int quota;
          synchronized (this) {
            while (futures.get(q).size() <= r && queuedUpTo <= q) {
              wait();
            }
            if (futures.get(q).size() <= r) {
              break; // all of partition q's records are queued, and merged
            }
            f = futures.get(q).get(r);
            quota = quotas.get(q).get(r);
          }
          ExposedBuffer b = f.get();
          partial.write(b.array(), 0, b.size());
          if (checksums) {
            adler.update(b.array(), 0, b.size());
          }
          lengths[q] += b.size();
          limiter.release(quota);
        }
        sums[q] = checksums ? adler.getValue() : 0;
      }
      partial.finish();
      return null;
    }

    private int queuedUpTo; // partitions below this one have all their records queued

    synchronized void add(int q, Future<ExposedBuffer> f, int quota) {
      futures.get(q).add(f);
      quotas.get(q).add(quota);
      notifyAll();
    }

    synchronized void queued(int q) {
      queuedUpTo = q;
      notifyAll();
    }
  }

  /** Runs map task i, writing its files into out. */
  private void runTask(int i, Path out) throws Exception {
    int[] batches = in.taskBatches[i];
    boolean single = batches.length == 1;
    String base = "shuffle_0_" + i + "_0";
    List<BatchState> states = new ArrayList<>();
    for (int b = 0; b < batches.length; b++) {
      Path file = single ? out.resolve(base + ".data.tmp") : out.resolve(base + ".partial" + b + ".tmp");
      BatchState st = new BatchState(file, single);
      st.merger = mergers.submit(st::merge);
      states.add(st);
      byte[] data = in.batches[batches[b]];
      long[] offs = in.offsets[batches[b]];
      for (int q = 0; q < in.partitions; q++) {
        for (long pos = offs[q]; pos < offs[q + 1]; pos += in.recordSize) {
          int len = (int) Math.min(in.recordSize, offs[q + 1] - pos);
          int quota = Math.min(limitKiB, Math.max(1, (len + 1023) >> 10));
          limiter.acquire(quota);
          int start = (int) pos;
          Future<ExposedBuffer> f = writers.submit(() -> compress(data, start, len));
          st.add(q, f, quota);
        }
        st.queued(q + 1);
      }
    }
    for (BatchState st : states) {
      st.merger.get();
    }
    long[] lengths;
    long[] sums;
    Path data = out.resolve(base + ".data.tmp");
    if (single) {
      BatchState st = states.get(0);
      lengths = st.lengths;
      sums = st.sums;
      if (memory) { // commit: a partial file still in memory is written out
        try (OutputStream o = Files.newOutputStream(data)) {
          o.write(st.partial.mem.array(), 0, st.partial.mem.size());
        }
      }
    } else {
      lengths = new long[in.partitions];
      sums = new long[in.partitions];
      finalMerge(states, data, lengths, sums);
    }
    Files.move(data, out.resolve(base + ".data"), StandardCopyOption.ATOMIC_MOVE);
    ByteBuffer index = ByteBuffer.allocate(8 * (in.partitions + 1));
    long off = 0;
    index.putLong(off);
    for (long n : lengths) {
      off += n;
      index.putLong(off);
    }
    ByteBuffer check = ByteBuffer.allocate(8 * in.partitions);
    for (long s : sums) {
      check.putLong(s);
    }
    writeAtomically(out.resolve(base + ".checksum.ADLER32"), check.array());
    writeAtomically(out.resolve(base + ".index"), index.array());
  }

  /** The final merge of a multi-batch task: partition by partition, each batch's part. */
  private void finalMerge(List<BatchState> states, Path data, long[] lengths, long[] sums)
      throws IOException {
    List<long[]> starts = new ArrayList<>();
    List<FileChannel> channels = new ArrayList<>();
    try (OutputStream o = new java.io.BufferedOutputStream(Files.newOutputStream(data), TEMP_BUFFER)) {
      for (BatchState st : states) {
        long[] s = new long[in.partitions + 1];
        for (int q = 0; q < in.partitions; q++) {
          s[q + 1] = s[q] + st.lengths[q];
        }
        starts.add(s);
        channels.add(memory ? null : FileChannel.open(st.partial.file, StandardOpenOption.READ));
      }
      byte[] buf = new byte[TEMP_BUFFER];
      Adler32 adler = new Adler32();
      for (int q = 0; q < in.partitions; q++) {
        adler.reset();
        for (int b = 0; b < states.size(); b++) {
          BatchState st = states.get(b);
          long pos = starts.get(b)[q];
          long end = starts.get(b)[q + 1];
          if (memory) {
            o.write(st.partial.mem.array(), (int) pos, (int) (end - pos));
            adler.update(st.partial.mem.array(), (int) pos, (int) (end - pos));
          } else {
            FileChannel ch = channels.get(b);
            while (pos < end) {
              ByteBuffer bb = ByteBuffer.wrap(buf, 0, (int) Math.min(buf.length, end - pos));
              int n = ch.read(bb, pos);
              if (n < 0) {
                throw new IOException(st.partial.file + ": ends at " + pos + ", want " + end);
              }
              o.write(buf, 0, n);
              adler.update(buf, 0, n);
              pos += n;
            }
          }
          lengths[q] += end - starts.get(b)[q];
        }
        sums[q] = adler.getValue();
      }
    } finally {
      for (FileChannel ch : channels) {
        if (ch != null) {
          ch.close();
        }
      }
    }
    for (BatchState st : states) {
      Files.deleteIfExists(st.partial.file);
    }
  }

  private static void writeAtomically(Path target, byte[] bytes) throws IOException {
    Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
    Files.write(tmp, bytes);
    Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
  }

  /** One record as one lz4 stream, as Spark's LZ4CompressionCodec writes it. */
  private ExposedBuffer compress(byte[] data, int off, int len) throws IOException {
    ExposedBuffer buf = new ExposedBuffer(len / 2 + 64);
    try (LZ4BlockOutputStream s = new LZ4BlockOutputStream(buf, in.blockSize, compressor,
        xxhash.newStreamingHash32(0x9747b28c).asChecksum(), false)) {
      s.write(data, off, len);
    }
    return buf;
  }

  /** Runs every task, concurrency at a time, into out. */
  private void runAll(Path out, int concurrency) throws Exception {
    Files.createDirectories(out);
    ExecutorService tasks = Executors.newFixedThreadPool(concurrency, daemon("task"));
    try {
      List<Future<?>> fs = new ArrayList<>();
      for (int i = 0; i < in.tasks; i++) {
        int task = i;
        fs.add(tasks.submit(() -> {
          runTask(task, out);
          return null;
        }));
      }
      for (Future<?> f : fs) {
        f.get();
      }
    } finally {
      tasks.shutdown();
    }
  }

  private static long processCpuNanos() {
    var os = ManagementFactory.getOperatingSystemMXBean();
    return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
  }

  /** VmHWM of /proc/self/status, in bytes, or -1. */
  private static long peakRss() {
    try (RandomAccessFile f = new RandomAccessFile("/proc/self/status", "r")) {
      String line;
      while ((line = f.readLine()) != null) {
        if (line.startsWith("VmHWM:")) {
          return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        }
      }
    } catch (IOException | NumberFormatException e) {
      return -1;
    }
    return -1;
  }

  private static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> s = Files.walk(dir)) {
      for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }

  public static void main(String[] args) throws Exception {
    Path input = null;
    Path output = null;
    String mode = "memory";
    int threads = 2;
    long limitMiB = 128;
    int concurrency = 2;
    int warmup = 1;
    for (int a = 0; a < args.length; a++) {
      String v = a + 1 < args.length ? args[a + 1] : null;
      switch (args[a]) {
        case "--input" -> input = Path.of(need(args[a], v));
        case "--output" -> output = Path.of(need(args[a], v));
        case "--mode" -> mode = need(args[a], v);
        case "--threads" -> threads = positive(args[a], v);
        case "--limit-mib" -> limitMiB = positive(args[a], v);
        case "--concurrency" -> concurrency = positive(args[a], v);
        case "--warmup" -> warmup = Integer.parseInt(need(args[a], v));
        default -> throw new IllegalArgumentException("unknown flag " + args[a]
            + " (flags: --input --output --mode --threads --limit-mib --concurrency --warmup)");
      }
      a++;
    }
    if (input == null || output == null) {
      throw new IllegalArgumentException("--input DIR and --output DIR are required");
    }
    if (!mode.equals("memory") && !mode.equals("file")) {
      throw new IllegalArgumentException("--mode must be memory or file, got " + mode);
    }
    if (warmup < 0) {
      throw new IllegalArgumentException("--warmup must be >= 0, got " + warmup);
    }
    Input in = Input.read(input);
    WriterModel m = new WriterModel(in, mode.equals("memory"), threads, limitMiB << 20);
    // Warm-up passes let the JIT compile the model before the measured pass.
    for (int w = 0; w < warmup; w++) {
      Path scratch = output.resolveSibling(output.getFileName() + ".warmup");
      m.runAll(scratch, concurrency);
      deleteTree(scratch);
    }
    deleteTree(output);
    long cpu0 = processCpuNanos();
    long t0 = System.nanoTime();
    m.runAll(output, concurrency);
    double elapsed = (System.nanoTime() - t0) / 1e9;
    double cpu = (processCpuNanos() - cpu0) / 1e9;
    long serialized = 0;
    for (int[] tb : in.taskBatches) {
      for (int j : tb) {
        serialized += in.offsets[j][in.partitions];
      }
    }
    if (in.serialized >= 0 && serialized != in.serialized) {
      throw new IOException("tasks hold " + serialized + " bytes, input.properties says " + in.serialized);
    }
    long rss = peakRss();
    System.out.printf(Locale.ROOT,
        "{\"model\":\"spark-rapids multithreaded writer V2\",\"mode\":\"%s\",\"threads\":%d,"
            + "\"limit_bytes\":%d,\"concurrency\":%d,\"tasks\":%d,\"partitions\":%d,"
            + "\"serialized_bytes\":%d,\"elapsed_s\":%.4f,\"cpu_s\":%.4f,\"mb_per_cpu_s\":%.2f,"
            + "\"throughput_mb_s\":%.2f,\"peak_rss_bytes\":%d,\"pool_bytes\":%d,"
            + "\"compressor\":\"%s\",\"java\":\"%s\"}%n",
        mode, threads, limitMiB << 20, concurrency, in.tasks, in.partitions, serialized, elapsed,
        cpu, serialized / 1e6 / cpu, serialized / 1e6 / elapsed, rss, in.poolBytes(),
        m.compressor.getClass().getSimpleName(), System.getProperty("java.version"));
    m.writers.shutdown();
    m.mergers.shutdown();
  }

  private static String need(String flag, String v) {
    if (v == null) {
      throw new IllegalArgumentException(flag + " needs a value");
    }
    return v;
  }

  private static int positive(String flag, String v) {
    int n;
    try {
      n = Integer.parseInt(need(flag, v));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(flag + " must be a positive integer, got " + v);
    }
    if (n < 1) {
      throw new IllegalArgumentException(flag + " must be a positive integer, got " + v);
    }
    return n;
  }
}
