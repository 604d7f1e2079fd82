package dev.shuffled.client;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.CountDownLatch;

/**
 * The device path from a JVM, end to end on a GPU machine (scripts/cuda/jvm-device.sh runs it):
 * lineitem-like batches are generated and partitioned on the host, copied into one device
 * allocation through the CUDA driver ({@link CudaDriver}: each batch a sub-range of it, as RMM pool
 * sub-allocations are), and written by {@code tasks} map tasks, {@code concurrency} at a time
 * (each worker on its own connection, registered as its own executor, taking the next task when
 * it is done with one, its last batch marked), as {@link DeviceBatch}es on the CUDA IPC plane. As
 * {@code shuffled-loadgen} does, the connections are made and registered before the clock starts;
 * so is one warm-up task a worker ({@code -Dproof.warmup=N}, into a shuffle of its own), which
 * links the client's code and the driver's calls on that thread once, as a long-lived executor has.
 *
 * <p>With {@code verify}, every map output is also written from the host copy of the same batches
 * ({@link ColumnarBatch}, inline) into shuffle 1, and {@code shuffled cat --rows json} of each
 * device output must equal that of its host twin and hold every row. Then as many map tasks of
 * nested batches (an array of strings, a struct of an int, a string and an array of bigints, a map
 * of strings to ints, with nulls and empty lists at every level) are written from device memory
 * into shuffle 2 and from host memory into shuffle 3, and compared the same way. Prints one JSON
 * line.
 *
 * <p>Usage: DeviceProof SOCKET ROOT SHUFFLED_BIN FORMAT(shfc|kudo) TASKS CONCURRENCY PARTITIONS
 * ROWS BATCHES_PER_TASK POOL_BATCHES verify|run|hostcheck (hostcheck: verify, the batches written
 * from host memory both times, the device batches only made and placed at made-up addresses; no
 * GPU needed)
 */
public final class DeviceProof {
  private static final String APP = System.getProperty("proof.app", "jvm-device");
  private static final String EXEC = "1";
  /** The lineitem-like columns of every flat batch (also {@link DeviceBatchCost}'s). */
  static final ColumnarSchema SCHEMA =
      ColumnarSchema.of(
          ColumnarSchema.Field.of("l_orderkey", "bigint"),
          ColumnarSchema.Field.of("l_partkey", "bigint"),
          ColumnarSchema.Field.of("l_suppkey", "bigint"),
          ColumnarSchema.Field.of("l_linenumber", "int"),
          ColumnarSchema.Field.of("l_quantity", "decimal(12,2)"),
          ColumnarSchema.Field.of("l_extendedprice", "decimal(12,2)"),
          ColumnarSchema.Field.of("l_discount", "decimal(12,2)"),
          ColumnarSchema.Field.of("l_tax", "decimal(12,2)"),
          ColumnarSchema.Field.of("l_returnflag", "string"),
          ColumnarSchema.Field.of("l_linestatus", "string"),
          ColumnarSchema.Field.of("l_shipdate", "date"),
          ColumnarSchema.Field.of("l_commitdate", "date"),
          ColumnarSchema.Field.of("l_receiptdate", "date"),
          ColumnarSchema.Field.of("l_shipinstruct", "string"),
          ColumnarSchema.Field.of("l_shipmode", "string"),
          ColumnarSchema.Field.of("l_comment", "string"));

  /** The nested batches' columns: array, struct (with an array inside) and map. */
  private static final ColumnarSchema NESTED =
      ColumnarSchema.of(
          ColumnarSchema.Field.of("id", "bigint"),
          ColumnarSchema.Field.of("tags", "array<string>"),
          ColumnarSchema.Field.of("pt", "struct<x:int,name:string,vals:array<bigint>>"),
          ColumnarSchema.Field.of("attrs", "map<string,int>"));

  /**
   * One column of a nested batch and its children: its buffers (validity, offsets, data; null
   * where absent) and where each lies from the batch's start in the device pool.
   */
  private record Node(ByteBuffer[] bufs, long[] at, List<Node> children) {
    ColumnarBatch.Column host() {
      List<ColumnarBatch.Column> kids = new ArrayList<>();
      for (Node c : children) {
        kids.add(c.host());
      }
      return new ColumnarBatch.Column(bufs[0], bufs[1], bufs[2], kids);
    }

    DeviceBatch.Column device(long dev) {
      List<DeviceBatch.Column> kids = new ArrayList<>();
      for (Node c : children) {
        kids.add(c.device(dev));
      }
      DeviceBatch.Buffer[] x = new DeviceBatch.Buffer[3];
      for (int k = 0; k < 3; k++) {
        x[k] = bufs[k] == null ? null : new DeviceBatch.Buffer(dev + at[k], bufs[k].remaining());
      }
      return new DeviceBatch.Column(x[0], x[1], x[2], kids);
    }
  }

  /** A nested batch: its columns (the children of root, which has no buffers), partitioned. */
  private record Nested(long rows, long[] partitionRows, Node root, long bytes) {
    ColumnarBatch host() {
      List<ColumnarBatch.Column> cols = new ArrayList<>();
      for (Node c : root.children) {
        cols.add(c.host());
      }
      return ColumnarBatch.of(NESTED, rows, cols, partitionRows);
    }

    DeviceBatch device(long dev) {
      List<DeviceBatch.Column> cols = new ArrayList<>();
      for (Node c : root.children) {
        cols.add(c.device(dev));
      }
      return DeviceBatch.of(NESTED, rows, cols, partitionRows);
    }
  }

  /** One pool batch: its host buffers (partitioned), and where each lies in the device pool. */
  private record Batch(long rows, long[] partitionRows, ByteBuffer[][] host, long[][] devOffset, long bytes) {}

  public static void main(String[] a) throws Exception {
    Path socket = Path.of(a[0]);
    Path root = Path.of(a[1]);
    String bin = a[2];
    ColumnarFormat format = a[3].equals("kudo") ? ColumnarFormat.KUDO : ColumnarFormat.SHFC;
    int tasks = Integer.parseInt(a[4]);
    int conc = Integer.parseInt(a[5]);
    int parts = Integer.parseInt(a[6]);
    int rows = Integer.parseInt(a[7]);
    int perTask = Integer.parseInt(a[8]);
    int poolN = Integer.parseInt(a[9]);
    boolean onDevice = !a[10].equals("hostcheck"); // hostcheck: host batches only, no GPU
    boolean verify = !a[10].equals("run");
    int warmup = Integer.getInteger("proof.warmup", 1);

    if (onDevice) {
      CudaDriver.init();
      CudaDriver.setCurrentDevice(0);
    }
    List<Batch> pool = new ArrayList<>();
    long total = 0;
    for (int i = 0; i < poolN; i++) {
      Batch b = generate(new Random(1000 + i), rows, parts, total);
      pool.add(b);
      total = align(total + b.bytes, 4096);
    }
    List<Nested> nestedPool = new ArrayList<>();
    if (verify) {
      for (int i = 0; i < 3; i++) {
        Nested n = nested(new Random(2000 + i), Math.min(rows, 20000), parts, total);
        nestedPool.add(n);
        total = align(total + n.bytes, 4096);
      }
    }
    long dev = onDevice ? CudaDriver.memAlloc(total) : 0; // the batches sub-ranges of it
    if (onDevice) {
      for (Batch b : pool) {
        for (int c = 0; c < b.host.length; c++) {
          for (int k = 0; k < 3; k++) {
            upload(dev + b.devOffset[c][k], b.host[c][k]);
          }
        }
      }
      for (Nested n : nestedPool) {
        upload(dev, n.root);
      }
    }
    OpenOptions o = OpenOptions.DEFAULTS;
    ExecutorService ex =
        Executors.newFixedThreadPool(conc, r -> {
          Thread t = new Thread(r);
          t.setDaemon(true); // a failed task ends the program
          return t;
        });
    long[] sentRows = new long[tasks];
    long[] sentBytes = new long[tasks];
    String[] execOf = new String[tasks];
    AtomicInteger next = new AtomicInteger();
    CountDownLatch ready = new CountDownLatch(conc);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<?>> fs = new ArrayList<>();
    for (int w = 0; w < conc; w++) {
      int worker = w;
      fs.add(ex.submit(() -> {
        String exec = EXEC + "-" + worker;
        try (ShuffledClient cl = ShuffledClient.connect(socket)) {
          try {
            if (onDevice) {
              CudaDriver.setCurrentDevice(0);
            }
            cl.register(APP, exec);
            for (int t = 0; t < warmup; t++) {
              writeTask(cl, WARMUP_SHUFFLE, tasks + worker * warmup + t, parts, format, o, perTask,
                  pool, worker + t, onDevice, dev);
            }
          } finally {
            ready.countDown();
          }
          go.await();
          for (int t = next.getAndIncrement(); t < tasks; t = next.getAndIncrement()) {
            execOf[t] = exec;
            long[] sent = writeTask(cl, 0, t, parts, format, o, perTask, pool, t, onDevice, dev);
            sentRows[t] = sent[0];
            sentBytes[t] = sent[1];
          }
        }
        return null;
      }));
    }
    ready.await();
    long start = System.nanoTime();
    go.countDown();
    for (Future<?> f : fs) {
      f.get();
    }
    double secs = (System.nanoTime() - start) / 1e9;
    ex.shutdown();
    ex.awaitTermination(1, TimeUnit.MINUTES);
    long rowsAll = 0, bytesAll = 0;
    for (int t = 0; t < tasks; t++) {
      rowsAll += sentRows[t];
      bytesAll += sentBytes[t];
    }
    int verified = 0, nestedVerified = 0;
    if (verify) {
      for (int t = 0; t < tasks; t++) {
        try (ShuffledClient cl = ShuffledClient.connect(socket)) {
          cl.register(APP, execOf[t]);
          try (MapOutput out = cl.openColumnarOutput(1, t, parts, format, SCHEMA, o)) {
            for (int j = 0; j < perTask; j++) {
              out.write(host(pool.get((t + j) % pool.size())));
            }
            out.commit();
          }
        }
        compare(bin, root, format, SCHEMA, execOf[t], 0, 1, t, sentRows[t]);
        verified++;
      }
      // Nested columns: device batches into shuffle 2, their host twins into shuffle 3.
      try (ShuffledClient cl = ShuffledClient.connect(socket)) {
        cl.register(APP, EXEC);
        for (int t = 0; t < tasks; t++) {
          long want = 0;
          for (int shuffle = 2; shuffle <= 3; shuffle++) {
            try (MapOutput out = cl.openColumnarOutput(shuffle, t, parts, format, NESTED, o)) {
              for (int j = 0; j < perTask; j++) {
                Nested n = nestedPool.get((t + j) % nestedPool.size());
                if (j == perTask - 1) {
                  out.markLast();
                }
                DeviceBatch d = n.device(onDevice ? dev : FAKE_BASE);
                if (shuffle == 2 && onDevice) {
                  out.write(d);
                } else {
                  if (!onDevice) { // the device batch made and placed, not sent
                    d.place(x -> new CudaDriver.AddressRange(FAKE_BASE, FAKE_SIZE));
                  }
                  out.write(n.host());
                }
                want += shuffle == 2 ? n.rows : 0;
              }
              out.commit();
            }
          }
          compare(bin, root, format, NESTED, EXEC, 2, 3, t, want);
          nestedVerified++;
        }
      }
    }
    if (onDevice) {
      CudaDriver.memFree(dev);
    }
    System.out.printf(Locale.ROOT,
        "{\"format\":\"%s\",\"tasks\":%d,\"concurrency\":%d,\"partitions\":%d,\"rows\":%d,"
            + "\"payload_bytes\":%d,\"elapsed_s\":%.3f,\"rows_per_s\":%.0f,\"payload_mb_s\":%.1f,"
            + "\"warmup_tasks\":%d,\"verified_outputs\":%d,\"nested_verified_outputs\":%d}%n",
        a[3], tasks, conc, parts, rowsAll, bytesAll, secs, rowsAll / secs, bytesAll / secs / 1e6,
        warmup * conc, verified, nestedVerified);
  }

  /** The shuffle the warm-up tasks write into. */
  private static final int WARMUP_SHUFFLE = 9;

  /** Where hostcheck makes its device batches up (they are placed, never sent). */
  private static final long FAKE_BASE = 0x7f00_0000_0000L;

  private static final long FAKE_SIZE = 1L << 40;

  /**
   * Writes map task {@code map}'s batches (pool batches {@code first}, {@code first+1}, ...), the
   * last one marked, and commits it: {rows, payload bytes}.
   */
  private static long[] writeTask(ShuffledClient cl, int shuffle, int map, int parts,
      ColumnarFormat format, OpenOptions o, int perTask, List<Batch> pool, int first,
      boolean onDevice, long dev) throws IOException, CudaException {
    long rows = 0, bytes = 0;
    try (MapOutput out = cl.openColumnarOutput(shuffle, map, parts, format, SCHEMA, o)) {
      for (int j = 0; j < perTask; j++) {
        Batch b = pool.get((first + j) % pool.size());
        if (j == perTask - 1) {
          out.markLast();
        }
        if (onDevice) {
          out.write(device(b, dev));
        } else {
          out.write(host(b));
        }
        rows += b.rows;
        bytes += b.bytes;
      }
      out.commit();
    }
    return new long[] {rows, bytes};
  }

  /** Copies {@code b}'s remaining bytes (if any) to device address {@code at}. */
  private static void upload(long at, ByteBuffer b) throws CudaException {
    if (b == null || !b.hasRemaining()) {
      return;
    }
    ByteBuffer d = ByteBuffer.allocateDirect(b.remaining());
    d.put(b.duplicate()).flip();
    CudaDriver.memcpyHtoD(at, d);
  }

  /** Uploads a nested batch's buffers, every level, from {@code dev}. */
  private static void upload(long dev, Node n) throws CudaException {
    for (int k = 0; k < 3; k++) {
      upload(dev + n.at[k], n.bufs[k]);
    }
    for (Node c : n.children) {
      upload(dev, c);
    }
  }

  /**
   * {@code shuffled cat --rows json} of map {@code map} in shuffles {@code a} (device) and {@code
   * b} (host) must be equal and hold {@code rows} rows.
   */
  private static void compare(String bin, Path root, ColumnarFormat format, ColumnarSchema schema,
      String exec, int a, int b, int map, long rows) throws IOException, InterruptedException {
    String d = cat(bin, root, format, schema, exec, a, map);
    String h = cat(bin, root, format, schema, exec, b, map);
    long lines = d.chars().filter(ch -> ch == '\n').count();
    if (!d.equals(h) || lines != rows) {
      throw new IllegalStateException(
          "shuffle " + a + " map " + map + ": the device output reads back as " + lines
              + " rows, want " + rows + "; equal to the host path's (shuffle " + b + "): "
              + d.equals(h));
    }
  }

  private static long align(long v, long to) {
    return (v + to - 1) / to * to;
  }

  private static DeviceBatch device(Batch b, long dev) {
    List<DeviceBatch.Column> cols = new ArrayList<>();
    for (int c = 0; c < b.host.length; c++) {
      DeviceBatch.Buffer[] x = new DeviceBatch.Buffer[3];
      for (int k = 0; k < 3; k++) {
        x[k] = b.host[c][k] == null ? null
            : new DeviceBatch.Buffer(dev + b.devOffset[c][k], b.host[c][k].remaining());
      }
      cols.add(new DeviceBatch.Column(x[0], x[1], x[2]));
    }
    return DeviceBatch.of(SCHEMA, b.rows, cols, b.partitionRows);
  }

  private static ColumnarBatch host(Batch b) {
    List<ColumnarBatch.Column> cols = new ArrayList<>();
    for (ByteBuffer[] x : b.host) {
      cols.add(ColumnarBatch.Column.of(x[0], x[1], x[2]));
    }
    return ColumnarBatch.of(SCHEMA, b.rows, cols, b.partitionRows);
  }

  private static String cat(String bin, Path root, ColumnarFormat format, ColumnarSchema schema,
      String exec, int shuffle, long map) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>(List.of(bin, "cat", "--rows", "json",
        "--dir", root.resolve(APP).resolve(exec).toString(),
        "--shuffle", Integer.toString(shuffle), "--map", Long.toString(map)));
    if (format == ColumnarFormat.KUDO) {
      StringBuilder ddl = new StringBuilder();
      for (ColumnarSchema.Field f : schema.fields()) {
        ddl.append(ddl.length() == 0 ? "" : ", ").append(f.name()).append(' ').append(f.sparkType());
      }
      cmd.add("--schema");
      cmd.add(ddl.toString());
    }
    java.io.File err = java.io.File.createTempFile("cat", ".err");
    Process p = new ProcessBuilder(cmd).redirectError(err).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    int rc = p.waitFor();
    String why = java.nio.file.Files.readString(err.toPath());
    err.delete();
    if (rc != 0) {
      throw new IllegalStateException(
          "shuffled cat of shuffle " + shuffle + " map " + map + ": exit " + rc + ": " + why);
    }
    return out;
  }

  private static final String[] INSTRUCT = {"DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"};
  private static final String[] MODE = {"REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"};
  private static final String[] WORDS = {"carefully", "final", "deposits", "sleep", "quickly", "ironic",
    "packages", "among", "the", "slyly", "express", "requests", "haggle", "furiously", "blithely"};

  /** The partition row offsets of rows whose partitions are {@code part}, grouped by partition. */
  private static long[] partitionRows(int[] part, int parts) {
    long[] pr = new long[parts + 1];
    for (int p : part) {
      pr[p + 1]++;
    }
    for (int p = 0; p < parts; p++) {
      pr[p + 1] += pr[p];
    }
    return pr;
  }

  /** The rows grouped by partition, stably: the index of the row that comes i-th. */
  private static int[] byPartition(int[] part, long[] partitionRows) {
    long[] next = partitionRows.clone();
    int[] perm = new int[part.length];
    for (int i = 0; i < part.length; i++) {
      perm[(int) next[part[i]]++] = i;
    }
    return perm;
  }

  /**
   * rows lineitem-like rows, grouped by partition (pmod of a hash of l_orderkey), their buffers
   * placed from {@code base} in the device pool at 256-byte boundaries; l_comment has nulls.
   */
  private static Batch generate(Random r, int rows, int parts, long base) {
    int nc = SCHEMA.size();
    long[][] fixed = new long[nc][rows];
    String[][] strs = new String[nc][];
    boolean[] nul = new boolean[rows];
    int[] part = new int[rows];
    long order = 0;
    int line = 0, lines = 0;
    for (int i = 0; i < rows; i++) {
      if (line == lines) {
        order++;
        line = 0;
        lines = 1 + r.nextInt(7);
      }
      line++;
      long pk = 1 + r.nextInt(200000);
      int q = 1 + r.nextInt(50);
      int ship = 8036 + r.nextInt(2400);
      fixed[0][i] = ((order - 1) / 8) * 32 + (order - 1) % 8 + 1;
      fixed[1][i] = pk;
      fixed[2][i] = 1 + (pk + r.nextInt(4) * 2501) % 10000;
      fixed[3][i] = line;
      fixed[4][i] = q * 100L;
      fixed[5][i] = q * (90000 + (pk / 10) % 20001 + 100 * (pk % 1000));
      fixed[6][i] = r.nextInt(11);
      fixed[7][i] = r.nextInt(9);
      fixed[10][i] = ship;
      fixed[11][i] = ship - 30 + r.nextInt(61);
      fixed[12][i] = ship + 1 + r.nextInt(30);
      nul[i] = r.nextInt(10) == 0;
      long h = fixed[0][i] * 0x9E3779B97F4A7C15L;
      part[i] = (int) Math.floorMod(h ^ (h >>> 29), (long) parts);
    }
    long[] pr = partitionRows(part, parts);
    int[] perm = byPartition(part, pr);
    for (int c : new int[] {8, 9, 13, 14, 15}) {
      strs[c] = new String[rows];
    }
    for (int i = 0; i < rows; i++) {
      strs[8][i] = new String[] {"R", "A", "N"}[r.nextInt(3)];
      strs[9][i] = fixed[10][i] > 9298 ? "O" : "F";
      strs[13][i] = INSTRUCT[r.nextInt(INSTRUCT.length)];
      strs[14][i] = MODE[r.nextInt(MODE.length)];
      StringBuilder sb = new StringBuilder();
      int w = 2 + r.nextInt(5);
      for (int k = 0; k < w; k++) {
        sb.append(k == 0 ? "" : " ").append(WORDS[r.nextInt(WORDS.length)]);
      }
      strs[15][i] = sb.toString();
    }
    ByteBuffer[][] host = new ByteBuffer[nc][3];
    long[][] off = new long[nc][3];
    long pos = 0;
    for (int c = 0; c < nc; c++) {
      ColumnType t = SCHEMA.field(c).type();
      if (!t.varWidth()) {
        ByteBuffer d = ByteBuffer.allocate(rows * t.width()).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < rows; i++) {
          long v = fixed[c][perm[i]];
          if (t.width() == 8) {
            d.putLong(8 * i, v);
          } else {
            d.putInt(4 * i, (int) v);
          }
        }
        host[c][2] = d;
      } else {
        ByteBuffer o = ByteBuffer.allocate(4 * (rows + 1)).order(ByteOrder.LITTLE_ENDIAN);
        java.io.ByteArrayOutputStream data = new java.io.ByteArrayOutputStream();
        boolean nullable = c == 15;
        ByteBuffer v = nullable ? ByteBuffer.allocate((rows + 7) / 8) : null;
        for (int i = 0; i < rows; i++) {
          int src = perm[i];
          if (nullable && !nul[src]) {
            v.put(i / 8, (byte) (v.get(i / 8) | (1 << (i % 8))));
          }
          if (!nullable || !nul[src]) {
            data.writeBytes(strs[c][src].getBytes(StandardCharsets.UTF_8));
          }
          o.putInt(4 * (i + 1), data.size());
        }
        host[c][0] = v;
        host[c][1] = o;
        host[c][2] = ByteBuffer.wrap(data.toByteArray());
      }
      for (int k = 0; k < 3; k++) {
        if (host[c][k] != null) {
          off[c][k] = base + pos;
          pos = align(pos + host[c][k].remaining(), 256);
        }
      }
    }
    return new Batch(rows, pr, host, off, pos);
  }

  /**
   * {@code rows} rows of {@link #NESTED}, grouped by partition (pmod of a hash of id), with nulls
   * at every level (rows of tags, pt and attrs; elements of tags and pt.vals; pt's fields; map
   * values) and empty lists, its buffers placed from {@code base} in the device pool at 256-byte
   * boundaries.
   */
  private static Nested nested(Random r, int rows, int parts, long base) {
    Object[][] byRow = new Object[rows][];
    int[] part = new int[rows];
    for (int i = 0; i < rows; i++) {
      long id = r.nextLong() >>> 20;
      long h = id * 0x9E3779B97F4A7C15L;
      part[i] = (int) Math.floorMod(h ^ (h >>> 29), (long) parts);
      Object tags = null;
      if (r.nextInt(10) != 0) {
        List<Object> l = new ArrayList<>();
        for (int k = r.nextInt(5); k > 0; k--) {
          l.add(r.nextInt(7) == 0 ? null : WORDS[r.nextInt(WORDS.length)]);
        }
        tags = l;
      }
      Object pt = null;
      if (r.nextInt(10) != 0) {
        List<Object> vals = null;
        if (r.nextInt(8) != 0) {
          vals = new ArrayList<>();
          for (int k = r.nextInt(4); k > 0; k--) {
            vals.add(r.nextInt(6) == 0 ? null : r.nextLong());
          }
        }
        pt = new Object[] {
          r.nextInt(9) == 0 ? null : r.nextInt(),
          r.nextInt(9) == 0 ? null : MODE[r.nextInt(MODE.length)] + "-" + r.nextInt(100),
          vals
        };
      }
      Object attrs = null;
      if (r.nextInt(10) != 0) {
        List<Object> entries = new ArrayList<>();
        int n = r.nextInt(4);
        for (int k = 0; k < n; k++) {
          entries.add(new Object[] {WORDS[k * 4 + r.nextInt(4)], r.nextInt(5) == 0 ? null : r.nextInt(1000)});
        }
        attrs = entries;
      }
      byRow[i] = new Object[] {id, tags, pt, attrs};
    }
    long[] pr = partitionRows(part, parts);
    int[] perm = byPartition(part, pr);
    Object[] sorted = new Object[rows];
    for (int i = 0; i < rows; i++) {
      sorted[i] = byRow[perm[i]];
    }
    long[] pos = {0};
    List<Node> cols = new ArrayList<>();
    for (int k = 0; k < NESTED.size(); k++) {
      List<Object> col = new ArrayList<>(rows);
      for (Object x : sorted) {
        col.add(((Object[]) x)[k]);
      }
      cols.add(build(NESTED.field(k), col, base, pos));
    }
    return new Nested(rows, pr, new Node(new ByteBuffer[3], new long[3], cols), pos[0]);
  }

  /**
   * The buffers of field {@code f} for these values (Long, Integer, String; a List for an array,
   * a List of {key, value} pairs for a map, an Object[] of its fields for a struct; null), placed
   * from {@code base + pos[0]}, then its children's.
   */
  private static Node build(ColumnarSchema.Field f, List<Object> vals, long base, long[] pos) {
    int n = vals.size();
    ColumnType t = f.type();
    ByteBuffer[] bufs = new ByteBuffer[3];
    if (vals.contains(null)) {
      ByteBuffer v = ByteBuffer.allocate((n + 7) / 8);
      for (int i = 0; i < n; i++) {
        if (vals.get(i) != null) {
          v.put(i / 8, (byte) (v.get(i / 8) | (1 << (i % 8))));
        }
      }
      bufs[0] = v;
    }
    List<List<Object>> kidVals = new ArrayList<>();
    switch (t) {
      case INT64, INT32 -> {
        ByteBuffer d = ByteBuffer.allocate(n * t.width()).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
          Object x = vals.get(i);
          if (x instanceof Long l) {
            d.putLong(8 * i, l);
          } else if (x instanceof Integer v) {
            d.putInt(4 * i, v);
          }
        }
        bufs[2] = d;
      }
      case STRING -> {
        ByteBuffer o = ByteBuffer.allocate(4 * (n + 1)).order(ByteOrder.LITTLE_ENDIAN);
        java.io.ByteArrayOutputStream data = new java.io.ByteArrayOutputStream();
        for (int i = 0; i < n; i++) {
          if (vals.get(i) != null) {
            data.writeBytes(((String) vals.get(i)).getBytes(StandardCharsets.UTF_8));
          }
          o.putInt(4 * (i + 1), data.size());
        }
        bufs[1] = o;
        bufs[2] = ByteBuffer.wrap(data.toByteArray());
      }
      case LIST, MAP -> {
        ByteBuffer o = ByteBuffer.allocate(4 * (n + 1)).order(ByteOrder.LITTLE_ENDIAN);
        List<Object> child = new ArrayList<>();
        for (int i = 0; i < n; i++) {
          if (vals.get(i) != null) {
            child.addAll((List<?>) vals.get(i));
          }
          o.putInt(4 * (i + 1), child.size());
        }
        bufs[1] = o;
        kidVals.add(child);
      }
      case STRUCT -> {
        for (int k = 0; k < f.children().size(); k++) {
          List<Object> child = new ArrayList<>(n);
          for (Object x : vals) {
            child.add(x == null ? null : ((Object[]) x)[k]);
          }
          kidVals.add(child);
        }
      }
      default -> throw new IllegalArgumentException(f + ": no generator for " + t);
    }
    long[] at = new long[3];
    for (int k = 0; k < 3; k++) {
      if (bufs[k] != null) {
        at[k] = base + pos[0];
        pos[0] = align(pos[0] + bufs[k].remaining(), 256);
      }
    }
    List<Node> kids = new ArrayList<>();
    for (int k = 0; k < kidVals.size(); k++) {
      kids.add(build(f.children().get(k), kidVals.get(k), base, pos));
    }
    return new Node(bufs, at, kids);
  }
}
