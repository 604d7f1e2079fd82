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
 * rows repartitioned by key into a sink that reads every column), with Spark's sort shuffle and with the plugin, alternating, {@code --reps}
 * times each. Per run: the map stage's wall time, the shuffle write time of its tasks (Spark's
 * task metrics), and the CPU seconds of the executor JVMs and of the daemon over the map stage.
 * Prints one line per run and the medians.
 *
 * <p>Arguments: {@code --daemon BIN --work DIR --plugin-jar JAR [--mib 2048] [--reps 5]
 * [--executors 2]}.
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
    Path work = Path.of(a.get("--work"));
    Path local = Files.createDirectories(work.resolve("local")).toRealPath();
    Daemon daemon = new Daemon(Path.of(a.get("--daemon")), work, local);
    daemon.start();
    // A row is 8 + 8 + 64 characters of payload (about 100 bytes as an UnsafeRow).
    long rows = mib * (1L << 20) / 100;
    int maps = (int) Math.max(executors, mib / 64);
    Map<String, List<double[]>> results = new LinkedHashMap<>();
    try {
      for (int r = 0; r < reps; r++) {
        for (String mode : List.of("sort", "shuffled")) {
          SparkConf conf = new SparkConf()
              .setMaster("local-cluster[" + executors + ",1,2048]")
              .set("spark.executor.memory", "1g")
              .set("spark.local.dir", local.toString())
              .set("spark.ui.enabled", "false")
              .set("spark.sql.adaptive.enabled", "false")
              .set("spark.sql.shuffle.partitions", "200")
              .set("spark.executor.extraClassPath", a.get("--plugin-jar"));
          if (mode.equals("shuffled")) {
            conf.set("spark.shuffle.manager", SparkSuite.MANAGER)
                .set("spark.shuffled.socket", daemon.socket.toString());
          }
          double[] m = run(conf, daemon, rows, maps);
          results.computeIfAbsent(mode, k -> new ArrayList<>()).add(m);
          System.out.printf("%-8s rep %d: map stage %.2f s, shuffle write time %.2f s,"
                  + " CPU executors %.2f s + daemon %.2f s, shuffle bytes %.0f MiB%n",
              mode, r + 1, m[0], m[1], m[2], m[3], m[4] / (1 << 20));
        }
      }
    } finally {
      daemon.close();
    }
    System.out.printf("medians over %d runs, %d MiB of rows, %d map tasks, %d executors:%n",
        reps, mib, maps, executors);
    for (Map.Entry<String, List<double[]>> e : results.entrySet()) {
      System.out.printf("%-8s map stage %.2f s, shuffle write time %.2f s, CPU executors %.2f s"
              + " + daemon %.2f s = %.2f s, shuffle bytes %.0f MiB%n",
          e.getKey(), median(e.getValue(), 0), median(e.getValue(), 1), median(e.getValue(), 2),
          median(e.getValue(), 3), median(e.getValue(), 2) + median(e.getValue(), 3),
          median(e.getValue(), 4) / (1 << 20));
    }
  }

  private static double median(List<double[]> runs, int i) {
    double[] v = runs.stream().mapToDouble(m -> m[i]).toArray();
    Arrays.sort(v);
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }

  /** {map stage seconds, shuffle write seconds, executor CPU s, daemon CPU s, shuffle bytes}. */
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
      double cpu0 = executorCpu(app);
      double d0 = daemon.metrics().getOrDefault("process_cpu_seconds_total", 0.0);
      query(spark, rows, maps);
      spark.sparkContext().listenerBus().waitUntilEmpty(30_000);
      double cpu = executorCpu(app) - cpu0;
      double d = daemon.metrics().getOrDefault("process_cpu_seconds_total", 0.0) - d0;
      return new double[] {
        l.mapStageMillis.get() / 1e3, l.writeNanos.get() / 1e9, cpu, d, l.writeBytes.get()
      };
    } finally {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
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

  /** Sums the map stages' wall time and their tasks' shuffle write metrics. */
  static final class Stages extends SparkListener {
    final AtomicLong mapStageMillis = new AtomicLong();
    final AtomicLong writeNanos = new AtomicLong();
    final AtomicLong writeBytes = new AtomicLong();

    void reset() {
      mapStageMillis.set(0);
      writeNanos.set(0);
      writeBytes.set(0);
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd e) {
      if ("ShuffleMapTask".equals(e.taskType()) && e.taskMetrics() != null) {
        writeNanos.addAndGet(e.taskMetrics().shuffleWriteMetrics().writeTime());
        writeBytes.addAndGet(e.taskMetrics().shuffleWriteMetrics().bytesWritten());
      }
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted e) {
      StageInfo s = e.stageInfo();
      if (s.taskMetrics() != null && s.taskMetrics().shuffleWriteMetrics().bytesWritten() > 0
          && s.submissionTime().isDefined() && s.completionTime().isDefined()) {
        mapStageMillis.addAndGet(
            (Long) s.completionTime().get() - (Long) s.submissionTime().get());
      }
    }
  }
}
