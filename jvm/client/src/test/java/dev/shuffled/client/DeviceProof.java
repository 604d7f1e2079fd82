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

/**
 * The device path from a JVM, end to end on a GPU machine (scripts/cuda/jvm-device.sh runs it):
 * lineitem-like batches are generated and partitioned on the host, copied into one device
 * allocation through the CUDA driver ({@link CudaDriver}: each batch a sub-range of it, as RMM pool
 * sub-allocations are), and written by {@code tasks} map tasks, {@code concurrency} at a time
 * (each on its own connection), as {@link DeviceBatch}es on the CUDA IPC plane.
 *
 * <p>With {@code verify}, every map output is also written from the host copy of the same batches
 * ({@link ColumnarBatch}, inline) into shuffle 1, and {@code shuffled cat --rows json} of each
 * device output must equal that of its host twin and hold every row. Prints one JSON line.
 *
 * <p>Usage: DeviceProof SOCKET ROOT SHUFFLED_BIN FORMAT(shfc|kudo) TASKS CONCURRENCY PARTITIONS
 * ROWS BATCHES_PER_TASK POOL_BATCHES verify|run|hostcheck (hostcheck: verify, the batches written
 * from host memory both times; no GPU needed)
 */
public final class DeviceProof {
  private static final String APP = System.getProperty("proof.app", "jvm-device");
  private static final String EXEC = "1";
  private static final ColumnarSchema SCHEMA =
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
    long dev = onDevice ? CudaDriver.memAlloc(total) : 0; // the batches sub-ranges of it
    for (Batch b : onDevice ? pool : List.<Batch>of()) {
      for (int c = 0; c < b.host.length; c++) {
        for (int k = 0; k < 3; k++) {
          if (b.host[c][k] != null) {
            ByteBuffer d = ByteBuffer.allocateDirect(b.host[c][k].remaining());
            d.put(b.host[c][k].duplicate()).flip();
            CudaDriver.memcpyHtoD(dev + b.devOffset[c][k], d);
          }
        }
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
    long start = System.nanoTime();
    List<Future<?>> fs = new ArrayList<>();
    for (int w = 0; w < conc; w++) {
      int worker = w;
      fs.add(ex.submit(() -> {
        if (onDevice) {
          CudaDriver.setCurrentDevice(0);
        }
        try (ShuffledClient cl = ShuffledClient.connect(socket)) {
          cl.register(APP, EXEC);
          for (int t = worker; t < tasks; t += conc) {
            try (MapOutput out = cl.openColumnarOutput(0, t, parts, format, SCHEMA, o)) {
              for (int j = 0; j < perTask; j++) {
                Batch b = pool.get((t + j) % pool.size());
                if (onDevice) {
                  out.write(device(b, dev));
                } else {
                  out.write(host(b));
                }
                sentRows[t] += b.rows;
                sentBytes[t] += b.bytes;
              }
              out.commit();
            }
          }
        }
        return null;
      }));
    }
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
    int verified = 0;
    if (verify) {
      try (ShuffledClient cl = ShuffledClient.connect(socket)) {
        cl.register(APP, EXEC);
        for (int t = 0; t < tasks; t++) {
          try (MapOutput out = cl.openColumnarOutput(1, t, parts, format, SCHEMA, o)) {
            for (int j = 0; j < perTask; j++) {
              out.write(host(pool.get((t + j) % pool.size())));
            }
            out.commit();
          }
          String d = cat(bin, root, format, 0, t);
          String h = cat(bin, root, format, 1, t);
          long lines = d.chars().filter(ch -> ch == '\n').count();
          if (!d.equals(h) || lines != sentRows[t]) {
            throw new IllegalStateException(
                "map " + t + ": the device output reads back as " + lines + " rows, want "
                    + sentRows[t] + "; equal to the host path's: " + d.equals(h));
          }
          verified++;
        }
      }
    }
    if (onDevice) {
      CudaDriver.memFree(dev);
    }
    System.out.printf(Locale.ROOT,
        "{\"format\":\"%s\",\"tasks\":%d,\"concurrency\":%d,\"partitions\":%d,\"rows\":%d,"
            + "\"payload_bytes\":%d,\"elapsed_s\":%.3f,\"rows_per_s\":%.0f,\"payload_mb_s\":%.1f,"
            + "\"verified_outputs\":%d}%n",
        a[3], tasks, conc, parts, rowsAll, bytesAll, secs, rowsAll / secs, bytesAll / secs / 1e6, verified);
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

  private static String cat(String bin, Path root, ColumnarFormat format, int shuffle, long map)
      throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>(List.of(bin, "cat", "--rows", "json",
        "--dir", root.resolve(APP).resolve(EXEC).toString(),
        "--shuffle", Integer.toString(shuffle), "--map", Long.toString(map)));
    if (format == ColumnarFormat.KUDO) {
      StringBuilder ddl = new StringBuilder();
      for (ColumnarSchema.Field f : SCHEMA.fields()) {
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
    // group the rows by partition, stably
    long[] pr = new long[parts + 1];
    for (int i = 0; i < rows; i++) {
      pr[part[i] + 1]++;
    }
    for (int p = 0; p < parts; p++) {
      pr[p + 1] += pr[p];
    }
    long[] next = pr.clone();
    int[] perm = new int[rows];
    for (int i = 0; i < rows; i++) {
      perm[(int) next[part[i]]++] = i;
    }
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
}
