package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.net.SocketTimeoutException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Reconnecting to a stalled daemon, and a killed task's cleanup with every request slot taken. */
class ReconnectTest {
  @TempDir Path dir;

  private static final Wire.ServerHello HELLO =
      new Wire.ServerHello(1, 1 << 20, 1 << 19, ServerInfo.FEATURE_LIFECYCLE, "fake");

  /**
   * Serves one connection: answers Hello, Register and Open; leaves Ping unanswered, or with
   * {@code hangUpAtPing} closes the connection at it. Records the request types it read.
   */
  private Path serve(Path sock, boolean hangUpAtPing, List<Integer> got) throws IOException {
    return FakeDaemon.serve(
        sock,
        ch -> {
          int n = 0;
          while (true) {
            FakeDaemon.Req r = FakeDaemon.readReq(ch);
            Wire.Msg m = r.m();
            got.add(r.type());
            Wire.Msg answer;
            if (m instanceof Wire.Hello) {
              answer = HELLO;
            } else if (m instanceof Wire.Register) {
              answer = new Wire.Registered(List.of("/var/lib/shuffled/app/exec"));
            } else if (m instanceof Wire.Open) {
              answer = new Wire.Opened(++n);
            } else if (r.type() == Wire.PING && hangUpAtPing) {
              return;
            } else if (r.type() == Wire.PING) {
              continue;
            } else {
              answer = new Wire.Empty(r.type() | Wire.RESPONSE);
            }
            FakeDaemon.send(ch, r.id(), answer);
          }
        });
  }

  /** A client whose daemon hung up, and a listener in its place that never accepts. */
  private ShuffledClient lostToAStalledDaemon(ClientOptions o, List<AutoCloseable> keep)
      throws Exception {
    Path sock = dir.resolve("d.sock");
    serve(sock, true, new CopyOnWriteArrayList<>());
    ShuffledClient c = ShuffledClient.connect(sock, o);
    c.register("app", "exec");
    assertThrows(ConnectionLostException.class, c::ping);
    Files.deleteIfExists(sock);
    ServerSocketChannel stalled = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
    stalled.bind(UnixDomainSocketAddress.of(sock));
    keep.add(stalled);
    return c;
  }

  @Test
  void waitersTakeTheOutcomeOfTheReconnectInProgress() throws Exception {
    // A stalled daemon: each attempt spends the connect timeout. Six callers at once must not
    // spend it in turn (six timeouts for the last), but share the one attempt's failure.
    List<AutoCloseable> keep = new ArrayList<>();
    ClientOptions o = ClientOptions.DEFAULTS.withConnectTimeout(Duration.ofMillis(1500));
    try (ShuffledClient c = lostToAStalledDaemon(o, keep)) {
      List<CompletableFuture<Long>> took = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        CompletableFuture<Long> f = new CompletableFuture<>();
        took.add(f);
        Thread t =
            new Thread(
                () -> {
                  long t0 = System.nanoTime();
                  try {
                    c.openMapOutput(0, 1, 2, OpenOptions.DEFAULTS);
                    f.completeExceptionally(new AssertionError("opened on a stalled daemon"));
                  } catch (IOException e) {
                    f.complete((System.nanoTime() - t0) / 1_000_000);
                  } catch (RuntimeException e) {
                    f.completeExceptionally(e);
                  }
                });
        t.setDaemon(true);
        t.start();
      }
      for (CompletableFuture<Long> f : took) {
        long ms = f.get(30, TimeUnit.SECONDS);
        assertTrue(ms < 4000, "a caller waited " + ms + " ms, want about one connect timeout");
      }
    } finally {
      for (AutoCloseable k : keep) {
        k.close();
      }
    }
  }

  @Test
  void reconnectWithinBoundsTheAttempt() throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    ClientOptions o = ClientOptions.DEFAULTS.withConnectTimeout(Duration.ofSeconds(20));
    try (ShuffledClient c = lostToAStalledDaemon(o, keep)) {
      long t0 = System.nanoTime();
      IOException e =
          assertThrows(
              IOException.class,
              () -> c.openMapOutput(0, 1, 2, OpenOptions.DEFAULTS, Duration.ofMillis(300)));
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(ms < 3000, "gave up after " + ms + " ms, want about 300");
      assertTrue(e instanceof ConnectionLostException || e instanceof SocketTimeoutException, e.toString());
    } finally {
      for (AutoCloseable k : keep) {
        k.close();
      }
    }
  }

  @Test
  void interruptedCleanupWaitsBrieflyForARequestSlot() throws Exception {
    // One request slot, taken by a Ping the daemon never answers: a killed task's Abort must not
    // wait the request timeout (20 s) for it.
    List<Integer> got = new CopyOnWriteArrayList<>();
    Path sock = serve(dir.resolve("s.sock"), false, got);
    ClientOptions o =
        ClientOptions.DEFAULTS.withMaxOutstanding(1).withRequestTimeout(Duration.ofSeconds(20));
    try (ShuffledClient c = ShuffledClient.connect(sock, o)) {
      c.register("app", "exec");
      MapOutput out = c.openMapOutput(0, 1, 2, OpenOptions.DEFAULTS);
      Thread pinger =
          new Thread(
              () -> {
                try {
                  c.ping();
                } catch (IOException ignored) {
                  // the client's close ends it
                }
              });
      pinger.setDaemon(true);
      pinger.start();
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      while (!got.contains(Wire.PING) && System.nanoTime() < until) {
        Thread.sleep(10);
      }
      assertTrue(got.contains(Wire.PING), "the Ping never arrived: " + got);
      long t0 = System.nanoTime();
      Thread.currentThread().interrupt();
      try {
        out.close();
        assertTrue(Thread.currentThread().isInterrupted(), "the interrupt is kept");
      } finally {
        Thread.interrupted();
      }
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(ms < 5000, "a killed task's close took " + ms + " ms");
      assertTrue(out.isFinished());
    }
  }
}
