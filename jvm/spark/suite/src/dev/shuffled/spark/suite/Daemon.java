package dev.shuffled.spark.suite;

import dev.shuffled.client.ShuffledClient;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** A shuffled daemon the suite starts, kills and restarts, and whose metrics it reads. */
final class Daemon {
  private final Path bin;
  final Path socket;
  private final Path root;
  private final Path allowedRoot;
  private final Path log;
  private final int metricsPort;
  private Process process;
  private int starts;

  Daemon(Path bin, Path work, Path allowedRoot) throws IOException {
    this.bin = bin;
    this.socket = work.resolve("shuffled.sock");
    this.root = Files.createDirectories(work.resolve("daemon-root"));
    this.allowedRoot = allowedRoot;
    this.log = work.resolve("daemon.log");
    try (ServerSocket s = new ServerSocket(0)) {
      metricsPort = s.getLocalPort();
    }
  }

  void start() throws IOException, InterruptedException {
    start(List.of());
  }

  /** Starts the daemon with {@code extra} flags of {@code shuffled serve} besides the suite's. */
  void start(List<String> extra) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>(List.of(
        bin.toString(), "serve",
        "--socket", socket.toString(),
        "--root", root.toString(),
        "--allowed-roots", allowedRoot.toString(),
        "--metrics-addr", "127.0.0.1:" + metricsPort,
        "--limit", "128MiB",
        "--log-level", "warn"));
    cmd.addAll(extra);
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
    process = pb.start();
    starts++;
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (true) {
      if (!process.isAlive()) {
        throw new IOException("shuffled exited with status " + process.exitValue()
            + " at start; its log: " + log + "\n" + Files.readString(log));
      }
      try {
        metrics();
        if (Files.exists(socket)) {
          return;
        }
      } catch (IOException notYet) {
        // keep waiting
      }
      if (System.nanoTime() > deadline) {
        throw new IOException("shuffled did not come up within 30 s; its log: " + log);
      }
      Thread.sleep(50);
    }
  }

  /** SIGKILL, as a crash: no drain, no goodbye. */
  void kill() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor();
  }

  /** SIGTERM: the daemon drains (refusing new map outputs), then exits; not waited for. */
  void terminate() {
    process.destroy();
  }

  /** Waits for the daemon to exit; whether it did within {@code seconds}. */
  boolean awaitExit(long seconds) throws InterruptedException {
    return process.waitFor(seconds, java.util.concurrent.TimeUnit.SECONDS);
  }

  int starts() {
    return starts;
  }

  /** The daemon's Prometheus figures, by series name with labels (e.g. shuffled_commits_total). */
  Map<String, Double> metrics() throws IOException {
    HttpURLConnection c = (HttpURLConnection)
        URI.create("http://127.0.0.1:" + metricsPort + "/metrics").toURL().openConnection();
    c.setConnectTimeout(2000);
    c.setReadTimeout(5000);
    String body;
    try (InputStream in = c.getInputStream()) {
      body = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    Map<String, Double> m = new HashMap<>();
    for (String line : body.split("\n")) {
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      int sp = line.lastIndexOf(' ');
      m.put(line.substring(0, sp), Double.parseDouble(line.substring(sp + 1)));
    }
    return m;
  }

  /**
   * One figure of the daemon's Stats (docs/protocol.md), asked through the JVM client on the
   * daemon's socket, e.g. {@link ShuffledClient#STAT_COMMITS_TOTAL}.
   */
  long stat(String name) throws IOException {
    try (ShuffledClient c = ShuffledClient.connect(socket)) {
      Long v = c.stats().get(name);
      if (v == null) {
        throw new IOException("the daemon's Stats have no " + name + ": " + c.stats().keySet());
      }
      return v;
    }
  }

  long metric(String name) throws IOException {
    return metrics().getOrDefault(name, 0.0).longValue();
  }

  void close() throws InterruptedException {
    if (process != null && process.isAlive()) {
      process.destroy();
      process.waitFor();
    }
  }
}
