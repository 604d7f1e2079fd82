package dev.shuffled.client;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A scripted fake daemon for the client's tests: one connection on a Unix socket, served by a
 * script on a daemon thread, and the frame reading and writing the scripts share.
 */
final class FakeDaemon {
  private FakeDaemon() {}

  /** What the fake daemon does with its one connection. */
  interface Script {
    void run(SocketChannel ch) throws Exception;
  }

  /** A request as read: its frame id, its type and the message decoded. */
  record Req(int id, int type, Wire.Msg m) {}

  /**
   * Binds {@code sock} (replacing a file there) and serves its first connection with {@code
   * script}; returns {@code sock}. The script ends, and the connection with it, when the client
   * hangs up (any exception ends it).
   */
  static Path serve(Path sock, Script script) throws IOException {
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

  /** Reads one whole frame; returns its header (the payload is read and dropped). */
  static Wire.Header readFrame(SocketChannel ch) throws IOException {
    Wire.Header hd = readHeader(ch);
    readFully(ch, ByteBuffer.allocate(hd.length()));
    return hd;
  }

  /** Reads one whole frame and decodes its request. */
  static Req readReq(SocketChannel ch) throws IOException {
    Wire.Header hd = readHeader(ch);
    ByteBuffer p = ByteBuffer.allocate(hd.length());
    readFully(ch, p);
    p.flip();
    return new Req(hd.id(), hd.type(), Wire.decode(hd.type(), p));
  }

  /** Writes {@code m} as the frame of id {@code id}. */
  static void send(SocketChannel ch, int id, Wire.Msg m) throws IOException {
    ByteBuffer b = ByteBuffer.wrap(Wire.frame(id, m, 0));
    while (b.hasRemaining()) {
      ch.write(b);
    }
  }

  private static Wire.Header readHeader(SocketChannel ch) throws IOException {
    ByteBuffer h = ByteBuffer.allocate(Wire.HEADER_SIZE).order(ByteOrder.LITTLE_ENDIAN);
    readFully(ch, h);
    h.flip();
    return Wire.readHeader(h, 1 << 26);
  }

  private static void readFully(SocketChannel ch, ByteBuffer b) throws IOException {
    while (b.hasRemaining()) {
      if (ch.read(b) < 0) {
        throw new IOException("eof");
      }
    }
  }
}
