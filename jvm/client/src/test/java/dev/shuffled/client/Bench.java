package dev.shuffled.client;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The JVM client benchmark (not part of the test suite): the Java client inline, the Java client
 * with memfds, and the Go client (jvm/client/src/test/go/gobench.go) on the same workload and the
 * same daemon, modes interleaved, medians over the repetitions. Per mode: MB/s of uncompressed
 * payload handed to the daemon and committed, and the client process's CPU seconds per GB. Run
 * from the repository root (docs/benchmarks.md, "JVM client"):
 *
 * <pre>
 * JAVA_HOME=$JDK25 mvn -f jvm/pom.xml -B -q -pl client package -DskipTests
 * $JDK25/bin/java --enable-native-access=ALL-UNNAMED \
 *   -cp jvm/client/target/shuffled-client-0.1.0-dev.jar:jvm/client/target/test-classes \
 *   dev.shuffled.client.Bench [--reps 5] [--tasks 32] [--concurrency 4] [--batches 4] \
 *   [--batch-mib 4] [--partitions 200] [--codec lz4]
 * </pre>
 */
public final class Bench {
  private Bench() {}

  private record Result(double mbPerS, double cpuSPerGB) {}

  public static void main(String[] args) throws Exception {
    Map<String, String> o = new LinkedHashMap<>();
    o.put("reps", "5");
    o.put("tasks", "32");
    o.put("concurrency", "4");
    o.put("batches", "4");
    o.put("batch-mib", "4");
    o.put("partitions", "200");
    o.put("codec", "lz4");
    for (int i = 0; i + 1 < args.length; i += 2) {
      String k = args[i].replaceFirst("^--", "");
      if (!o.containsKey(k)) {
        throw new IllegalArgumentException("unknown flag " + args[i] + "; flags: " + o.keySet());
      }
      o.put(k, args[i + 1]);
    }
    int reps = Integer.parseInt(o.get("reps"));
    int tasks = Integer.parseInt(o.get("tasks"));
    int conc = Integer.parseInt(o.get("concurrency"));
    int batches = Integer.parseInt(o.get("batches"));
    int batchBytes = Integer.parseInt(o.get("batch-mib")) << 20;
    int parts = Integer.parseInt(o.get("partitions"));
    Codec codec = Codec.fromName(o.get("codec"));
    System.out.println("workload: " + o + ", JDK " + Runtime.version());

    Path repo = Path.of("").toAbsolutePath();
    Path gobench = repo.resolve("jvm/client/target/gobench");
    Process b =
        new ProcessBuilder("go", "build", "-o", gobench.toString(), "./jvm/client/src/test/go/gobench.go")
            .inheritIO()
            .start();
    if (b.waitFor() != 0) {
      throw new IOException("go build gobench failed (run from the repository root)");
    }
    try (Daemon d = Daemon.start("--max-frame=64MiB")) {
      byte[] data = Payloads.records(new Random(1), batchBytes);
      Path payload = d.dir.resolve("payload.bin");
      Files.write(payload, data);
      long[] offsets = new long[parts + 1];
      for (int p = 1; p <= parts; p++) {
        offsets[p] = (long) data.length * p / parts;
      }
      List<String> modes = List.of("java-inline", "java-memfd", "go-memfd", "go-inline");
      Map<String, List<Result>> results = new LinkedHashMap<>();
      modes.forEach(m -> results.put(m, new ArrayList<>()));
      AtomicInteger shuffle = new AtomicInteger();
      for (int rep = -1; rep < reps; rep++) { // rep -1 warms up the JIT and the daemon
        for (int i = 0; i < modes.size(); i++) {
          String mode = modes.get(Math.floorMod(i + rep, modes.size())); // rotate the order
          int s = shuffle.incrementAndGet();
          Result r =
              mode.startsWith("java")
                  ? runJava(d, mode.endsWith("memfd") ? DataPlane.MEMFD : DataPlane.INLINE, s, data, offsets, tasks, conc, batches, codec)
                  : runGo(gobench, d, mode.endsWith("memfd") ? "memfd" : "inline", s, payload, tasks, conc, batches, parts, codec);
          if (rep >= 0) {
            results.get(mode).add(r);
          }
          try (ShuffledClient c = d.connect()) {
            c.removeApplication("bench"); // keep the disk from filling
          }
        }
      }
      Result go = median(results.get("go-memfd"));
      System.out.printf("%-12s %10s %12s %10s %10s%n", "mode", "MB/s", "CPU s/GB", "x go-memfd", "CPU x go");
      for (String m : modes) {
        Result r = median(results.get(m));
        System.out.printf(
            "%-12s %10.1f %12.3f %10.2f %10.2f%n",
            m, r.mbPerS, r.cpuSPerGB, r.mbPerS / go.mbPerS, r.cpuSPerGB / go.cpuSPerGB);
      }
    }
  }

  private static Result median(List<Result> rs) {
    double[] mb = rs.stream().mapToDouble(Result::mbPerS).sorted().toArray();
    double[] cpu = rs.stream().mapToDouble(Result::cpuSPerGB).sorted().toArray();
    return new Result(mb[mb.length / 2], cpu[cpu.length / 2]);
  }

  private static long cpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  private static Result runJava(
      Daemon d, DataPlane plane, int shuffle, byte[] data, long[] offsets, int tasks, int conc, int batches, Codec codec)
      throws Exception {
    try (ShuffledClient c = d.connect(ClientOptions.DEFAULTS.withDataPlane(plane).withClientName("bench-java"))) {
      c.register("bench", "java-" + shuffle);
      if (plane == DataPlane.MEMFD && !c.memfdAvailable()) {
        throw new IllegalStateException("memfd unavailable: run on JDK 22+ from the jar");
      }
      ExecutorService pool = Executors.newFixedThreadPool(conc);
      AtomicInteger next = new AtomicInteger();
      long cpu0 = cpuNanos();
      long t0 = System.nanoTime();
      List<Future<?>> fs = new ArrayList<>();
      for (int w = 0; w < conc; w++) {
        fs.add(
            pool.submit(
                () -> {
                  int m;
                  while ((m = next.getAndIncrement()) < tasks) {
                    try (MapOutput out =
                        c.openMapOutput(shuffle, m, offsets.length - 1, OpenOptions.of(codec, ChecksumAlgorithm.ADLER32))) {
                      for (int i = 0; i < batches; i++) {
                        out.writeOpaque(data, offsets);
                      }
                      out.commit();
                    }
                  }
                  return null;
                }));
      }
      for (Future<?> f : fs) {
        f.get();
      }
      double wall = (System.nanoTime() - t0) / 1e9;
      double cpu = (cpuNanos() - cpu0) / 1e9;
      pool.shutdown();
      double bytes = (double) data.length * tasks * batches;
      return new Result(bytes / wall / 1e6, cpu / (bytes / 1e9));
    }
  }

  private static Result runGo(
      Path gobench, Daemon d, String plane, int shuffle, Path payload, int tasks, int conc, int batches, int parts, Codec codec)
      throws Exception {
    Process p =
        new ProcessBuilder(
                gobench.toString(), "--socket", d.socket.toString(), "--payload", payload.toString(),
                "--tasks", "" + tasks, "--concurrency", "" + conc, "--batches", "" + batches,
                "--partitions", "" + parts, "--codec", codec.wireName(), "--plane", plane,
                "--app", "bench", "--shuffle", "" + shuffle)
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
    String out = new String(p.getInputStream().readAllBytes()).trim();
    if (p.waitFor() != 0) {
      throw new IOException("gobench failed: " + out);
    }
    double bytes = field(out, "bytes");
    double wall = field(out, "wall_s");
    double cpu = field(out, "cpu_s");
    return new Result(bytes / wall / 1e6, cpu / (bytes / 1e9));
  }

  private static double field(String json, String name) {
    int i = json.indexOf("\"" + name + "\":");
    if (i < 0) {
      throw new IllegalArgumentException("no " + name + " in " + json);
    }
    String rest = json.substring(i + name.length() + 3);
    return Double.parseDouble(rest.split("[,}]")[0].trim());
  }

  static String describe(double[] v) {
    return Arrays.toString(v);
  }
}
