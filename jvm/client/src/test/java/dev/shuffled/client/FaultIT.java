package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The daemon dies, restarts, stalls or refuses: exceptions in bounded time, never a hang. */
class FaultIT {
  private static long[] offsets(int n, int size) {
    long[] o = new long[n + 1];
    for (int i = 0; i < n; i++) {
      o[i + 1] = o[i] + size / n;
    }
    o[n] = size;
    return o;
  }

  private static List<Thread> clientThreads() {
    List<Thread> out = new ArrayList<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.getName().startsWith("shuffled-client-") && t.isAlive()) {
        out.add(t);
      }
    }
    return out;
  }

  @Test
  void sigkillMidWriteFailsEveryWriterThenRestartWorks() throws Exception {
    try (Daemon d = Daemon.start()) {
      ShuffledClient c = d.connect();
      c.register("app-f", "exec");
      int writers = 8;
      CountDownLatch writing = new CountDownLatch(writers);
      List<Throwable> errors = new CopyOnWriteArrayList<>();
      List<Thread> threads = new ArrayList<>();
      byte[] data = Payloads.records(new Random(1), 1 << 20);
      for (int w = 0; w < writers; w++) {
        int map = w;
        Thread t =
            new Thread(
                () -> {
                  try (MapOutput m = c.openMapOutput(0, map, 4, OpenOptions.DEFAULTS)) {
                    writing.countDown();
                    while (true) {
                      m.writeOpaque(data, offsets(4, data.length));
                    }
                  } catch (Throwable e) {
                    errors.add(e);
                  }
                },
                "writer-" + w);
        threads.add(t);
        t.start();
      }
      assertTrue(writing.await(30, TimeUnit.SECONDS), "writers started");
      Thread.sleep(200);
      long killed = System.nanoTime();
      d.kill();
      for (Thread t : threads) {
        t.join(10_000);
        assertFalse(t.isAlive(), t.getName() + " still blocked 10 s after SIGKILL");
      }
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
      assertEquals(writers, errors.size(), "every writer failed: " + errors);
      for (Throwable e : errors) {
        assertInstanceOf(ConnectionLostException.class, e, "writer's exception");
        assertTrue(e.getMessage().contains("map output 0/"), e.getMessage());
      }
      assertTrue(ms < 10_000, "writers failed " + ms + " ms after SIGKILL");
      // The client's own threads end with the connection.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (!clientThreads().isEmpty() && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      assertEquals(List.of(), clientThreads(), "client threads left after the connection died");

      ConnectionLostException down = assertThrows(ConnectionLostException.class, c::ping);
      assertTrue(down.getMessage().contains("reconnecting failed"), down.getMessage());

      d.restart();
      // The next open connects and registers again.
      try (MapOutput m = c.openMapOutput(1, 0, 2, OpenOptions.of(Codec.NONE, ChecksumAlgorithm.ADLER32))) {
        m.writeOpaque(new byte[] {1, 2, 3}, new long[] {0, 1, 3});
        assertArrayEquals(new long[] {1, 2}, m.commit().lengths());
      }
      c.ping();
      c.close();
      assertEquals(List.of(), clientThreads(), "client threads left after close");
    }
  }

  @Test
  void closeFailsOpenOutputsAndTheDaemonAbortsThem() throws Exception {
    try (Daemon d = Daemon.start();
        ShuffledClient watcher = d.connect()) {
      ShuffledClient c = d.connect();
      c.register("app-f", "exec");
      MapOutput m = c.openMapOutput(0, 0, 1, OpenOptions.DEFAULTS);
      m.writeOpaque(new byte[10], new long[] {0, 10});
      c.close();
      c.close(); // idempotent
      ConnectionLostException e = assertThrows(ConnectionLostException.class, m::commit);
      assertTrue(e.getMessage().contains("closed by the client"), e.getMessage());
      m.abort(); // allowed, a no-op
      assertThrows(ConnectionLostException.class, () -> c.openMapOutput(0, 1, 1, OpenOptions.DEFAULTS));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (watcher.stats().get("open_map_outputs") != 0 && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      assertEquals(0L, watcher.stats().get("open_map_outputs"));
    }
  }

  @Test
  void oversizeBatchRefusedBeforeSending() throws Exception {
    try (Daemon d = Daemon.start("--max-frame=1MiB");
        ShuffledClient c = d.connect(ClientOptions.DEFAULTS.withDataPlane(DataPlane.INLINE))) {
      c.register("app-f", "exec");
      long max = c.serverInfo().maxInline();
      assertTrue(max < 1 << 20, "max_inline " + max);
      try (MapOutput m = c.openMapOutput(0, 0, 1, OpenOptions.of(Codec.NONE, ChecksumAlgorithm.NONE))) {
        assertEquals(max, m.maxBatchBytes());
        byte[] big = new byte[(int) max + 1];
        IllegalArgumentException e =
            assertThrows(IllegalArgumentException.class, () -> m.writeOpaque(big, new long[] {0, big.length}));
        assertTrue(e.getMessage().contains("exceeds the daemon's max_inline " + max), e.getMessage());
        // Had it gone out, the daemon would have aborted the map output.
        byte[] fits = new byte[(int) max];
        m.writeOpaque(fits, new long[] {0, fits.length});
        CommitResult r = m.commit();
        assertArrayEquals(new long[] {max}, r.lengths());
        assertEquals(0, r.checksums().length);
      }
    }
  }

  @Test
  void stalledDaemonTimesOut() throws Exception {
    try (Daemon d = Daemon.start();
        ShuffledClient c = d.connect(ClientOptions.DEFAULTS.withRequestTimeout(Duration.ofMillis(500)))) {
      c.register("app-f", "exec");
      d.pause();
      try {
        long t0 = System.nanoTime();
        SocketTimeoutException e = assertThrows(SocketTimeoutException.class, c::ping);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms >= 400 && ms < 5000, "timed out after " + ms + " ms");
        assertTrue(e.getMessage().contains("ping: no answer from the daemon within PT0.5S"), e.getMessage());
      } finally {
        d.resume();
      }
      c.ping(); // the late Pong was dropped; the connection still works
    }
  }

  @Test
  void stalledDaemonCannotBlockAWriterForever() throws Exception {
    try (Daemon d = Daemon.start();
        ShuffledClient c =
            d.connect(
                ClientOptions.DEFAULTS
                    .withRequestTimeout(Duration.ofSeconds(1))
                    .withDataPlane(DataPlane.INLINE))) {
      c.register("app-f", "exec");
      MapOutput m = c.openMapOutput(0, 0, 1, OpenOptions.DEFAULTS);
      byte[] big = new byte[(int) Math.min(c.serverInfo().maxInline(), 32 << 20)];
      d.pause();
      try {
        long t0 = System.nanoTime();
        IOException e =
            assertThrows(IOException.class, () -> {
              for (int i = 0; i < 64; i++) { // more than the socket buffers hold
                m.writeOpaque(big, new long[] {0, big.length});
              }
            });
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms < 10_000, "gave up after " + ms + " ms");
        assertTrue(
            e instanceof SocketTimeoutException || e instanceof ConnectionLostException, e.toString());
      } finally {
        d.resume();
      }
      m.abort();
      c.ping(); // connects again if the stall cost the connection
    }
  }

  @Test
  void drainingDaemonFinishesOpenOutputsRefusesNewOnesAbortsLaggards() throws Exception {
    try (Daemon d = Daemon.start("--drain-timeout=1s");
        ShuffledClient c = d.connect()) {
      c.register("app-f", "exec");
      MapOutput finishing = c.openMapOutput(0, 0, 1, OpenOptions.DEFAULTS);
      MapOutput lagging = c.openMapOutput(0, 1, 1, OpenOptions.DEFAULTS);
      finishing.writeOpaque(new byte[10], new long[] {0, 10});
      d.terminate();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      ShuffledException refused = null;
      while (refused == null && System.nanoTime() < deadline) {
        try {
          c.openMapOutput(0, 2, 1, OpenOptions.DEFAULTS).abort();
          Thread.sleep(10); // SIGTERM not handled yet
        } catch (ShuffledException e) {
          refused = e;
        }
      }
      assertNotNull(refused, "no Unavailable within 5 s of SIGTERM");
      assertEquals(ErrorCode.UNAVAILABLE, refused.code(), refused.getMessage());
      // Open map outputs may finish until the drain deadline...
      assertEquals(1, finishing.commit().lengths().length);
      // ...and the rest are aborted there, then the connection ends: no hang either way.
      Thread.sleep(1500);
      long t0 = System.nanoTime();
      IOException e =
          assertThrows(IOException.class, () -> lagging.writeOpaque(new byte[1], new long[] {0, 1}));
      assertTrue(
          e instanceof ConnectionLostException
              || (e instanceof ShuffledException se && se.code() == ErrorCode.ABORTED),
          e.toString());
      assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 10_000);
    }
  }

  @Test
  void connectToNothingFails() {
    IOException e =
        assertThrows(
            IOException.class,
            () -> ShuffledClient.connect(java.nio.file.Path.of("/tmp/no-such-shuffled.sock")));
    assertFalse(e instanceof ShuffledException, e.toString());
  }

  @Test
  void connectTimeoutBoundsAStalledConnect() throws Exception {
    // A daemon that stopped accepting: once its listen backlog is full, connect(2) blocks. The
    // connect timeout bounds that too, on both transports (memfd's is the FFM one on JDK 22+).
    java.nio.file.Path dir = java.nio.file.Files.createTempDirectory(java.nio.file.Path.of("/tmp"), "shuffled-jvm-");
    java.nio.file.Path sock = dir.resolve("stalled.sock");
    java.net.UnixDomainSocketAddress addr = java.net.UnixDomainSocketAddress.of(sock);
    List<java.nio.channels.SocketChannel> queued = new ArrayList<>();
    try (java.nio.channels.ServerSocketChannel ss =
        java.nio.channels.ServerSocketChannel.open(java.net.StandardProtocolFamily.UNIX)) {
      ss.bind(addr, 1); // never accepts
      boolean full = false;
      for (int i = 0; i < 64 && !full; i++) {
        java.nio.channels.SocketChannel ch =
            java.nio.channels.SocketChannel.open(java.net.StandardProtocolFamily.UNIX);
        ch.configureBlocking(false);
        try {
          ch.connect(addr);
          queued.add(ch);
        } catch (IOException backlogFull) {
          ch.close();
          full = true;
        }
      }
      assertTrue(full, "the listen backlog never filled");
      for (DataPlane plane : DataPlane.values()) {
        ClientOptions o =
            ClientOptions.DEFAULTS.withConnectTimeout(Duration.ofMillis(300)).withDataPlane(plane);
        long t0 = System.nanoTime();
        SocketTimeoutException e =
            assertTimeoutPreemptively(
                Duration.ofSeconds(10),
                () -> assertThrows(SocketTimeoutException.class, () -> ShuffledClient.connect(sock, o)),
                plane + ": connect did not end within 10 s");
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms >= 250 && ms < 5000, plane + ": gave up after " + ms + " ms");
        assertTrue(e.getMessage().contains("not accepted within PT0.3S"), e.getMessage());
      }
    } finally {
      for (java.nio.channels.SocketChannel ch : queued) {
        ch.close();
      }
      java.nio.file.Files.deleteIfExists(sock);
      java.nio.file.Files.deleteIfExists(dir);
    }
    // Connecting threads do not outlive the attempts.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (clientThreads().stream().anyMatch(t -> t.getName().equals("shuffled-client-connect"))
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertTrue(
        clientThreads().stream().noneMatch(t -> t.getName().equals("shuffled-client-connect")),
        "connect threads left: " + clientThreads());
  }

  @Test
  void interruptedCloseAbortsOnTheDaemon() throws Exception {
    // A killed Spark task closes its map output on its interrupted thread: the daemon must release
    // the output then, not when the (long-lived) executor's connection ends.
    try (Daemon d = Daemon.start();
        ShuffledClient watcher = d.connect();
        ShuffledClient c = d.connect()) {
      c.register("app-f", "exec");
      long aborts = watcher.stats().get(ShuffledClient.STAT_ABORTS_TOTAL);
      List<MapOutput> outs = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        MapOutput m = c.openMapOutput(0, i, 2, OpenOptions.DEFAULTS);
        m.writeOpaque(new byte[10], new long[] {0, 4, 10});
        outs.add(m);
      }
      assertEquals(3L, watcher.stats().get("open_map_outputs"));
      Thread.currentThread().interrupt();
      try {
        for (MapOutput m : outs) {
          m.close();
        }
        assertTrue(Thread.currentThread().isInterrupted());
      } finally {
        Thread.interrupted();
      }
      assertEquals(0L, Daemon.awaitStat(watcher, "open_map_outputs", 0));
      assertEquals(aborts + 3, Daemon.awaitStat(watcher, ShuffledClient.STAT_ABORTS_TOTAL, aborts + 3));
      c.ping();
    }
  }
}
