package dev.shuffled.client;

import static dev.shuffled.client.FakeDaemon.readFrame;
import static dev.shuffled.client.FakeDaemon.readReq;
import static dev.shuffled.client.FakeDaemon.send;
import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Daemon behaviour the real one shows only in rare states (a refused peer, a connection-level
 * error mid-session, a broken frame), from a scripted fake server.
 */
class FakeDaemonTest {
  @TempDir Path dir;

  /** Serves one connection with {@code script} on a new socket; returns its path. */
  private Path serve(FakeDaemon.Script script) throws IOException {
    return FakeDaemon.serve(dir.resolve("fake.sock"), script);
  }

  /**
   * A daemon that accepts every request of map outputs' lives, announcing {@code features}, and
   * records each request it reads, in order.
   */
  private Path serveMapOutputs(long features, List<Wire.Msg> got) throws IOException {
    return serveMapOutputs(new Wire.ServerHello(1, 1 << 20, 1 << 19, features, "fake"), got);
  }

  /** {@link #serveMapOutputs(long, List)} answering Hello with {@code hello}. */
  private Path serveMapOutputs(Wire.ServerHello hello, List<Wire.Msg> got) throws IOException {
    return serve(
        ch -> {
          int parts = 0;
          while (true) {
            FakeDaemon.Req r = readReq(ch);
            got.add(r.m());
            Wire.Msg answer;
            if (r.m() instanceof Wire.Hello) {
              answer = hello;
            } else if (r.m() instanceof Wire.Register) {
              answer = new Wire.Registered(List.of("/var/lib/shuffled/app/exec"));
            } else if (r.m() instanceof Wire.Open o) {
              parts = o.numPartitions();
              answer = new Wire.Opened(got.size());
            } else if (r.m() instanceof Wire.Batch) {
              answer = new Wire.BatchAccepted();
            } else if (r.m() instanceof Wire.Commit) {
              answer = new Wire.CommitRes(false, 1, new long[parts], new long[0]);
            } else {
              answer = new Wire.Empty(r.m().type() | Wire.RESPONSE);
            }
            send(ch, r.id(), answer);
          }
        });
  }

  private static final Wire.ServerHello HELLO =
      new Wire.ServerHello(1, 1 << 20, 1 << 19, ServerInfo.FEATURE_LIFECYCLE, "fake");

  @Test
  void refusedPeerIsAShuffledException() throws Exception {
    Path sock =
        serve(
            ch -> {
              readFrame(ch);
              send(ch, 0, new Wire.Error(5, "peer uid 1000 gid 1000 is not allowed to use this daemon"));
            });
    ShuffledException e = assertThrows(ShuffledException.class, () -> ShuffledClient.connect(sock));
    assertEquals(ErrorCode.PERMISSION_DENIED, e.code());
    assertTrue(e.getMessage().contains("uid 1000"), e.getMessage());
  }

  @Test
  void connectionLevelErrorFailsEveryPendingRequest() throws Exception {
    CompletableFuture<Void> got3 = new CompletableFuture<>();
    Path sock =
        serve(
            ch -> {
              Wire.Header h = readFrame(ch);
              send(ch, h.id(), HELLO);
              for (int i = 0; i < 3; i++) {
                readFrame(ch); // three pings, never answered
              }
              got3.complete(null);
              send(ch, 0, new Wire.Error(9, "draining: shutting down"));
              Thread.sleep(10_000);
            });
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      List<CompletableFuture<Throwable>> pings = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        pings.add(
            CompletableFuture.supplyAsync(
                () -> {
                  try {
                    c.ping();
                    return null;
                  } catch (Throwable t) {
                    return t;
                  }
                }));
      }
      for (CompletableFuture<Throwable> p : pings) {
        Throwable t = p.get(10, TimeUnit.SECONDS);
        assertInstanceOf(ConnectionLostException.class, t);
        assertTrue(t.getMessage().contains("Unavailable: draining: shutting down"), t.getMessage());
      }
      assertTrue(got3.isDone());
    }
  }

  @Test
  void brokenFrameFailsTheConnection() throws Exception {
    Path sock =
        serve(
            ch -> {
              Wire.Header h = readFrame(ch);
              send(ch, h.id(), HELLO);
              h = readFrame(ch);
              byte[] bad = Wire.frame(h.id(), new Wire.Empty(Wire.PING | Wire.RESPONSE), 0);
              bad[0] = 'X';
              ch.write(ByteBuffer.wrap(bad));
              Thread.sleep(10_000);
            });
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      ConnectionLostException e = assertThrows(ConnectionLostException.class, c::ping);
      assertTrue(e.getMessage().contains("magic 58 48"), e.getMessage());
    }
  }

  @Test
  void wrongResponseTypeFailsTheConnection() throws Exception {
    Path sock =
        serve(
            ch -> {
              Wire.Header h = readFrame(ch);
              send(ch, h.id(), HELLO);
              h = readFrame(ch);
              send(ch, h.id(), new Wire.Opened(7)); // in answer to Ping
              Thread.sleep(10_000);
            });
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      ConnectionLostException e = assertThrows(ConnectionLostException.class, c::ping);
      assertTrue(e.getMessage().contains("Opened in answer to Ping"), e.getMessage());
    }
  }

  /** The flags of the Batch frames in {@code got}, in order. */
  private static List<Integer> batchFlags(List<Wire.Msg> got) {
    return got.stream()
        .filter(m -> m instanceof Wire.Batch)
        .map(m -> ((Wire.Batch) m).flags())
        .toList();
  }

  private static final long[] TWO = {0, 2, 3};

  /** Three batches, the third marked last, then commit. */
  private static void threeBatches(ShuffledClient c) throws IOException {
    c.register("app", "exec");
    try (MapOutput o = c.openMapOutput(0, 1, 2, OpenOptions.DEFAULTS)) {
      o.writeOpaque("abc".getBytes(), TWO);
      o.writeOpaque("def".getBytes(), TWO);
      o.markLast();
      o.writeOpaque("ghi".getBytes(), TWO);
      o.commit();
    }
  }

  @Test
  void lastFlagOnlyOnTheMarkedBatchWhenAnnounced() throws Exception {
    List<Wire.Msg> got = new java.util.concurrent.CopyOnWriteArrayList<>();
    Path sock = serveMapOutputs(ServerInfo.FEATURE_LIFECYCLE | ServerInfo.FEATURE_LAST_BATCH, got);
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      assertTrue(c.serverInfo().has(ServerInfo.FEATURE_LAST_BATCH));
      threeBatches(c);
    }
    assertEquals(List.of(0, 0, Wire.BATCH_LAST), batchFlags(got), "Batch flags, in order");
  }

  @Test
  void noLastFlagWithoutTheFeature() throws Exception {
    List<Wire.Msg> got = new java.util.concurrent.CopyOnWriteArrayList<>();
    Path sock = serveMapOutputs(ServerInfo.FEATURE_LIFECYCLE, got);
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      assertFalse(c.serverInfo().has(ServerInfo.FEATURE_LAST_BATCH));
      threeBatches(c);
    }
    assertEquals(List.of(0, 0, 0), batchFlags(got), "Batch flags, in order");
    assertInstanceOf(Wire.Commit.class, got.get(got.size() - 1));
  }

  @Test
  void writeAfterTheLastThrowsAndSendsNothing() throws Exception {
    List<Wire.Msg> got = new java.util.concurrent.CopyOnWriteArrayList<>();
    Path sock = serveMapOutputs(ServerInfo.FEATURE_LAST_BATCH, got);
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      c.register("app", "exec");
      MapOutput o = c.openMapOutput(3, 7, 2, OpenOptions.DEFAULTS);
      o.markLast();
      // Refused before sending: the mark stays for the next write.
      assertThrows(IllegalArgumentException.class, () -> o.writeOpaque("ab".getBytes(), TWO));
      o.markLast(); // again: no change
      o.writeOpaque("abc".getBytes(), TWO);
      IllegalStateException e =
          assertThrows(IllegalStateException.class, () -> o.writeOpaque("def".getBytes(), TWO));
      assertTrue(e.getMessage().contains("map output 3/7"), e.getMessage());
      assertTrue(e.getMessage().contains("last batch"), e.getMessage());
      assertThrows(IllegalStateException.class, o::markLast);
      assertEquals(0, o.commit().totalLength());
      assertThrows(IllegalStateException.class, () -> o.writeOpaque("def".getBytes(), TWO));

      MapOutput aborted = c.openMapOutput(3, 8, 2, OpenOptions.DEFAULTS);
      aborted.markLast();
      aborted.writeOpaque("abc".getBytes(), TWO);
      aborted.abort();
      assertTrue(aborted.isFinished());
    }
    List<String> types = got.stream().map(m -> Wire.typeName(m.type())).toList();
    assertEquals(
        List.of("Hello", "RegisterExecutor", "OpenMapOutput", "Batch", "Commit", "OpenMapOutput",
            "Batch", "Abort"),
        types,
        "the requests the daemon read");
    assertEquals(List.of(Wire.BATCH_LAST, Wire.BATCH_LAST), batchFlags(got));
  }

  /** Waits up to 5 s for an Abort of {@code handle} among the requests the fake read. */
  private static boolean abortArrives(List<Wire.Msg> got, long handle) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (System.nanoTime() < deadline) {
      for (Wire.Msg m : got) {
        if (m instanceof Wire.Abort a && a.handle() == handle) {
          return true;
        }
      }
      Thread.sleep(10);
    }
    return false;
  }

  /** The handle the fake gave the map output whose Open was the {@code n}-th request it read. */
  private static long handleOf(List<Wire.Msg> got, int shuffle, long map) {
    for (int i = 0; i < got.size(); i++) {
      if (got.get(i) instanceof Wire.Open o && o.shuffleId() == shuffle && o.mapId() == map) {
        return i + 1; // serveMapOutputs answers Opened(requests read so far)
      }
    }
    throw new AssertionError("no Open of " + shuffle + "/" + map + " in " + got);
  }

  @Test
  void interruptedThreadStillSendsTheAbort() throws Exception {
    // Spark kills a task by interrupting it; the task then closes its map output on that thread.
    // The Abort must still go out, or the daemon keeps the output open until the connection ends.
    List<Wire.Msg> got = new java.util.concurrent.CopyOnWriteArrayList<>();
    Path sock = serveMapOutputs(ServerInfo.FEATURE_LIFECYCLE, got);
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      c.register("app", "exec");
      MapOutput closed = c.openMapOutput(3, 7, 2, OpenOptions.DEFAULTS);
      closed.writeOpaque("abc".getBytes(), TWO);
      MapOutput aborted = c.openMapOutput(3, 8, 2, OpenOptions.DEFAULTS);

      Thread.currentThread().interrupt();
      try {
        closed.close();
        assertTrue(Thread.currentThread().isInterrupted(), "close() kept the interrupt");
        aborted.abort(); // no InterruptedIOException either
        assertTrue(Thread.currentThread().isInterrupted(), "abort() kept the interrupt");
      } finally {
        Thread.interrupted();
      }
      assertTrue(closed.isFinished());
      assertTrue(aborted.isFinished());
      assertTrue(abortArrives(got, handleOf(got, 3, 7)), "no Abort of 3/7 after close(): " + got);
      assertTrue(abortArrives(got, handleOf(got, 3, 8)), "no Abort of 3/8 after abort(): " + got);
      c.ping(); // the connection is intact: the answers to the Aborts were taken and dropped
    }
  }

  @Test
  void serverHelloOutOfBoundsFailsTheHandshake() throws Exception {
    // max_inline 0 would leave a writer that cuts batches in max_inline pieces looping for ever.
    Path sock = serveMapOutputs(new Wire.ServerHello(1, 1 << 20, 0, 0, "fake"), new ArrayList<>());
    IOException e = assertThrows(IOException.class, () -> ShuffledClient.connect(sock));
    assertTrue(e.getMessage().contains("handshake"), e.getMessage());
    assertTrue(e.getMessage().contains("MaxInline: 0, want 1..MaxFrame (1048576)"), e.getMessage());

    Path sock2 = serveMapOutputs(new Wire.ServerHello(1, 4096, 1024, 0, "fake"), new ArrayList<>());
    e = assertThrows(IOException.class, () -> ShuffledClient.connect(sock2));
    assertTrue(e.getMessage().contains("MaxFrame: 4096, want >= 65536"), e.getMessage());
  }

  @Test
  void inlineBatchAndItsHeadFitMaxFrame() throws Exception {
    // A daemon announcing max_inline = max_frame: a payload of max_inline bytes plus the Batch
    // head would be a frame over max_frame. The limit is what the head leaves.
    List<Wire.Msg> got = new java.util.concurrent.CopyOnWriteArrayList<>();
    Path sock = serveMapOutputs(new Wire.ServerHello(1, 1 << 20, 1 << 20, 0, "fake"), got);
    try (ShuffledClient c =
        ShuffledClient.connect(sock, ClientOptions.DEFAULTS.withDataPlane(DataPlane.INLINE))) {
      c.register("app", "exec");
      try (MapOutput o = c.openMapOutput(0, 1, 2, OpenOptions.DEFAULTS)) {
        int head = 8 + 4 + 4 + 8 * 3 + 4; // handle, kind..reserved, count, offsets, inline length
        assertEquals((1 << 20) - head, o.maxBatchBytes());
        byte[] over = new byte[(int) o.maxBatchBytes() + 1];
        IllegalArgumentException e =
            assertThrows(
                IllegalArgumentException.class,
                () -> o.writeOpaque(over, new long[] {0, 1, over.length}));
        assertTrue(e.getMessage().contains("max_frame 1048576"), e.getMessage());
        byte[] fits = new byte[(int) o.maxBatchBytes()];
        o.writeOpaque(fits, new long[] {0, 1, fits.length}); // a frame of exactly max_frame
        o.commit();
      }
    }
    assertEquals(1, got.stream().filter(m -> m instanceof Wire.Batch).count());
  }

  @Test
  void partitionCountBoundIsTheProtocols() throws Exception {
    assertEquals(1 << 20, ShuffledClient.MAX_PARTITIONS);
    List<Wire.Msg> got = new java.util.concurrent.CopyOnWriteArrayList<>();
    Path sock = serveMapOutputs(ServerInfo.FEATURE_LIFECYCLE, got);
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      c.register("app", "exec");
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () -> c.openMapOutput(0, 1, (1 << 20) + 1, OpenOptions.DEFAULTS));
      assertTrue(e.getMessage().contains("want 1..1048576"), e.getMessage());
      c.openMapOutput(0, 2, 1 << 20, OpenOptions.DEFAULTS).abort();
    }
    List<String> types = got.stream().map(m -> Wire.typeName(m.type())).toList();
    assertEquals(List.of("Hello", "RegisterExecutor", "OpenMapOutput", "Abort"), types);
  }
}
