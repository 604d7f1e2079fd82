package dev.shuffled.spark.suite;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.SparkConf;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.sql.SparkSession;

/**
 * The Spark benchmark: one SQL job that shuffles about {@code --mib} MiB of rows (generated
 * rows repartitioned by key into a sink that reads every column), in each of {@code --modes}
 * in turn, {@code --reps} times each (mode after mode within a repetition, so that a change in
 * the machine's load hits every mode alike; each repetition starts with the next mode, so that
 * no mode always follows the same other one). Modes: {@code sort} (Spark's sort shuffle),
 * {@code shuffled} (the plugin; reducers fetch from the executors' BlockManagers) and
 * {@code shuffled-serving} (the plugin with {@code spark.shuffled.serving.enabled=true}: the
 * daemon, started with {@code --serve-addr} on the executors' host, serves the map outputs and
 * reducers fetch from it). With {@code shuffled-serving} among the modes, every mode sets
 * {@code spark.shuffle.readHostLocalDisk=false}, so that on this one host reducers fetch every
 * block that is not their own executor's over the network, as they would from another node,
 * and not from the files (else Spark's default, host-local reads, would bypass the serving).
 *
 * <p>Per run: the measured job's wall time (map and reduce stages, from the action's call to
 * its return), the map stage's and the reduce stage's wall time, the shuffle write time of the
 * map tasks and the fetch wait time of the reduce tasks (Spark's task metrics, summed over the
 * tasks), the CPU seconds of the executor JVMs and of the daemon over the job, the shuffle bytes
 * written and the bytes reducers fetched remotely. Prints one line per run, the medians and,
 * for every mode after the first, the median over the repetitions of its job wall time over the
 * first mode's in the same repetition, with the smallest and largest of those ratios and their
 * geometric mean (with the order alternating, a cost of coming second in a repetition cancels
 * out of it). Before each measured job the machine settles ({@link #settle}).
 *
 * <p>Arguments: {@code --daemon BIN --work DIR --plugin-jar JAR [--mib 2048] [--reps 5]
 * [--executors 2] [--modes sort,shuffled]}.
 */
public final class Bench {
  private Bench() {}

  public static void main(String[] args) throws Exception {
    Map<String, String> a = new LinkedHashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      a.put(args[i], args[i + 1]);
    }
    long mib = Long.parseLong(a.getOrDefault("--mib", "2048"));
    int reps = Integer.parseInt(a.getOrDefault("--reps", "5"));
    int executors = Integer.parseInt(a.getOrDefault("--executors", "2"));
    List<String> modes = List.of(a.getOrDefault("--modes", "sort,shuffled").split(","));
    for (String mode : modes) {
      if (!List.of(SORT, SHUFFLED, SERVING).contains(mode)) {
        throw new IllegalArgumentException("--modes: unknown mode " + mode + " (want "
            + SORT + ", " + SHUFFLED + " or " + SERVING + ", comma-separated)");
      }
    }
    if (mib < 1 || reps < 1 || executors < 1) {
      throw new IllegalArgumentException("--mib, --reps and --executors must be >= 1, got "
          + mib + ", " + reps + ", " + executors);
    }
    Path work = Path.of(a.get("--work"));
    Path local = Files.createDirectories(work.resolve("local")).toRealPath();
    Daemon daemon = new Daemon(Path.of(a.get("--daemon")), work, local);
    if (modes.contains(SERVING)) {
      // On the executors' host, as the suite's serving checks start it; the listener idles in
      // the other modes (their executors do not publish it).
      int port;
      try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
        port = s.getLocalPort();
      }
      daemon.start(List.of("--serve-addr",
          org.apache.spark.util.Utils.localHostName() + ":" + port));
    } else {
      daemon.start();
    }
    // A row is 8 + 8 + 64 characters of payload (about 100 bytes as an UnsafeRow).
    long rows = mib * (1L << 20) / 100;
    int maps = (int) Math.max(executors, mib / 64);
    Map<String, List<double[]>> results = new LinkedHashMap<>();
    try {
      for (int r = 0; r < reps; r++) {
        // Each repetition starts with the next mode, so that no mode always runs right after
        // the same other one (the previous application's cleanup, the page cache's writeback).
        List<String> order = new ArrayList<>(modes.subList(r % modes.size(), modes.size()));
        order.addAll(modes.subList(0, r % modes.size()));
        for (String mode : order) {
          SparkConf conf = new SparkConf()
              .setMaster("local-cluster[" + executors + ",1,2048]")
              .set("spark.executor.memory", "1g")
              .set("spark.local.dir", local.toString())
              .set("spark.ui.enabled", "false")
              .set("spark.sql.adaptive.enabled", "false")
              .set("spark.sql.shuffle.partitions", "200")
              .set("spark.executor.extraClassPath", a.get("--plugin-jar"));
          if (!mode.equals(SORT)) {
            conf.set("spark.shuffle.manager", SparkSuite.MANAGER)
                .set("spark.shuffled.socket", daemon.socket.toString());
          }
          if (modes.contains(SERVING)) {
            conf.set("spark.shuffle.readHostLocalDisk", "false");
          }
          if (mode.equals(SERVING)) {
            conf.set("spark.shuffled.serving.enabled", "true");
          }
          double[] m = run(conf, daemon, rows, maps);
          results.computeIfAbsent(mode, k -> new ArrayList<>()).add(m);
          System.out.printf("%-16s rep %d: job %.2f s (map stage %.2f s, reduce stage %.2f s),"
                  + " shuffle write time %.2f s, fetch wait %.2f s, CPU executors %.2f s"
                  + " + daemon %.2f s, shuffle bytes %.0f MiB, remote fetched %.0f MiB,"
                  + " served %.0f chunks%n",
              mode, r + 1, m[JOB], m[MAP], m[REDUCE], m[WRITE], m[WAIT], m[CPU], m[DCPU],
              m[BYTES] / (1 << 20), m[REMOTE] / (1 << 20), m[CHUNKS]);
          System.out.flush();
        }
      }
    } finally {
      daemon.close();
    }
    System.out.printf("medians over %d runs, %d MiB of rows, %d map tasks, %d executors:%n",
        reps, mib, maps, executors);
    for (Map.Entry<String, List<double[]>> e : results.entrySet()) {
      List<double[]> v = e.getValue();
      System.out.printf("%-16s job %.2f s [%.2f..%.2f], map stage %.2f s, reduce stage %.2f s"
              + " [%.2f..%.2f], shuffle write time %.2f s, fetch wait %.2f s [%.2f..%.2f],"
              + " CPU executors %.2f s + daemon %.2f s = %.2f s, shuffle bytes %.0f MiB,"
              + " remote fetched %.0f MiB, served %.0f chunks%n",
          e.getKey(), median(v, JOB), min(v, JOB), max(v, JOB), median(v, MAP),
          median(v, REDUCE), min(v, REDUCE), max(v, REDUCE), median(v, WRITE),
          median(v, WAIT), min(v, WAIT), max(v, WAIT), median(v, CPU), median(v, DCPU),
          median(v, CPU) + median(v, DCPU), median(v, BYTES) / (1 << 20),
          median(v, REMOTE) / (1 << 20), median(v, CHUNKS));
    }
    List<double[]> base = results.get(modes.get(0));
    for (String mode : modes.subList(1, modes.size())) {
      List<double[]> v = results.get(mode);
      List<double[]> ratios = new ArrayList<>();
      for (int r = 0; r < reps; r++) {
        ratios.add(new double[] {
          v.get(r)[JOB] / base.get(r)[JOB], v.get(r)[REDUCE] / base.get(r)[REDUCE]
        });
      }
      System.out.printf("%s/%s: job wall time %.3f (median of %d paired ratios, %.3f..%.3f;"
              + " geometric mean %.3f), reduce stage %.3f (%.3f..%.3f)%n",
          mode, modes.get(0), median(ratios, 0), reps, min(ratios, 0), max(ratios, 0),
          geomean(ratios, 0), median(ratios, 1), min(ratios, 1), max(ratios, 1));
    }
  }

  private static final String SORT = "sort";
  private static final String SHUFFLED = "shuffled";
  private static final String SERVING = "shuffled-serving";
  // Indexes into a run's figures.
  private static final int JOB = 0;
  private static final int MAP = 1;
  private static final int REDUCE = 2;
  private static final int WRITE = 3;
  private static final int WAIT = 4;
  private static final int CPU = 5;
  private static final int DCPU = 6;
  private static final int BYTES = 7;
  private static final int REMOTE = 8;
  private static final int CHUNKS = 9;

  private static double min(List<double[]> runs, int i) {
    return runs.stream().mapToDouble(m -> m[i]).min().orElse(Double.NaN);
  }

  private static double max(List<double[]> runs, int i) {
    return runs.stream().mapToDouble(m -> m[i]).max().orElse(Double.NaN);
  }

  private static double geomean(List<double[]> runs, int i) {
    return Math.exp(runs.stream().mapToDouble(m -> Math.log(m[i])).average().orElse(Double.NaN));
  }

  private static double median(List<double[]> runs, int i) {
    double[] v = runs.stream().mapToDouble(m -> m[i]).toArray();
    Arrays.sort(v);
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }

  /** The figures of one run, indexed by {@link #JOB} to {@link #CHUNKS}. */
  private static double[] run(SparkConf conf, Daemon daemon, long rows, int maps)
      throws Exception {
    SparkSession spark = SparkSession.builder().appName("shuffled bench").config(conf)
        .getOrCreate();
    try {
      Stages l = new Stages();
      spark.sparkContext().addSparkListener(l);
      // Warm the executors up (JIT, class loading) with a small run of the same plan.
      query(spark, rows / 50, maps);
      spark.sparkContext().listenerBus().waitUntilEmpty(30_000);
      l.reset();
      String app = spark.sparkContext().applicationId();
      settle(app);
      double cpu0 = executorCpu(app);
      Map<String, Double> d0 = daemon.metrics();
      long t0 = System.nanoTime();
      query(spark, rows, maps);
      long t1 = System.nanoTime();
      spark.sparkContext().listenerBus().waitUntilEmpty(30_000);
      double cpu = executorCpu(app) - cpu0;
      Map<String, Double> d1 = daemon.metrics();
      double[] m = new double[CHUNKS + 1];
      m[JOB] = (t1 - t0) / 1e9;
      m[MAP] = l.mapStageMillis.get() / 1e3;
      m[REDUCE] = l.reduceStageMillis.get() / 1e3;
      m[WRITE] = l.writeNanos.get() / 1e9;
      m[WAIT] = l.fetchWaitMillis.get() / 1e3;
      m[CPU] = cpu;
      m[DCPU] = delta(d0, d1, "process_cpu_seconds_total");
      m[BYTES] = l.writeBytes.get();
      m[REMOTE] = l.remoteBytes.get();
      m[CHUNKS] = delta(d0, d1, "shuffled_serve_chunks_total");
      return m;
    } finally {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  /**
   * Lets the machine settle before the measured job: waits (up to 60 s) for the executor JVMs
   * of earlier applications to exit, writes the dirty pages back ({@code sync}: the earlier
   * runs' map outputs and this run's warm-up) and idles 2 s, so that no measured job runs beside
   * the previous application's exit, file removal or writeback.
   */
  private static void settle(String app) throws IOException, InterruptedException {
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (System.nanoTime() < deadline && ProcessHandle.allProcesses().anyMatch(h -> {
      String cmd = h.info().commandLine().orElse("");
      return cmd.contains("CoarseGrainedExecutorBackend") && !cmd.contains(app);
    })) {
      Thread.sleep(200);
    }
    new ProcessBuilder("sync").inheritIO().start().waitFor();
    Thread.sleep(2000);
  }

  private static double delta(Map<String, Double> before, Map<String, Double> after, String k) {
    return after.getOrDefault(k, 0.0) - before.getOrDefault(k, 0.0);
  }

  private static void query(SparkSession spark, long rows, int maps) {
    // Every column crosses the shuffle: the noop sink reads them all, so nothing is pruned.
    spark.range(0, rows, 1, maps)
        .selectExpr("id", "id % 1000003 AS k", "sha2(CAST(id AS STRING), 256) AS s")
        .repartition(200, org.apache.spark.sql.functions.col("k"))
        .write().format("noop").mode("overwrite").save();
  }

  /** utime + stime of this application's executor JVMs, in seconds. */
  private static double executorCpu(String app) throws IOException {
    double total = 0;
    long hz = 100; // USER_HZ on Linux
    for (ProcessHandle h : ProcessHandle.allProcesses().toList()) {
      String cmd = h.info().commandLine().orElse("");
      if (!cmd.contains("CoarseGrainedExecutorBackend") || !cmd.contains(app)) {
        continue;
      }
      try {
        String stat = Files.readString(Path.of("/proc/" + h.pid() + "/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        total += (Long.parseLong(f[11]) + Long.parseLong(f[12])) / (double) hz;
      } catch (IOException gone) {
        // exited meanwhile
      }
    }
    return total;
  }

  /**
   * Sums the map stages' and the reduce stages' wall time, the map tasks' shuffle write metrics
   * and the reduce tasks' fetch wait time and remote bytes.
   */
  static final class Stages extends SparkListener {
    final AtomicLong mapStageMillis = new AtomicLong();
    final AtomicLong reduceStageMillis = new AtomicLong();
    final AtomicLong writeNanos = new AtomicLong();
    final AtomicLong writeBytes = new AtomicLong();
    final AtomicLong fetchWaitMillis = new AtomicLong();
    final AtomicLong remoteBytes = new AtomicLong();

    void reset() {
      mapStageMillis.set(0);
      reduceStageMillis.set(0);
      writeNanos.set(0);
      writeBytes.set(0);
      fetchWaitMillis.set(0);
      remoteBytes.set(0);
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd e) {
      if (e.taskMetrics() == null) {
        return;
      }
      if ("ShuffleMapTask".equals(e.taskType())) {
        writeNanos.addAndGet(e.taskMetrics().shuffleWriteMetrics().writeTime());
        writeBytes.addAndGet(e.taskMetrics().shuffleWriteMetrics().bytesWritten());
      }
      fetchWaitMillis.addAndGet(e.taskMetrics().shuffleReadMetrics().fetchWaitTime());
      remoteBytes.addAndGet(e.taskMetrics().shuffleReadMetrics().remoteBytesRead());
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted e) {
      StageInfo s = e.stageInfo();
      if (s.taskMetrics() == null || s.submissionTime().isEmpty()
          || s.completionTime().isEmpty()) {
        return;
      }
      long millis = (Long) s.completionTime().get() - (Long) s.submissionTime().get();
      if (s.taskMetrics().shuffleWriteMetrics().bytesWritten() > 0) {
        mapStageMillis.addAndGet(millis);
      } else if (s.taskMetrics().shuffleReadMetrics().totalBytesRead() > 0) {
        reduceStageMillis.addAndGet(millis);
      }
    }
  }
}
