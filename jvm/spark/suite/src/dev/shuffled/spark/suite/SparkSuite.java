package dev.shuffled.spark.suite;

import dev.shuffled.client.ShuffledClient;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.apache.spark.SparkConf;
import org.apache.spark.Success$;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.LongAccumulator;
import scala.Tuple2;

/**
 * The Spark suite: real Spark (executors in their own JVMs, local-cluster mode) runs every job
 * with Spark's sort shuffle and with the shuffled plugin, and the results must be identical; the
 * daemon's Stats (asked through the JVM client) and its Prometheus metrics must show that every
 * map task of a plugin run committed through it. Then the
 * fallbacks, the external shuffle service serving the daemon's files after their executor is
 * killed, a daemon killed during a map stage, and removal.
 *
 * <p>Every Spark minor runs the baseline and the plugin on Spark's defaults (row checksums on
 * from 4.2): every job's result equals the sort shuffle's, every map task committed through the
 * daemon, the row checksums of the map statuses (4.1+) equal those of the sort shuffle's map
 * tasks, and the executors logged no fallback to Spark's writer. {@code --checks light} stops
 * there, with one more context of another serializer and codec; {@code --checks full} (the
 * default) runs everything else too.
 *
 * <p>Arguments: {@code --daemon BIN --work DIR --plugin-jar JAR [--checks full|light]
 * [--encryption true] [--other-jar JAR]}. With {@code --encryption true} the plugin's contexts
 * run with {@code spark.io.encryption.enabled=true} and are judged the same way. {@code
 * --other-jar} names the plugin's jar for other Spark versions, which must refuse to start on
 * this one. Exit status 0 when everything passed, 1 otherwise; each check prints one line.
 */
public final class SparkSuite {
  static final String MANAGER = "org.apache.spark.shuffle.shuffled.ShuffledShuffleManager";
  static final String VERSION = org.apache.spark.package$.MODULE$.SPARK_VERSION();
  static final boolean SPARK4 = !VERSION.startsWith("3.");
  /** Spark 4.1+: MapStatus carries the row checksum of its map task. */
  static final boolean ROW_CHECKSUMS = !VERSION.startsWith("3.") && !VERSION.startsWith("4.0");
  static final String ROW_CHECKSUM_CONF = "spark.sql.shuffle.orderIndependentChecksum.enabled";

  private final Path work;
  private final Path localRoot;
  private final Path pluginJar;
  private final Path sparkHome;
  private final Daemon daemon;
  private final Map<String, String> expected = new LinkedHashMap<>();
  /** The row checksums of the sort shuffle's map tasks of Jobs.SQL_JOIN_AGG (4.1+). */
  private String expectedChecksums;
  private boolean full = true;
  private boolean encryption;
  private Path otherJar;
  /** Whether the serving checks run: by default with the full checks; --serving overrides. */
  private Boolean serving;
  /** --serving only: the baseline of the job the serving checks run, then those checks alone. */
  private boolean servingOnly;
  private final List<String> failures = new ArrayList<>();
  private int checks;

  private SparkSuite(Path bin, Path work, Path pluginJar, Path sparkHome) throws IOException {
    this.work = work;
    this.localRoot = Files.createDirectories(work.resolve("local")).toRealPath();
    this.pluginJar = pluginJar;
    this.sparkHome = sparkHome;
    this.daemon = new Daemon(bin, work, localRoot);
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> a = new LinkedHashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      a.put(args[i], args[i + 1]);
    }
    String checks = a.getOrDefault("--checks", "full");
    for (String k : List.of("--daemon", "--work", "--plugin-jar")) {
      if (!a.containsKey(k) || !(checks.equals("full") || checks.equals("light"))) {
        System.err.println("usage: SparkSuite --daemon BIN --work DIR --plugin-jar JAR"
            + " [--checks full|light] [--encryption true] [--other-jar JAR] [--serving true|false|only]");
        System.exit(2);
      }
    }
    String home = System.getenv("SPARK_HOME");
    SparkSuite s = new SparkSuite(Path.of(a.get("--daemon")), Path.of(a.get("--work")),
        Path.of(a.get("--plugin-jar")), Path.of(home));
    s.full = checks.equals("full");
    s.encryption = Boolean.parseBoolean(a.getOrDefault("--encryption", "false"));
    s.otherJar = a.containsKey("--other-jar") ? Path.of(a.get("--other-jar")) : null;
    s.servingOnly = "only".equals(a.get("--serving"));
    s.serving = a.containsKey("--serving") ? s.servingOnly || Boolean.parseBoolean(a.get("--serving"))
        : null;
    long t0 = System.nanoTime();
    int status;
    try {
      status = s.runAll();
    } finally {
      s.daemon.close();
    }
    System.out.printf("suite: Spark %s (%s checks%s), %d checks, %d failed, %.0f s%n",
        VERSION, checks, s.encryption ? ", IO encryption on" : "", s.checks, s.failures.size(),
        (System.nanoTime() - t0) / 1e9);
    for (String f : s.failures) {
      System.out.println("FAILED: " + f);
    }
    System.exit(status);
  }

  private int runAll() throws Exception {
    daemon.start();

    // Spark's own sort shuffle gives the expected result of every job, and, from 4.1 on, the row
    // checksums of its map tasks (turned on here for 4.1, where they are off by default).
    List<Jobs.Named> jobs = servingOnly ? List.of(Jobs.REDUCE_BY_KEY)
        : full ? Jobs.ALL : Jobs.ALL.stream().filter(j -> j != Jobs.SLOW).toList();
    SparkConf baseline = base(2);
    if (ROW_CHECKSUMS) {
      baseline.set(ROW_CHECKSUM_CONF, "true");
    }
    context("baseline: sort shuffle, Java serializer", baseline, (spark, l) -> {
      for (Jobs.Named j : jobs) {
        if (j == Jobs.SQL_JOIN_AGG && ROW_CHECKSUMS) {
          expectedChecksums =
              withRowChecksums(spark, () -> expected.put(j.name(), j.job().run(spark)));
        } else {
          expected.put(j.name(), j.job().run(spark));
        }
      }
    });
    if (expected.size() != jobs.size()) {
      failures.add("the baseline did not run every job; nothing to compare with");
      return 1;
    }
    if (ROW_CHECKSUMS && jobs.contains(Jobs.SQL_JOIN_AGG)) {
      check(expectedChecksums != null && expectedChecksums.matches(".*[1-9a-f].*"),
          "baseline: the sort shuffle's map tasks of " + Jobs.SQL_JOIN_AGG.name()
              + " reported row checksums " + expectedChecksums);
    }

    if (servingOnly) {
      servingChecks();
      return failures.isEmpty() ? 0 : 1;
    }
    // The plugin on this Spark's defaults, as a user runs it.
    defaults(jobs);
    if (otherJar != null) {
      otherJarRefused();
    }
    if (!full) {
      SparkConf kryo = encrypted(plugin(2)
          .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
          .set("spark.io.compression.codec", "zstd"));
      if (ROW_CHECKSUMS) {
        kryo.set(ROW_CHECKSUM_CONF, "true"); // opt-in on 4.1, the default later
      }
      String name = "plugin: Kryo, zstd" + (ROW_CHECKSUMS ? ", row checksums on" : "")
          + (encryption ? ", spark.io.encryption.enabled=true" : "");
      noFallbacks.add(name);
      context(name, kryo, (spark, l) -> {
            for (Jobs.Named j : List.of(Jobs.REDUCE_BY_KEY, Jobs.GROUP_BY_KEY, Jobs.SKEWED)) {
              compared(spark, l, j);
            }
            rowChecksums(spark, l);
          });
      if (Boolean.TRUE.equals(serving)) {
        servingChecks();
      }
      return failures.isEmpty() ? 0 : 1;
    }

    context("plugin: Java serializer, lz4, ADLER32, batchBytes 256k",
        plugin(2).set("spark.io.compression.codec", "lz4")
            .set("spark.shuffle.checksum.algorithm", "ADLER32")
            .set("spark.shuffled.batchBytes", "256k"),
        (spark, l) -> {
          long t0 = System.currentTimeMillis() - 2000;
          for (Jobs.Named j : List.of(Jobs.REDUCE_BY_KEY, Jobs.GROUP_BY_KEY, Jobs.SQL_JOIN_AGG,
              Jobs.SKEWED, Jobs.WIDE)) {
            compared(spark, l, j);
          }
          multiBatch(spark, l);
          lz4Blocks(t0, 5, "32k, Spark's default");
          removal(spark);
        });
    // CRC32C is Spark 4's; Spark 3.5 takes ADLER32 and CRC32 only, and so does the plugin there.
    String checksum = SPARK4 ? "CRC32C" : "ADLER32";
    context("plugin: Java serializer, lz4 in 64k blocks, " + checksum
            + "; beyond 2^20 partitions; removal with the daemon down",
        plugin(2).set("spark.io.compression.codec", "lz4")
            .set("spark.io.compression.lz4.blockSize", "64k")
            .set("spark.shuffle.checksum.algorithm", checksum)
            .set("spark.shuffled.batchBytes", "1m"),
        (spark, l) -> {
          long t0 = System.currentTimeMillis() - 2000; // file times may be coarse
          long a0 = daemon.stat(ShuffledClient.STAT_ABORTS_TOTAL);
          for (Jobs.Named j : List.of(Jobs.REDUCE_BY_KEY, Jobs.SQL_JOIN_AGG, Jobs.SKEWED)) {
            compared(spark, l, j);
          }
          lz4Blocks(t0, 6, "64k");
          long aborts = daemon.stat(ShuffledClient.STAT_ABORTS_TOTAL) - a0;
          check(aborts == 0, "the daemon aborted " + aborts + " map outputs (Stats aborts_total)");
          checksumFiles(checksum);
          beyondTheProtocolsPartitions(spark, l);
          removalWithTheDaemonDown(spark, l);
        });
    if (!SPARK4) {
      crc32cRefused();
    }
    context("plugin: Kryo, zstd level 3, CRC32",
        plugin(2).set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
            .set("spark.io.compression.codec", "zstd")
            .set("spark.io.compression.zstd.level", "3")
            .set("spark.shuffle.checksum.algorithm", "CRC32"),
        (spark, l) -> {
          for (Jobs.Named j : List.of(Jobs.REDUCE_BY_KEY, Jobs.GROUP_BY_KEY, Jobs.SQL_JOIN_AGG)) {
            compared(spark, l, j);
          }
          killedTasks(spark, l);
        });
    context("plugin: Kryo, spark.shuffle.compress=false, fallback off; the daemon killed",
        plugin(2).set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
            .set("spark.shuffle.compress", "false")
            .set("spark.shuffled.batchBytes", "128k")
            .set("spark.shuffled.fallback.enabled", "false"),
        (spark, l) -> {
          for (Jobs.Named j : List.of(Jobs.REDUCE_BY_KEY, Jobs.GROUP_BY_KEY, Jobs.SQL_JOIN_AGG,
              Jobs.MULTI_BATCH)) {
            compared(spark, l, j);
          }
          daemonKilled(spark, l);
          daemonDrained(spark, l);
        });

    // IO encryption: the daemon encrypts with the application's key, Spark's reducers decrypt.
    context("plugin: spark.io.encryption.enabled=true, 256-bit key, lz4, CRC32",
        plugin(2).set("spark.io.encryption.enabled", "true")
            .set("spark.io.encryption.keySizeBits", "256")
            .set("spark.io.compression.codec", "lz4")
            .set("spark.shuffle.checksum.algorithm", "CRC32")
            .set("spark.shuffled.batchBytes", "256k"),
        (spark, l) -> {
          long t0 = System.currentTimeMillis() - 2000;
          for (Jobs.Named j : List.of(Jobs.REDUCE_BY_KEY, Jobs.GROUP_BY_KEY, Jobs.SQL_JOIN_AGG)) {
            compared(spark, l, j);
          }
          multiBatch(spark, l);
          encryptedBlocks(t0);
        });

    // A daemon at its partition-state bound: Spark's writer takes the tasks it refuses.
    daemon.kill();
    daemon.start(List.of("--partition-state-limit=64KiB"));
    try {
      context("plugin: the daemon's --partition-state-limit under a 2000-partition shuffle",
          plugin(2), this::resourceExhausted);
    } finally {
      daemon.kill();
      daemon.start();
    }

    // Fallbacks: Spark's writer, correct results, nothing through the daemon.
    context("fallback: no daemon at spark.shuffled.socket, fallback on",
        plugin(1).set("spark.shuffled.socket", work.resolve("nothing-here.sock").toString()),
        (spark, l) -> notThroughDaemon(spark, l, Jobs.REDUCE_BY_KEY));
    context("no daemon at spark.shuffled.socket, fallback off",
        plugin(1).set("spark.shuffled.socket", work.resolve("nothing-here.sock").toString())
            .set("spark.shuffled.fallback.enabled", "false")
            .set("spark.task.maxFailures", "1"),
        this::failsWithoutDaemon);

    externalShuffleService();
    if (!Boolean.FALSE.equals(serving)) {
      servingChecks();
    }
    return failures.isEmpty() ? 0 : 1;
  }

  // --- configurations ------------------------------------------------------

  private SparkConf base(int executors) {
    return new SparkConf()
        .setMaster("local-cluster[" + executors + ",1,1024]")
        .set("spark.executor.memory", "640m")
        .set("spark.local.dir", localRoot.toString())
        .set("spark.ui.enabled", "false")
        .set("spark.sql.shuffle.partitions", "8")
        .set("spark.sql.autoBroadcastJoinThreshold", "-1")
        .set("spark.executor.extraClassPath", pluginJar.toString())
        // Short-lived JVMs on a small machine: start fast, compile little.
        .set("spark.executor.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC");
  }

  private SparkConf plugin(int executors) {
    return base(executors)
        .set("spark.shuffle.manager", MANAGER)
        .set("spark.shuffled.socket", daemon.socket.toString());
  }

  interface Body {
    void run(SparkSession spark, Tasks listener) throws Exception;
  }

  /** Runs body in a fresh SparkSession of conf; an exception is one failure. */
  private void context(String name, SparkConf conf, Body body) {
    System.out.println("== " + name);
    long t0 = System.nanoTime();
    SparkSession spark = null;
    try {
      spark = SparkSession.builder().appName("shuffled suite: " + name).config(conf).getOrCreate();
      Tasks l = new Tasks();
      spark.sparkContext().addSparkListener(l);
      body.run(spark, l);
    } catch (Throwable e) {
      fail(name + ": " + e);
      e.printStackTrace(System.out);
    } finally {
      if (spark != null) {
        boolean removes = MANAGER.equals(conf.get("spark.shuffle.manager", ""))
            && daemon.socket.toString().equals(conf.get("spark.shuffled.socket", ""));
        String app = spark.sparkContext().applicationId();
        long r0 = removes ? removals("application") : 0;
        spark.stop();
        if (removes) {
          long r = removals("application") - r0;
          // Serving: the driver also removes it through the block server (ShuffledDataIO).
          boolean served = Boolean.parseBoolean(conf.get("spark.shuffled.serving.enabled", "false"));
          check(served ? r >= 1 : r == 1, "stop: the driver removed application " + app
              + " from the daemon (" + r + " removals of the application)");
        }
        if (noFallbacks.remove(name)) {
          noFallbackLogged(app);
        }
      }
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
    System.out.printf("   (%.1f s)%n", (System.nanoTime() - t0) / 1e9);
  }

  private long removals(String kind) {
    try {
      return daemon.metric("shuffled_removals_total{kind=\"" + kind + "\"}");
    } catch (IOException e) {
      fail("reading the daemon's metrics: " + e);
      return -1;
    }
  }

  /** Contexts whose executors must log no fallback to Spark's writer (checked at their stop). */
  private final Set<String> noFallbacks = new java.util.HashSet<>();

  private SparkConf encrypted(SparkConf conf) {
    return encryption ? conf.set("spark.io.encryption.enabled", "true") : conf;
  }

  // --- Spark's defaults ----------------------------------------------------

  /**
   * The plugin on this Spark's defaults (lz4, ADLER32, row checksums as the version has them):
   * every job equals the sort shuffle, every map task through the daemon, the row checksums
   * equal the sort shuffle's, and no executor fell back to Spark's writer.
   */
  private void defaults(List<Jobs.Named> jobs) {
    String name = "plugin: Spark " + VERSION + "'s defaults"
        + (encryption ? ", spark.io.encryption.enabled=true" : "");
    noFallbacks.add(name);
    context(name, encrypted(plugin(2)), (spark, l) -> {
      String sums = rowChecksumSetting(spark);
      System.out.println("   (" + ROW_CHECKSUM_CONF + " = " + sums + ")");
      for (Jobs.Named j : jobs) {
        if (j != Jobs.SLOW && j != Jobs.SQL_JOIN_AGG) {
          compared(spark, l, j);
        }
      }
      rowChecksums(spark, l);
    });
  }

  /** This session's row checksum setting: its value, or "none" before Spark 4.1. */
  private static String rowChecksumSetting(SparkSession spark) {
    if (!ROW_CHECKSUMS) {
      return "none (Spark " + VERSION + " has no row checksums)";
    }
    return spark.conf().get(ROW_CHECKSUM_CONF);
  }

  /**
   * Jobs.SQL_JOIN_AGG through the plugin, compared; where the session has row checksums on, the
   * checksums of its map statuses must equal those of the sort shuffle's map tasks (they do not
   * depend on the order in which a task writes its records, so equal records give equal sums).
   */
  private void rowChecksums(SparkSession spark, Tasks l) throws Exception {
    if (!ROW_CHECKSUMS || !Boolean.parseBoolean(spark.conf().get(ROW_CHECKSUM_CONF))) {
      compared(spark, l, Jobs.SQL_JOIN_AGG);
      return;
    }
    String got = withRowChecksums(spark, () -> compared(spark, l, Jobs.SQL_JOIN_AGG));
    check(got.equals(expectedChecksums), Jobs.SQL_JOIN_AGG.name() + ": the row checksums of the"
        + " plugin's map statuses " + got + " equal the sort shuffle's " + expectedChecksums);
  }

  interface Run {
    Object run() throws Exception;
  }

  /**
   * Runs r and returns the row checksums (MapStatus.checksumValue, Spark 4.1+) of the map tasks of
   * the shuffles it made, by map index within a shuffle: "[a,b,..][c,d,..]", the shuffles sorted.
   */
  private static String withRowChecksums(SparkSession spark, Run r) throws Exception {
    org.apache.spark.MapOutputTrackerMaster tracker =
        (org.apache.spark.MapOutputTrackerMaster)
            org.apache.spark.SparkEnv.get().mapOutputTracker();
    Set<Integer> before = new TreeSet<>();
    tracker.shuffleStatuses().keys().foreach(k -> before.add((Integer) k));
    r.run();
    Set<Integer> after = new TreeSet<>();
    tracker.shuffleStatuses().keys().foreach(k -> after.add((Integer) k));
    after.removeAll(before);
    java.lang.reflect.Method value =
        org.apache.spark.scheduler.MapStatus.class.getMethod("checksumValue");
    List<String> shuffles = new ArrayList<>();
    for (int id : after) {
      org.apache.spark.scheduler.MapStatus[] st =
          tracker.shuffleStatuses().get(id).get().mapStatuses();
      StringBuilder b = new StringBuilder("[");
      for (int m = 0; m < st.length; m++) {
        b.append(m == 0 ? "" : ",")
            .append(st[m] == null ? "missing" : Long.toHexString((Long) value.invoke(st[m])));
      }
      shuffles.add(b.append(']').toString());
    }
    // The job's shuffles sorted, not in id order: the join's two sides get their ids in the
    // order their stages happen to be submitted.
    java.util.Collections.sort(shuffles);
    return String.join("", shuffles);
  }

  /** The executors of application app logged no fallback to Spark's writer. */
  private void noFallbackLogged(String app) {
    List<String> lines = new ArrayList<>();
    int logs = 0;
    try (Stream<Path> s = Files.walk(sparkHome.resolve("work").resolve(app))) {
      for (Path p : s.filter(p -> p.getFileName().toString().equals("stderr")).toList()) {
        logs++;
        for (String line : Files.readAllLines(p)) {
          if (line.contains("Spark's own writer")
              || line.contains("WARN") && line.contains("shuffled")) {
            lines.add(line);
          }
        }
      }
    } catch (IOException e) {
      fail("reading the executor logs of " + app + ": " + e);
      return;
    }
    check(logs >= 2 && lines.isEmpty(), "the " + logs + " executors of " + app
        + " logged no fallback to Spark's writer" + (lines.isEmpty() ? "" : ": " + lines.get(0)));
  }

  /**
   * The plugin's jar for other Spark versions refuses this one when its shuffle manager starts,
   * as SparkEnv starts it on the driver and on each executor, naming both versions.
   */
  private void otherJarRefused() throws Exception {
    System.out.println("== the plugin's jar for other Spark versions on Spark " + VERSION);
    Path suiteJar = Path.of(SparkSuite.class.getProtectionDomain().getCodeSource().getLocation()
        .toURI());
    String javaBin = ProcessHandle.current().info().command().orElse("java");
    Process p = new ProcessBuilder(javaBin, "-cp",
        sparkHome.resolve("jars") + "/*:" + otherJar + ":" + suiteJar,
        "dev.shuffled.spark.suite.StartManager", MANAGER)
        .redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(),
        java.nio.charset.StandardCharsets.UTF_8);
    boolean exited = p.waitFor(60, TimeUnit.SECONDS);
    String line = out.lines().filter(x -> x.startsWith("refused: ")).findFirst().orElse(out);
    check(exited && line.startsWith("refused: ") && line.contains("Spark " + VERSION)
            && line.contains(otherJar.getFileName().toString()) && !line.contains("NoSuchMethod"),
        "the shuffle manager of " + otherJar.getFileName() + " refuses to start: "
            + firstLine(line));
  }

  // --- checks --------------------------------------------------------------

  private void check(boolean ok, String what) {
    checks++;
    System.out.println((ok ? "   ok   " : "   FAIL ") + what);
    if (!ok) {
      failures.add(what);
    }
  }

  private void fail(String what) {
    checks++;
    System.out.println("   FAIL " + what);
    failures.add(what);
  }

  /**
   * Runs the job with the plugin: same result as the sort shuffle, and every successful map task
   * committed through the daemon. Returns the daemon's commits for the job.
   */
  private long compared(SparkSession spark, Tasks l, Jobs.Named j) throws Exception {
    long c0 = daemon.stat(ShuffledClient.STAT_COMMITS_TOTAL);
    long p0 = daemon.metric("shuffled_commits_total");
    long m0 = daemon.metric("shuffled_marked_commits_total");
    l.reset(spark);
    String got = j.job().run(spark);
    l.drain(spark);
    long commits = daemon.stat(ShuffledClient.STAT_COMMITS_TOTAL) - c0;
    long prom = daemon.metric("shuffled_commits_total") - p0;
    long marked = daemon.metric("shuffled_marked_commits_total") - m0;
    check(got.equals(expected.get(j.name())),
        j.name() + ": result " + got + " equals the sort shuffle's " + expected.get(j.name()));
    check(l.mapTasks.get() > 0 && commits == l.mapTasks.get() && prom == commits,
        j.name() + ": the daemon committed " + commits + " map outputs (Stats commits_total; "
            + prom + " by its metrics) for " + l.mapTasks.get() + " successful map tasks");
    check(marked == l.mapTasksWithRecords.get(),
        j.name() + ": " + marked + " of them had their last batch marked LAST"
            + " (shuffled_marked_commits_total), one per map task that wrote records ("
            + l.mapTasksWithRecords.get() + ")");
    return commits;
  }

  /**
   * Every non-empty partition of the shuffle data files written since {@code since} starts with
   * an lz4-java block of token level {@code level} (log2 of the block size - 10): the block size
   * Spark is configured with reached the daemon.
   */
  private void lz4Blocks(long since, int level, String size) throws IOException {
    partitionStarts(since, level, size, false);
  }

  /**
   * Every non-empty partition of the shuffle data files written since {@code since} is
   * IO-encrypted: an IV and ciphertext, no lz4-java block where the plain stream would start
   * (and the jobs' results, read by Spark's reducers with the application's key, were right).
   */
  private void encryptedBlocks(long since) throws IOException {
    partitionStarts(since, 0, null, true);
  }

  private void partitionStarts(long since, int level, String size, boolean encrypted)
      throws IOException {
    List<Path> data = new ArrayList<>();
    Map<Path, Path> indexes = new java.util.HashMap<>(); // blockmgr dir + name -> path
    try (Stream<Path> s = Files.walk(localRoot)) {
      s.forEach(p -> {
        String n = p.getFileName().toString();
        if (n.matches("shuffle_\\d+_\\d+_0\\.data") && p.toFile().lastModified() >= since) {
          data.add(p);
        } else if (n.matches("shuffle_\\d+_\\d+_0\\.index")) {
          indexes.put(p.getParent().getParent().resolve(n), p); // hashed into another sub-dir
        }
      });
    } catch (java.io.UncheckedIOException e) {
      partitionStarts(since, level, size, encrypted); // a dir removed while walking: again
      return;
    }
    int parts = 0;
    List<String> bad = new ArrayList<>();
    int gone = 0;
    for (Path d : data) {
      String n = d.getFileName().toString();
      ByteBuffer index;
      byte[] bytes;
      try {
        // Read the data first: a removal deletes the index first, then the data.
        bytes = Files.readAllBytes(d);
        Path ip = indexes.get(d.getParent().getParent().resolve(
            n.substring(0, n.length() - 5) + ".index"));
        if (ip == null) {
          gone++;
          continue;
        }
        index = ByteBuffer.wrap(Files.readAllBytes(ip));
      } catch (java.nio.file.NoSuchFileException e) {
        gone++; // Spark's ContextCleaner removed the shuffle meanwhile
        continue;
      }
      int il = index.remaining();
      if (il % 8 != 0 || il < 16 || index.getLong(il - 8) != bytes.length) {
        gone++; // a file being replaced or removed under us
        continue;
      }
      long prev = index.getLong();
      while (index.remaining() >= 8) {
        long end = index.getLong();
        if (end > prev) {
          parts++;
          int off = (int) prev;
          boolean ok = encrypted
              ? end - prev > 16 + 9 && !lz4Block(bytes, off) && !lz4Block(bytes, off + 16)
              : end - prev >= 9 && lz4Block(bytes, off) && (bytes[off + 8] & 0x0F) == level;
          if (!ok && bad.size() < 3) {
            bad.add(n + "@" + off);
          }
        }
        prev = end;
      }
    }
    check(parts > 0 && bad.isEmpty(), parts + " partitions of " + (data.size() - gone)
        + (encrypted
            ? " data files are a 16-byte IV and ciphertext, no lz4-java block in sight"
            : " data files start with lz4-java blocks of " + size + " (token level " + level + ")")
        + (gone == 0 ? "" : "; " + gone + " files removed while read")
        + (bad.isEmpty() ? "" : "; not: " + bad));
  }

  private static boolean lz4Block(byte[] b, int off) {
    return new String(b, off, 8, java.nio.charset.StandardCharsets.US_ASCII).equals("LZ4Block");
  }

  /** The multi-batch job: several runs per map output, so partition ids went backwards. */
  private void multiBatch(SparkSession spark, Tasks l) throws Exception {
    long runs0 = daemon.metric("shuffled_map_output_runs_sum");
    long commits = compared(spark, l, Jobs.MULTI_BATCH);
    long runs = daemon.metric("shuffled_map_output_runs_sum") - runs0;
    check(commits > 0 && runs >= 4 * commits,
        Jobs.MULTI_BATCH.name() + ": " + runs + " runs merged over " + commits
            + " map outputs (several batches per map task)");
  }

  private void notThroughDaemon(SparkSession spark, Tasks l, Jobs.Named j) throws Exception {
    long c0 = daemon.metric("shuffled_commits_total");
    l.reset(spark);
    String got = j.job().run(spark);
    l.drain(spark);
    long commits = daemon.metric("shuffled_commits_total") - c0;
    check(got.equals(expected.get(j.name())),
        j.name() + ": result " + got + " equals the sort shuffle's");
    check(l.mapTasks.get() > 0 && commits == 0,
        j.name() + ": " + l.mapTasks.get() + " map tasks wrote with Spark's writer, "
            + commits + " through the daemon");
  }

  private void failsWithoutDaemon(SparkSession spark, Tasks l) {
    try {
      String got = Jobs.REDUCE_BY_KEY.job().run(spark);
      fail("a job without a daemon and with fallback off succeeded: " + got);
    } catch (Exception e) {
      String m = String.valueOf(e.getMessage());
      check(m.contains("spark.shuffled.socket=") && m.contains("fallback.enabled=false"),
          "a job without a daemon and with fallback off fails with the plugin's message: "
              + firstLine(m));
    }
  }

  /** After the shuffle is cleaned up, its files are gone from the executors' local dirs. */
  private void removal(SparkSession spark) throws Exception {
    Set<Integer> before = shuffleIds();
    check(!before.isEmpty(), "shuffle files of the jobs are in the local dirs: shuffles " + before);
    long r0 = daemon.metric("shuffled_removals_total{kind=\"shuffle\"}");
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    for (int id : before) {
      sc.sc().cleaner().get().doCleanupShuffle(id, true);
    }
    Set<Integer> after = Set.of();
    for (int i = 0; i < 100; i++) { // executors remove asynchronously after the blocking call
      after = shuffleIds();
      if (after.isEmpty()) {
        break;
      }
      Thread.sleep(100);
    }
    long removals = daemon.metric("shuffled_removals_total{kind=\"shuffle\"}") - r0;
    check(after.isEmpty() && removals >= before.size(),
        "after cleanup of shuffles " + before + ", files left of " + after + "; the daemon"
            + " served " + removals + " RemoveShuffle");
  }

  /** Shuffle ids with an index file anywhere under the Spark local dirs. */
  private Set<Integer> shuffleIds() throws IOException {
    Set<Integer> ids = new TreeSet<>();
    try (Stream<Path> s = Files.walk(localRoot)) {
      s.forEach(p -> {
        String n = p.getFileName().toString();
        if (n.startsWith("shuffle_") && n.endsWith("_0.index")) {
          ids.add(Integer.parseInt(n.split("_")[1]));
        }
      });
    } catch (java.io.UncheckedIOException e) {
      // a dir removed while walking: try again later
      return shuffleIds();
    }
    return ids;
  }

  // --- the external shuffle service ------------------------------------------

  private void externalShuffleService() throws Exception {
    int port;
    try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
      port = s.getLocalPort();
    }
    ProcessBuilder pb = new ProcessBuilder(
        sparkHome.resolve("bin/spark-class").toString(),
        "org.apache.spark.deploy.ExternalShuffleService")
        .redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(work.resolve("ess.log").toFile()));
    pb.environment().put("SPARK_SHUFFLE_OPTS", "-Dspark.shuffle.service.port=" + port);
    pb.environment().put("SPARK_DAEMON_MEMORY", "256m");
    Process ess = pb.start();
    try {
      waitForPort(port, ess);
      SparkConf conf = plugin(2)
          .set("spark.io.compression.codec", "snappy")
          .set("spark.shuffle.checksum.enabled", "false")
          .set("spark.shuffled.batchBytes", "64k")
          .set("spark.shuffle.service.enabled", "true")
          .set("spark.shuffle.service.port", Integer.toString(port))
          // Read every block through the service, not host-local disk reads.
          .set("spark.shuffle.readHostLocalDisk", "false");
      context("plugin: Java serializer, snappy, checksums off, batchBytes 64k, read through the"
          + " external shuffle service; an executor killed after the map stage", conf,
          (spark, l) -> {
            for (Jobs.Named j : List.of(Jobs.REDUCE_BY_KEY, Jobs.GROUP_BY_KEY,
                Jobs.MULTI_BATCH)) {
              compared(spark, l, j);
            }
            essKill(spark, l);
          });
      ess.destroy();
      if (!ess.waitFor(20, TimeUnit.SECONDS)) {
        ess.destroyForcibly();
      }
    } finally {
      if (ess.isAlive()) {
        ess.destroyForcibly();
      }
    }
  }

  private void essKill(SparkSession spark, Tasks l) throws Exception {
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    LongAccumulator mapped = sc.sc().longAccumulator("mapped");
    JavaRDD<String> rows = lossJob(spark, mapped);
    long c0 = daemon.metric("shuffled_commits_total");
    l.reset(spark);
    String first = Jobs.fingerprint(rows);
    l.drain(spark);
    long commits = daemon.metric("shuffled_commits_total") - c0;
    check(first.equals(expected.get("reduceByKey")) && commits == l.mapTasks.get(),
        "ess: first run " + first + ", " + commits + " map outputs through the daemon");
    String victim = null;
    for (Map.Entry<String, Integer> e : l.mapTasksByExecutor.entrySet()) {
      if (e.getValue() > 0) {
        victim = e.getKey();
      }
    }
    check(victim != null && l.mapTasksByExecutor.size() == 2,
        "ess: map tasks ran on executors " + l.mapTasksByExecutor);
    if (victim == null) {
      return;
    }
    String app = spark.sparkContext().applicationId();
    String id = victim;
    Optional<ProcessHandle> p = ProcessHandle.allProcesses()
        .filter(h -> {
          String cmd = h.info().commandLine().orElse("");
          return cmd.contains("CoarseGrainedExecutorBackend") && cmd.contains(app)
              && cmd.matches(".*--executor-id " + id + "( .*|$)");
        })
        .findFirst();
    check(p.isPresent(), "ess: found the JVM of executor " + victim);
    if (p.isEmpty()) {
      return;
    }
    p.get().destroyForcibly();
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (sc.sc().statusTracker().getExecutorInfos().length > 2 && System.nanoTime() < deadline) {
      Thread.sleep(100); // the driver plus two executors, until the victim is noticed
    }
    long mappedBefore = mapped.value();
    l.reset(spark);
    String second = Jobs.fingerprint(rows);
    l.drain(spark);
    check(second.equals(expected.get("reduceByKey")),
        "ess: after executor " + victim + " was killed, the reduce stage gives " + second);
    check(l.mapTasks.get() == 0 && mapped.value() == mappedBefore,
        "ess: the map stage was not recomputed (" + l.mapTasks.get() + " map tasks ran, "
            + (mapped.value() - mappedBefore) + " records mapped again)");
  }

  // --- serving: the daemon's block server ------------------------------------

  /** The daemon's block server port while the serving checks run. */
  private int servePort;

  /**
   * The daemon serves its map outputs (--serve-addr): Spark's reducers fetch them from it after
   * their executors died (SIGKILL) or were released by dynamic allocation, with zero map tasks
   * rerun, with spark.authenticate (SASL, then AuthEngine), and a flipped byte in a served file is
   * diagnosed as Spark diagnoses it against its own shuffle service. Spark's sort shuffle in the
   * same executor loss reruns its map tasks, for contrast.
   */
  private void servingChecks() throws Exception {
    try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
      servePort = s.getLocalPort();
    }
    // On the executors' host (Spark's own choice, as local-cluster gives its workers), so that
    // the map statuses name the executors' host and reducers may read the files host-locally.
    String host = org.apache.spark.util.Utils.localHostName();
    daemon.kill();
    daemon.start(List.of("--serve-addr", host + ":" + servePort));
    try {
      context("serving: executors SIGKILLed after the map stage; a flipped byte in a served file",
          served(2), (spark, l) -> {
            executorLoss(spark, l, "serving", Loss.DAEMON);
            corruptBlock(spark, l);
          });
      context("serving: executors SIGKILLed; reducers read the dead executors' files host-locally",
          served(2).set("spark.shuffle.readHostLocalDisk", "true"),
          (spark, l) -> executorLoss(spark, l, "serving, host-local", Loss.HOST_LOCAL));
      context("sort shuffle: executors SIGKILLed after the map stage (contrast)", base(2),
          (spark, l) -> executorLoss(spark, l, "sort shuffle", Loss.SORT_SHUFFLE));
      context("serving: dynamic allocation, no shuffle service, no shuffle tracking",
          served(2).set("spark.dynamicAllocation.enabled", "true")
              .set("spark.dynamicAllocation.shuffleTracking.enabled", "false")
              .set("spark.shuffle.service.enabled", "false")
              .set("spark.dynamicAllocation.minExecutors", "0")
              .set("spark.dynamicAllocation.initialExecutors", "2")
              .set("spark.dynamicAllocation.maxExecutors", "2")
              .set("spark.dynamicAllocation.executorIdleTimeout", "3s")
              .set("spark.dynamicAllocation.schedulerBacklogTimeout", "1s"),
          this::dynamicAllocation);
      String secret = "shuffled-suite-" + Long.toHexString(System.nanoTime());
      context("serving: spark.authenticate=true (SASL); executors SIGKILLed",
          served(2).set("spark.authenticate", "true").set("spark.authenticate.secret", secret),
          (spark, l) -> executorLoss(spark, l, "serving, SASL", Loss.DAEMON));
      context("serving: spark.authenticate=true, spark.network.crypto.enabled=true (AuthEngine);"
              + " executors SIGKILLed",
          served(2).set("spark.authenticate", "true").set("spark.authenticate.secret", secret)
              .set("spark.network.crypto.enabled", "true"),
          (spark, l) -> executorLoss(spark, l, "serving, AuthEngine", Loss.DAEMON));
    } finally {
      daemon.kill();
      daemon.start();
    }
  }

  /**
   * The plugin with serving on; reducers fetch every block that is not their own executor's
   * through the daemon's block server, not from the files (host-local reads are Spark's own, the
   * same with or without the daemon).
   */
  private SparkConf served(int executors) {
    return plugin(executors)
        .set("spark.shuffled.serving.enabled", "true")
        .set("spark.shuffle.readHostLocalDisk", "false");
  }

  /** reduceByKey over 4 map tasks of 50,000 records, counting the records mapped. */
  private static JavaRDD<String> lossJob(SparkSession spark, LongAccumulator mapped) {
    int per = 50_000;
    JavaPairRDD<Integer, Long> pairs = Jobs.generate(spark, 4, per, s -> {
      List<Tuple2<Integer, Long>> out = new ArrayList<>(per);
      for (int i = s * per; i < (s + 1) * per; i++) {
        out.add(new Tuple2<>(i % 5000, (long) i));
      }
      mapped.add(out.size());
      return out.iterator();
    });
    return pairs.reduceByKey(Long::sum, 8).map(t -> t._1() + "=" + t._2());
  }

  /**
   * A job's map stage; every executor that ran a map task SIGKILLed; the same job again: with
   * serving, its reduce stage reads the map outputs from the daemon and no map task runs again;
   * with Spark's sort shuffle, the map tasks run again.
   */
  /** How the reduce stage after an executor loss reads the map outputs. */
  enum Loss {
    /** Through the daemon's block server. */
    DAEMON,
    /** From the files, host-locally, with their dirs from the daemon (GetLocalDirsForExecutors). */
    HOST_LOCAL,
    /** Spark's sort shuffle: not at all; the map tasks run again. */
    SORT_SHUFFLE
  }

  private void executorLoss(SparkSession spark, Tasks l, String label, Loss how)
      throws Exception {
    boolean served = how != Loss.SORT_SHUFFLE;
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    LongAccumulator mapped = sc.sc().longAccumulator("mapped");
    JavaRDD<String> rows = lossJob(spark, mapped);
    l.reset(spark);
    String first = Jobs.fingerprint(rows);
    l.drain(spark);
    check(first.equals(expected.get("reduceByKey")), label + ": first run gives " + first);
    if (served) {
      servedLocations(label);
    }
    Set<String> writers = new TreeSet<>(l.mapTasksByExecutor.keySet());
    if (!killExecutors(spark, l, writers, label)) {
      return;
    }
    long mappedBefore = mapped.value();
    long chunks0 = served ? daemon.metric("shuffled_serve_chunks_total") : 0;
    l.reset(spark);
    long t0 = System.nanoTime();
    String second = Jobs.fingerprint(rows);
    l.drain(spark);
    double took = (System.nanoTime() - t0) / 1e9;
    check(second.equals(expected.get("reduceByKey")), String.format("%s: after the SIGKILL of"
        + " executors %s (every one that ran a map task), the job gives %s (%.1f s)", label,
        writers, second, took));
    long again = mapped.value() - mappedBefore;
    if (served) {
      long chunks = daemon.metric("shuffled_serve_chunks_total") - chunks0;
      check(l.mapTasks.get() == 0 && again == 0 && (how == Loss.DAEMON ? chunks > 0 : chunks == 0),
          label + ": zero map tasks rerun (" + l.mapTasks.get() + " ran, " + again
              + " records mapped again); the daemon served " + chunks + " blocks"
              + " (shuffled_serve_chunks_total)" + (how == Loss.HOST_LOCAL
                  ? ": the reducers read the files themselves" : ""));
    } else {
      check(l.mapTasks.get() > 0 && again > 0, label + ": Spark reran " + l.mapTasks.get()
          + " map tasks (" + again + " records mapped again): their outputs died with their"
          + " executors");
    }
  }

  /** The map statuses of the newest shuffle name the daemon's block server. */
  private void servedLocations(String label) {
    org.apache.spark.MapOutputTrackerMaster tracker =
        (org.apache.spark.MapOutputTrackerMaster)
            org.apache.spark.SparkEnv.get().mapOutputTracker();
    int newest = newestShuffle(tracker);
    Set<String> where = new TreeSet<>();
    boolean all = newest >= 0;
    if (newest >= 0) {
      for (org.apache.spark.scheduler.MapStatus st :
          tracker.shuffleStatuses().get(newest).get().mapStatuses()) {
        org.apache.spark.storage.BlockManagerId loc = st == null ? null : st.location();
        where.add(loc == null ? "missing" : loc.executorId() + "@" + loc.host() + ":" + loc.port());
        all &= loc != null && loc.port() == servePort;
      }
    }
    check(all, label + ": the map statuses of shuffle " + newest + " name the daemon's block"
        + " server (port " + servePort + "): " + where);
  }

  private static int newestShuffle(org.apache.spark.MapOutputTrackerMaster tracker) {
    int[] newest = {-1};
    tracker.shuffleStatuses().keys().foreach(k -> {
      newest[0] = Math.max(newest[0], (Integer) k);
      return null;
    });
    return newest[0];
  }

  /**
   * SIGKILLs the JVMs of executors {@code ids} of this application and waits until the driver
   * has removed them; whether it did.
   */
  private boolean killExecutors(SparkSession spark, Tasks l, Set<String> ids, String label)
      throws Exception {
    String app = spark.sparkContext().applicationId();
    List<ProcessHandle> jvms = ProcessHandle.allProcesses()
        .filter(h -> {
          String cmd = h.info().commandLine().orElse("");
          if (!cmd.contains("CoarseGrainedExecutorBackend") || !cmd.contains(app)) {
            return false;
          }
          for (String id : ids) {
            if (cmd.matches(".*--executor-id " + id + "( .*|$)")) {
              return true;
            }
          }
          return false;
        })
        .toList();
    check(!ids.isEmpty() && jvms.size() == ids.size(),
        label + ": found the JVMs of executors " + ids + " (" + jvms.size() + ")");
    if (ids.isEmpty() || jvms.size() != ids.size()) {
      return false;
    }
    for (ProcessHandle h : jvms) {
      h.destroyForcibly(); // SIGKILL
    }
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (!l.removedExecutors.containsAll(ids) && System.nanoTime() < deadline) {
      Thread.sleep(100);
    }
    boolean gone = l.removedExecutors.containsAll(ids);
    check(gone, label + ": the driver removed the killed executors " + ids);
    return gone;
  }

  /**
   * Dynamic allocation with neither the shuffle service nor shuffle tracking (Spark refuses to
   * start without reliable storage): the executors that ran the map stage idle out and are
   * removed while their map outputs are still referenced; the job again reads them from the
   * daemon on new executors, with zero map tasks rerun.
   */
  private void dynamicAllocation(SparkSession spark, Tasks l) throws Exception {
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    LongAccumulator mapped = sc.sc().longAccumulator("mapped");
    JavaRDD<String> rows = lossJob(spark, mapped);
    l.reset(spark);
    String first = Jobs.fingerprint(rows);
    l.drain(spark);
    check(first.equals(expected.get("reduceByKey")), "dynamic allocation: first run " + first);
    Set<String> writers = new TreeSet<>(l.mapTasksByExecutor.keySet());
    long t0 = System.nanoTime();
    long deadline = t0 + 90_000_000_000L;
    while (!l.removedExecutors.containsAll(writers) && System.nanoTime() < deadline) {
      Thread.sleep(200);
    }
    check(!writers.isEmpty() && l.removedExecutors.containsAll(writers), String.format(
        "dynamic allocation: the executors %s that ran the map stage idled out and were removed"
            + " (%.1f s; removed: %s)", writers, (System.nanoTime() - t0) / 1e9,
        l.removedExecutors));
    long mappedBefore = mapped.value();
    long chunks0 = daemon.metric("shuffled_serve_chunks_total");
    l.reset(spark);
    String second = Jobs.fingerprint(rows);
    l.drain(spark);
    long chunks = daemon.metric("shuffled_serve_chunks_total") - chunks0;
    long again = mapped.value() - mappedBefore;
    check(second.equals(expected.get("reduceByKey")) && l.mapTasks.get() == 0 && again == 0
            && chunks > 0,
        "dynamic allocation: the job again on new executors " + l.addedExecutors + " gives "
            + second + ", " + l.mapTasks.get() + " map tasks rerun, " + again
            + " records mapped again, " + chunks + " blocks served by the daemon");
  }

  /**
   * A byte flipped in a served data file, after its executors died: the reducer's fetch from the
   * daemon fails to decompress, Spark asks the daemon to diagnose it (DiagnoseCorruption, with
   * the checksum of what it read), and the daemon, recomputing the partition's checksum from the
   * file, answers DISK_ISSUE, as Spark's own shuffle service does for the same file
   * (ShuffleChecksumHelper.diagnoseCorruption): the fetch failure names it, and the stage retry
   * gives the right result.
   */
  private void corruptBlock(SparkSession spark, Tasks l) throws Exception {
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    LongAccumulator mapped = sc.sc().longAccumulator("mapped-corrupt");
    JavaRDD<String> rows = lossJob(spark, mapped);
    l.reset(spark);
    long since = System.currentTimeMillis() - 2000; // file times may be coarse
    Jobs.fingerprint(rows);
    l.drain(spark);
    org.apache.spark.MapOutputTrackerMaster tracker =
        (org.apache.spark.MapOutputTrackerMaster)
            org.apache.spark.SparkEnv.get().mapOutputTracker();
    int shuffle = newestShuffle(tracker);
    Set<Long> mapIds = new TreeSet<>();
    for (org.apache.spark.scheduler.MapStatus st :
        tracker.shuffleStatuses().get(shuffle).get().mapStatuses()) {
      if (st != null) {
        mapIds.add(st.mapId());
      }
    }
    Set<String> writers = new TreeSet<>(l.mapTasksByExecutor.keySet());
    if (!killExecutors(spark, l, writers, "corruption")) {
      return;
    }
    String flipped = flipAByte(shuffle, mapIds, since);
    check(flipped != null, "corruption: flipped a byte of shuffle " + shuffle + ": " + flipped);
    if (flipped == null) {
      return;
    }
    l.reset(spark);
    String again = Jobs.fingerprint(rows);
    l.drain(spark);
    String diagnosis = l.anyTaskFailures.stream().filter(f -> f.contains("corrupted"))
        .findFirst().orElse(l.anyTaskFailures.isEmpty() ? "no task failed"
            : l.anyTaskFailures.get(0));
    check(diagnosis.contains("DISK_ISSUE"), "corruption: the fetch failure names the daemon's"
        + " diagnosis DISK_ISSUE, as Spark's shuffle service gives: " + firstLines(diagnosis, 3)
        + " (" + l.mapTasks.get() + " map tasks ran again)");
    check(again.equals(expected.get("reduceByKey")),
        "corruption: the stage retry gives the right result " + again);
  }

  /**
   * Flips a bit of the first lz4 block checksum of the largest partition of a map output of
   * {@code shuffle} in the executors' local dirs; returns the file and offset, or null when none
   * was found.
   */
  private String flipAByte(int shuffle, Set<Long> mapIds, long since) throws IOException {
    // Only this application's map outputs of the shuffle: files of earlier applications with
    // the same names may linger in the local dirs (Spark's workers delete them asynchronously).
    Map<String, Path> files = new java.util.HashMap<>();
    try (Stream<Path> s = Files.walk(localRoot)) {
      s.filter(p -> {
        String n = p.getFileName().toString();
        if (!n.startsWith("shuffle_" + shuffle + "_")) {
          return false;
        }
        String[] parts = n.split("[_.]");
        try {
          return mapIds.contains(Long.parseLong(parts[2]))
              && Files.getLastModifiedTime(p).toMillis() >= since;
        } catch (IOException | RuntimeException e) {
          return false;
        }
      }).forEach(p -> files.put(p.getFileName().toString(), p));
    }
    for (Map.Entry<String, Path> e : files.entrySet()) {
      String name = e.getKey();
      if (!name.endsWith(".index")) {
        continue;
      }
      Path data = files.get(name.replace(".index", ".data"));
      if (data == null) {
        continue;
      }
      ByteBuffer index = ByteBuffer.wrap(Files.readAllBytes(e.getValue()));
      long best = -1;
      long bestLen = 0;
      for (int i = 0; i + 16 <= index.capacity(); i += 8) {
        long len = index.getLong(i + 8) - index.getLong(i);
        if (len > bestLen) {
          bestLen = len;
          best = index.getLong(i);
        }
      }
      if (bestLen < 64) {
        continue;
      }
      // The partition is lz4 (Spark's default codec): a stream of blocks, each a header of
      // "LZ4Block", a token, the compressed and original lengths and the checksum of the
      // original bytes (little-endian, at offset 17). Flipping a bit of that checksum is a
      // corruption every read detects; a byte flipped in the compressed bytes may decode to the
      // same bytes (a match offset into a repeated pattern).
      long at = best + 17;
      try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(data,
          java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE)) {
        ByteBuffer magic = ByteBuffer.allocate(8);
        ch.read(magic, best);
        if (!new String(magic.array(), java.nio.charset.StandardCharsets.US_ASCII)
            .equals("LZ4Block")) {
          return null;
        }
        ByteBuffer b = ByteBuffer.allocate(1);
        ch.read(b, at);
        b.put(0, (byte) (b.get(0) ^ 0x01)).position(0);
        ch.write(b, at);
      }
      long dataFiles = files.keySet().stream().filter(n -> n.endsWith(".data")).count();
      return data + " at byte " + at + " (a partition of " + bestLen + " bytes; " + dataFiles
          + " data files of the shuffle)";
    }
    return null;
  }

  private static String firstLines(String s, int n) {
    return String.join(" | ", s.lines().limit(n).toList());
  }

  private static void waitForPort(int port, Process p) throws Exception {
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (true) {
      try (java.net.Socket s = new java.net.Socket("127.0.0.1", port)) {
        s.shutdownOutput();
        return;
      } catch (IOException notYet) {
        if (!p.isAlive() || System.nanoTime() > deadline) {
          throw new IOException("the external shuffle service did not listen on " + port, notYet);
        }
        Thread.sleep(200);
      }
    }
  }

  /** Jobs.SLOW on a thread of its own: its result, or what it threw, once the thread ends. */
  private static final class SlowJob {
    final Thread thread;
    volatile String result;
    volatile Throwable error;

    SlowJob(SparkSession spark) {
      thread = new Thread(() -> {
        try {
          result = Jobs.SLOW.job().run(spark);
        } catch (Throwable e) {
          error = e;
        }
      });
    }
  }

  /**
   * Starts Jobs.SLOW and returns once the daemon has committed two map outputs more than c0 (or
   * two minutes have passed): its next map tasks are then writing.
   */
  private SlowJob startSlowJob(SparkSession spark, long c0) throws Exception {
    SlowJob job = new SlowJob(spark);
    job.thread.start();
    long deadline = System.nanoTime() + 120_000_000_000L;
    while (System.nanoTime() < deadline && daemon.metric("shuffled_commits_total") - c0 < 2) {
      Thread.sleep(20);
    }
    return job;
  }

  // --- the daemon killed during a map stage ----------------------------------

  private void daemonKilled(SparkSession spark, Tasks l) throws Exception {
    l.reset(spark);
    long c0 = daemon.metric("shuffled_commits_total");
    // Kill once the first map tasks have committed, in the middle of the next ones (the map tasks
    // of this job run in step and each takes over a second, sleeping included).
    SlowJob job = startSlowJob(spark, c0);
    Thread.sleep(500);
    long committedBefore = daemon.metric("shuffled_commits_total") - c0;
    long open = daemon.metric("shuffled_open_map_outputs");
    daemon.kill();
    Thread.sleep(300);
    daemon.start();
    job.thread.join(300_000);
    l.drain(spark);
    long commitsAfter = daemon.metric("shuffled_commits_total");
    check(job.error == null && Jobs.SLOW.name() != null
            && expected.get(Jobs.SLOW.name()).equals(job.result),
        "daemon killed: result " + job.result + (job.error != null ? " (" + job.error + ")" : "")
            + " equals the sort shuffle's " + expected.get(Jobs.SLOW.name()));
    check(l.failedMapTasks.get() >= 1 && commitsAfter >= 1,
        "daemon killed: " + l.failedMapTasks.get() + " map tasks failed and were retried, "
            + commitsAfter + " map outputs committed by the restarted daemon ("
            + committedBefore + " committed before the kill, " + open + " open at the kill)");
  }

  // --- killed tasks, a draining daemon, the daemon's bounds ------------------------

  /**
   * Tasks killed mid-write (a job group cancelled with interruptOnCancel: Spark interrupts the
   * task threads) abort their map outputs on the daemon, although their threads are interrupted:
   * the daemon holds none of them afterwards, with the executors' connections still up.
   */
  private void killedTasks(SparkSession spark, Tasks l) throws Exception {
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    l.reset(spark);
    long a0 = daemon.stat(ShuffledClient.STAT_ABORTS_TOTAL);
    Throwable[] error = new Throwable[1];
    Thread job = new Thread(() -> {
      sc.setJobGroup("shuffled-killed", "map tasks killed while they write", true);
      try {
        Jobs.SLOW.job().run(spark);
      } catch (Throwable e) {
        error[0] = e;
      }
    });
    job.start();
    long deadline = System.nanoTime() + 120_000_000_000L;
    long open = 0;
    while (System.nanoTime() < deadline && (open = daemon.metric("shuffled_open_map_outputs")) < 2) {
      Thread.sleep(20);
    }
    sc.cancelJobGroup("shuffled-killed");
    job.join(120_000);
    // The job ends at the cancel; its tasks end on the executors after it, and are reported later.
    long left = -1;
    long aborts = 0;
    deadline = System.nanoTime() + 15_000_000_000L;
    while (System.nanoTime() < deadline) {
      l.drain(spark);
      left = daemon.metric("shuffled_open_map_outputs");
      aborts = daemon.stat(ShuffledClient.STAT_ABORTS_TOTAL) - a0;
      if (left == 0 && l.killedMapTasks.get() >= 1 && aborts >= 1) {
        break;
      }
      Thread.sleep(50);
    }
    check(error[0] != null && l.killedMapTasks.get() >= 1 && left == 0
            && aborts >= 1,
        "killed tasks: " + l.killedMapTasks.get() + " map tasks killed (" + open + " map outputs"
            + " open at the kill), " + aborts + " map outputs aborted and " + left + " left open"
            + " on the daemon (want 0: the killed tasks' interrupted threads sent Abort); the job "
            + (error[0] == null ? "succeeded" : "was cancelled"));
  }

  /**
   * SIGTERM mid-stage: the daemon drains, answering Unavailable to new map outputs while one stays
   * open (held by the suite for two seconds), then exits, and is started again. Map tasks that met
   * it draining or gone wait for it (spark.shuffled.reconnectTimeout) instead of failing.
   */
  private void daemonDrained(SparkSession spark, Tasks l) throws Exception {
    l.reset(spark);
    long c0 = daemon.metric("shuffled_commits_total");
    SlowJob job = startSlowJob(spark, c0);
    boolean exited;
    String refusals = "shuffled_errors_total{code=\"Unavailable\"}";
    long u0 = daemon.metric(refusals);
    long unavailable;
    try (ShuffledClient holder = ShuffledClient.connect(daemon.socket)) {
      holder.register("shuffled-suite-drain", "holder");
      dev.shuffled.client.MapOutput held =
          holder.openMapOutput(0, 0, 1, dev.shuffled.client.OpenOptions.DEFAULTS);
      daemon.terminate();
      Thread.sleep(2000); // the executors' next map tasks meet Unavailable meanwhile
      try {
        unavailable = daemon.metric(refusals) - u0;
      } catch (IOException e) {
        unavailable = -1; // the metrics went with the drain
      }
      held.abort();
      exited = daemon.awaitExit(60);
    }
    Thread.sleep(500);
    daemon.start();
    job.thread.join(300_000);
    l.drain(spark);
    check(exited && job.error == null && expected.get(Jobs.SLOW.name()).equals(job.result)
            && l.failedMapTasks.get() == 0 && unavailable > 0,
        "daemon drained (SIGTERM) mid-stage: result " + job.result
            + (job.error != null ? " (" + job.error + ")" : "") + "; the draining daemon answered "
            + unavailable + " Opens Unavailable, and " + l.failedMapTasks.get()
            + " map tasks failed (want 0: they waited for the restarted daemon)"
            + (l.failures.isEmpty() ? "" : "; " + firstLine(l.failures.get(0))));
  }

  /** The daemon refuses the 2000-partition shuffle's map outputs: Spark's writer takes them. */
  private void resourceExhausted(SparkSession spark, Tasks l) throws Exception {
    long c0 = daemon.metric("shuffled_commits_total");
    l.reset(spark);
    String got = Jobs.WIDE.job().run(spark);
    l.drain(spark);
    long commits = daemon.metric("shuffled_commits_total") - c0;
    check(got.equals(expected.get(Jobs.WIDE.name())) && l.mapTasks.get() > 0 && commits == 0
            && l.failedMapTasks.get() == 0,
        "partition-state limit 64KiB: " + Jobs.WIDE.name() + " (2000 partitions, 96000 bytes of"
            + " state per map output) gives " + got + "; " + l.mapTasks.get() + " map tasks"
            + " written by Spark's writer after ResourceExhausted, " + commits
            + " through the daemon, " + l.failedMapTasks.get() + " failed");
    compared(spark, l, Jobs.REDUCE_BY_KEY); // 8 partitions fit: through the daemon
  }

  /** A shuffle of 2^20 + 1 partitions, over the protocol's bound, is Spark's writer's. */
  private void beyondTheProtocolsPartitions(SparkSession spark, Tasks l) throws Exception {
    int parts = ShuffledClient.MAX_PARTITIONS + 1;
    long c0 = daemon.metric("shuffled_commits_total");
    l.reset(spark);
    JavaPairRDD<Integer, Integer> pairs = Jobs.generate(spark, 2, 1000, s -> {
      List<Tuple2<Integer, Integer>> out = new ArrayList<>();
      for (int i = s * 1000; i < (s + 1) * 1000; i++) {
        out.add(new Tuple2<>(i, -i));
      }
      return out.iterator();
    });
    // Only the map stage and the first reduce partition run (key 0 lands in partition 0).
    List<Tuple2<Integer, Integer>> first =
        pairs.partitionBy(new org.apache.spark.HashPartitioner(parts)).take(1);
    l.drain(spark);
    long commits = daemon.metric("shuffled_commits_total") - c0;
    check(first.size() == 1 && first.get(0)._1() == 0 && l.mapTasks.get() == 2 && commits == 0
            && l.failedMapTasks.get() == 0,
        parts + " partitions: " + first + "; " + l.mapTasks.get() + " map tasks written by"
            + " Spark's writer, " + commits + " through the daemon, " + l.failedMapTasks.get()
            + " failed");
  }

  /** The checksum files of the map outputs are the algorithm's. */
  private void checksumFiles(String algorithm) throws IOException {
    long n;
    try (Stream<Path> s = Files.walk(localRoot)) {
      n = s.filter(p -> p.getFileName().toString().matches(
          "shuffle_\\d+_\\d+_0\\.checksum\\." + algorithm)).count();
    } catch (java.io.UncheckedIOException e) {
      n = -1;
    }
    check(n > 0, n + " checksum files shuffle_S_M_0.checksum." + algorithm);
  }

  /**
   * RemoveShuffle fails (the daemon is down at cleanup): the executors delete the files of the map
   * outputs they wrote through it themselves, as Spark does for its own writer's.
   */
  private void removalWithTheDaemonDown(SparkSession spark, Tasks l) throws Exception {
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    // First with the daemon up: the driver's plugin connects for removals too (and keeps it).
    for (int id : shuffleIds()) {
      sc.sc().cleaner().get().doCleanupShuffle(id, true);
    }
    awaitNoShuffleFiles();
    compared(spark, l, Jobs.REDUCE_BY_KEY);
    Set<Integer> before = shuffleIds();
    daemon.kill();
    Set<Integer> after;
    try {
      for (int id : before) {
        sc.sc().cleaner().get().doCleanupShuffle(id, true);
      }
      after = awaitNoShuffleFiles();
    } finally {
      daemon.start();
    }
    check(!before.isEmpty() && after.isEmpty(),
        "daemon down at cleanup of shuffles " + before + ": files left of " + after
            + " (the executors delete what they wrote through the daemon themselves)");
  }

  /** Waits up to 10 s for no shuffle files under the local dirs; returns the shuffles left. */
  private Set<Integer> awaitNoShuffleFiles() throws Exception {
    Set<Integer> left = shuffleIds();
    for (int i = 0; i < 100 && !left.isEmpty(); i++) {
      Thread.sleep(100);
      left = shuffleIds();
    }
    return left;
  }

  /** Spark 3.5 refuses CRC32C, and so does the plugin there, with its own message. */
  private void crc32cRefused() {
    System.out.println("== plugin: spark.shuffle.checksum.algorithm=CRC32C on Spark 3.5");
    SparkSession spark = null;
    try {
      spark = SparkSession.builder().appName("shuffled suite: CRC32C on Spark 3.5")
          .config(plugin(1).set("spark.shuffle.checksum.algorithm", "CRC32C")).getOrCreate();
      fail("a SparkContext with CRC32C on Spark 3.5 started");
    } catch (Throwable e) {
      String why = null;
      for (Throwable t = e; t != null && why == null; t = t.getCause()) {
        if (String.valueOf(t.getMessage()).contains("CRC32C needs Spark 4")) {
          why = t.getMessage();
        }
      }
      check(why != null, "CRC32C on Spark 3.5 fails at start with the plugin's message: "
          + (why != null ? why : e));
    } finally {
      if (spark != null) {
        spark.stop();
      }
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  private static String firstLine(String s) {
    int i = s.indexOf('\n');
    return i < 0 ? s : s.substring(0, i);
  }

  /** Counts map tasks by outcome and executor. */
  static final class Tasks extends SparkListener {
    final AtomicLong mapTasks = new AtomicLong();
    final AtomicLong mapTasksWithRecords = new AtomicLong(); // successful, records written > 0
    final AtomicLong failedMapTasks = new AtomicLong();
    final AtomicLong killedMapTasks = new AtomicLong(); // of the failed ones
    final List<String> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** Why tasks of any kind failed (a reducer's FetchFailed among them). */
    final List<String> anyTaskFailures = new java.util.concurrent.CopyOnWriteArrayList<>();
    final Map<String, Integer> mapTasksByExecutor = new ConcurrentHashMap<>();
    /** Executors removed and added since the context started (never reset). */
    final Set<String> removedExecutors = ConcurrentHashMap.newKeySet();
    final Set<String> addedExecutors = ConcurrentHashMap.newKeySet();

    @Override
    public void onExecutorRemoved(org.apache.spark.scheduler.SparkListenerExecutorRemoved e) {
      removedExecutors.add(e.executorId());
    }

    @Override
    public void onExecutorAdded(org.apache.spark.scheduler.SparkListenerExecutorAdded e) {
      addedExecutors.add(e.executorId());
    }

    void reset(SparkSession spark) throws Exception {
      drain(spark);
      mapTasks.set(0);
      mapTasksWithRecords.set(0);
      failedMapTasks.set(0);
      killedMapTasks.set(0);
      failures.clear();
      anyTaskFailures.clear();
      mapTasksByExecutor.clear();
    }

    void drain(SparkSession spark) throws Exception {
      spark.sparkContext().listenerBus().waitUntilEmpty(30_000);
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd e) {
      if (e.reason() != Success$.MODULE$ && e.reason() instanceof org.apache.spark.TaskFailedReason r) {
        anyTaskFailures.add(r.toErrorString());
      }
      if (!"ShuffleMapTask".equals(e.taskType())) {
        return;
      }
      if (e.reason() == Success$.MODULE$) {
        mapTasks.incrementAndGet();
        if (e.taskMetrics() != null && e.taskMetrics().shuffleWriteMetrics().recordsWritten() > 0) {
          mapTasksWithRecords.incrementAndGet();
        }
        mapTasksByExecutor.merge(e.taskInfo().executorId(), 1, Integer::sum);
      } else {
        failedMapTasks.incrementAndGet();
        if (e.reason() instanceof org.apache.spark.TaskKilled) {
          killedMapTasks.incrementAndGet();
        }
        if (e.reason() instanceof org.apache.spark.TaskFailedReason r) {
          failures.add(r.toErrorString());
        }
      }
    }
  }

}
