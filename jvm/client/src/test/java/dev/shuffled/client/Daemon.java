package dev.shuffled.client;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The real shuffled daemon on a temp socket and root, for tests. Its binary comes from {@code
 * SHUFFLED_BIN}, else is built once with {@code go build} into jvm/client/target/.
 */
final class Daemon implements AutoCloseable {
  private static Path built;

  final Path dir;
  final Path socket;
  final Path root;
  final Path localRoot;
  private final List<String> extraArgs;
  private Process process;

  private Daemon(Path dir, List<String> extraArgs) {
    this.dir = dir;
    this.socket = dir.resolve("s.sock");
    this.root = dir.resolve("root");
    this.localRoot = dir.resolve("local");
    this.extraArgs = extraArgs;
  }

  /** Starts a daemon in a new temp dir; {@code args} are extra flags of {@code shuffled serve}. */
  static Daemon start(String... args) throws IOException, InterruptedException {
    Path dir = Files.createTempDirectory(Path.of("/tmp"), "shuffled-jvm-");
    Daemon d = new Daemon(dir, List.of(args));
    Files.createDirectories(d.root);
    Files.createDirectories(d.localRoot);
    d.startProcess();
    return d;
  }

  static synchronized Path binary() throws IOException, InterruptedException {
    String env = System.getenv("SHUFFLED_BIN");
    if (env != null && !env.isEmpty()) {
      return Path.of(env);
    }
    if (built != null) {
      return built;
    }
    // the repository root: the first dir upwards with go.mod
    Path repo = Path.of("").toAbsolutePath();
    while (repo != null && !Files.exists(repo.resolve("go.mod"))) {
      repo = repo.getParent();
    }
    if (repo == null) {
      throw new IOException("SHUFFLED_BIN unset and no go.mod above " + Path.of("").toAbsolutePath());
    }
    Path out = repo.resolve("jvm/client/target/shuffled");
    Files.createDirectories(out.getParent());
    Process p =
        new ProcessBuilder("go", "build", "-o", out.toString(), "./cmd/shuffled")
            .directory(repo.toFile())
            .inheritIO()
            .start();
    if (!p.waitFor(5, TimeUnit.MINUTES) || p.exitValue() != 0) {
      throw new IOException("go build ./cmd/shuffled failed (set SHUFFLED_BIN to a built daemon)");
    }
    built = out;
    return out;
  }

  private void startProcess() throws IOException, InterruptedException {
    Files.deleteIfExists(socket);
    List<String> cmd = new ArrayList<>();
    cmd.add(binary().toString());
    cmd.add("serve");
    cmd.add("--socket=" + socket);
    cmd.add("--root=" + root);
    cmd.add("--allowed-roots=" + localRoot);
    cmd.add("--log-level=warn");
    cmd.addAll(extraArgs);
    process =
        new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("daemon.log").toFile()))
            .start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!Files.exists(socket)) {
      if (!process.isAlive()) {
        throw new IOException("daemon exited: " + Files.readString(dir.resolve("daemon.log")));
      }
      if (System.nanoTime() > deadline) {
        throw new IOException("daemon made no socket in 20 s: " + Files.readString(dir.resolve("daemon.log")));
      }
      Thread.sleep(10);
    }
    // The socket file appears at bind(); wait until the daemon accepts.
    while (true) {
      try (java.nio.channels.SocketChannel ch =
          java.nio.channels.SocketChannel.open(java.net.StandardProtocolFamily.UNIX)) {
        ch.connect(java.net.UnixDomainSocketAddress.of(socket));
        return;
      } catch (IOException e) {
        if (System.nanoTime() > deadline) {
          throw new IOException("daemon does not accept on " + socket + ": " + e, e);
        }
        Thread.sleep(10);
      }
    }
  }

  /** Waits up to 5 s for the daemon's figure {@code name} to be {@code want}; returns the last. */
  static long awaitStat(ShuffledClient c, String name, long want) throws IOException, InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    long v;
    while ((v = c.stats().get(name)) != want && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    return v;
  }

  /** SIGKILLs the daemon and waits for it to be gone. */
  void kill() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor(10, TimeUnit.SECONDS);
  }

  /** Starts the daemon again on the same socket and root. */
  void restart() throws IOException, InterruptedException {
    if (process.isAlive()) {
      kill();
    }
    startProcess();
  }

  long pid() {
    return process.pid();
  }

  /** SIGSTOPs the daemon and waits until the kernel shows it stopped. */
  void pause() throws IOException, InterruptedException {
    signal("-STOP");
    Path stat = Path.of("/proc", Long.toString(pid()), "stat");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (true) {
      String s = Files.readString(stat);
      char state = s.charAt(s.lastIndexOf(')') + 2);
      if (state == 'T' || state == 't') {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new IOException("daemon not stopped 10 s after SIGSTOP: state " + state);
      }
      Thread.sleep(5);
    }
  }

  /** SIGTERMs the daemon (it drains) without waiting. */
  void terminate() throws IOException, InterruptedException {
    signal("-TERM");
  }

  /** SIGCONTs a paused daemon. */
  void resume() throws IOException, InterruptedException {
    signal("-CONT");
  }

  private void signal(String sig) throws IOException, InterruptedException {
    Process k = new ProcessBuilder("kill", sig, Long.toString(pid())).start();
    if (k.waitFor() != 0) {
      throw new IOException("kill " + sig + " " + pid() + " failed");
    }
  }

  ShuffledClient connect() throws IOException {
    return ShuffledClient.connect(socket);
  }

  ShuffledClient connect(ClientOptions o) throws IOException {
    return ShuffledClient.connect(socket, o);
  }

  /** The flat output dir of an executor registered without local dirs. */
  Path outputDir(String app, String exec) {
    return root.resolve(app).resolve(exec);
  }

  @Override
  public void close() throws IOException {
    if (process != null && process.isAlive()) {
      process.destroy();
      try {
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
          process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    deleteTree(dir.toFile());
  }

  private static void deleteTree(File f) {
    File[] kids = f.listFiles();
    if (kids != null) {
      for (File k : kids) {
        deleteTree(k);
      }
    }
    f.delete();
  }
}
