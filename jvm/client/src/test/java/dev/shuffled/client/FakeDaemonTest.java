package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
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

  interface Script {
    void run(SocketChannel ch) throws Exception;
  }

  /** Serves one connection with {@code script} on a new socket; returns its path. */
  private Path serve(Script script) throws IOException {
    Path sock = dir.resolve("fake.sock");
    Files.deleteIfExists(sock);
    ServerSocketChannel ss = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
    ss.bind(UnixDomainSocketAddress.of(sock));
    Thread t =
        new Thread(
            () -> {
              try (ss;
                  SocketChannel ch = ss.accept()) {
                script.run(ch);
              } catch (Exception ignored) {
                // the client hung up: the script is over
              }
            });
    t.setDaemon(true);
    t.start();
    return sock;
  }

  /** Reads one whole frame; returns its header. */
  private static Wire.Header readFrame(SocketChannel ch) throws IOException {
    ByteBuffer h = ByteBuffer.allocate(Wire.HEADER_SIZE).order(ByteOrder.LITTLE_ENDIAN);
    while (h.hasRemaining()) {
      if (ch.read(h) < 0) {
        throw new IOException("eof");
      }
    }
    h.flip();
    Wire.Header hd = Wire.readHeader(h, 1 << 26);
    ByteBuffer p = ByteBuffer.allocate(hd.length());
    while (p.hasRemaining()) {
      if (ch.read(p) < 0) {
        throw new IOException("eof");
      }
    }
    return hd;
  }

  private static void send(SocketChannel ch, int id, Wire.Msg m) throws IOException {
    ByteBuffer b = ByteBuffer.wrap(Wire.frame(id, m, 0));
    while (b.hasRemaining()) {
      ch.write(b);
    }
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
}
