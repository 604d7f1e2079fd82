package org.apache.spark.shuffle.shuffled;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A scripted daemon for the writer's tests, written from docs/protocol.md: it serves one
 * connection, accepts every request of map outputs' lives (inline batches only: it does not
 * announce memfd), or answers the next Opens with the errors {@link #failOpens} queued, and
 * records the requests' types and the batches it reads, in order.
 */
final class FakeDaemon implements AutoCloseable {
  /** One Batch frame as read: its flags byte, partition offsets and inline payload. */
  record Batch(int flags, long[] offsets, byte[] payload) {}

  static final int HELLO = 1;
  static final int REGISTER = 2;
  static final int OPEN = 3;
  static final int BATCH = 4;
  static final int COMMIT = 5;
  static final int ABORT = 6;
  static final int RESPONSE = 0x8000;
  static final int ERROR = 0xFFFF;
  static final int UNAVAILABLE = 9;
  static final int RESOURCE_EXHAUSTED = 6;
  static final int INVALID_ARGUMENT = 1;
  static final long FEATURE_LAST_BATCH = 1L << 5;
  static final long FEATURE_IO_ENCRYPTION = 1L << 6;
  static final long FEATURE_SERVING = 1L << 7;
  static final int LAST = 0x01;

  final Path socket;
  final List<Integer> types = new CopyOnWriteArrayList<>();
  final List<Batch> batches = new CopyOnWriteArrayList<>();
  /** The payloads of the RegisterExecutor requests, and the flags byte of each Open. */
  final List<byte[]> registers = new CopyOnWriteArrayList<>();
  final List<Integer> openFlags = new CopyOnWriteArrayList<>();
  /** Error codes the next Opens are answered with, in order. */
  private final java.util.Queue<Integer> openErrors =
      new java.util.concurrent.ConcurrentLinkedQueue<>();
  /**
   * Registered's serving tail, answered when RegisterExecutor carries the auth tail: host ("" for
   * a daemon whose block server is off), port and flags; set before the client registers.
   */
  volatile String serveHost = "";
  volatile int servePort;
  volatile int serveFlags;
  /** The max_frame ServerHello announces; set before the client connects. */
  volatile int maxFrame = 1 << 20;
  private final ServerSocketChannel server;
  private final long features;
  private final long maxInline;
  private final int numPartitions;

  /** Serves on {@code dir}/fake.sock, announcing {@code features} and {@code maxInline}. */
  FakeDaemon(Path dir, long features, long maxInline, int numPartitions) throws IOException {
    this.socket = dir.resolve("fake.sock");
    this.features = features;
    this.maxInline = maxInline;
    this.numPartitions = numPartitions;
    Files.deleteIfExists(socket);
    server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
    server.bind(UnixDomainSocketAddress.of(socket));
    Thread t = new Thread(this::serve, "fake-daemon");
    t.setDaemon(true);
    t.start();
  }

  private void serve() {
    try (SocketChannel ch = server.accept()) {
      while (true) {
        ByteBuffer h = read(ch, 16);
        int type = Short.toUnsignedInt(h.getShort(2));
        int id = h.getInt(8);
        ByteBuffer p = read(ch, h.getInt(12));
        types.add(type);
        if (type == REGISTER) {
          byte[] raw = new byte[p.remaining()];
          p.duplicate().get(raw);
          registers.add(raw);
        } else if (type == OPEN) {
          openFlags.add(Byte.toUnsignedInt(p.get(18)));
        }
        ByteBuffer answer =
            ByteBuffer.allocate(256 + 8 * numPartitions).order(ByteOrder.LITTLE_ENDIAN);
        int answerType = type | RESPONSE;
        Integer error = type == OPEN ? openErrors.poll() : null;
        if (error != null) {
          byte[] msg = ("scripted error " + error).getBytes(StandardCharsets.UTF_8);
          answer.putInt(error).putShort((short) msg.length).put(msg);
          answerType = ERROR;
          type = -1; // no success answer below
        }
        switch (type) {
          case -1 -> {}
          case HELLO -> {
            byte[] name = "fake".getBytes(StandardCharsets.UTF_8);
            answer.putShort((short) 1).putShort((short) 0).putInt(maxFrame).putInt((int) maxInline)
                .putLong(features).putShort((short) name.length).put(name);
          }
          case REGISTER -> {
            byte[] dir = "/var/lib/shuffled/app/exec".getBytes(StandardCharsets.UTF_8);
            answer.putInt(1).putShort((short) dir.length).put(dir);
            if (authTail(p.duplicate().order(ByteOrder.LITTLE_ENDIAN))) {
              byte[] host = serveHost.getBytes(StandardCharsets.UTF_8);
              answer.putShort((short) host.length).put(host).putInt(servePort)
                  .put((byte) serveFlags);
            }
          }
          case OPEN -> answer.putLong(types.size());
          case BATCH -> batches.add(batch(p));
          case COMMIT -> {
            answer.put((byte) 0).put(new byte[3]).putInt(1).putInt(numPartitions);
            for (int i = 0; i < numPartitions; i++) {
              answer.putLong(0);
            }
            answer.putInt(0);
          }
          default -> {} // Abort and the rest: an empty answer
        }
        answer.flip();
        ByteBuffer f = ByteBuffer.allocate(16 + answer.remaining()).order(ByteOrder.LITTLE_ENDIAN);
        f.put((byte) 'S').put((byte) 'H').putShort((short) answerType).putShort((short) 0)
            .putShort((short) 0).putInt(id).putInt(answer.remaining()).put(answer).flip();
        while (f.hasRemaining()) {
          ch.write(f);
        }
      }
    } catch (IOException | RuntimeException e) {
      // the client hung up, close(), or a frame this fake does not read: the session is over
    }
  }

  /** Whether a RegisterExecutor payload carries the auth secret tail (after the io key's). */
  static boolean authTail(ByteBuffer p) {
    skipString(p); // app_id
    skipString(p); // executor_id
    p.getInt(); // sub_dirs
    int dirs = p.getInt();
    for (int i = 0; i < dirs; i++) {
      skipString(p);
    }
    if (!p.hasRemaining()) {
      return false;
    }
    skipString(p); // the io key's tail: u16 length and bytes
    return p.hasRemaining();
  }

  private static void skipString(ByteBuffer p) {
    int n = Short.toUnsignedInt(p.getShort());
    p.position(p.position() + n);
  }

  /** The auth secret a RegisterExecutor payload carries; null without the tail. */
  static byte[] authSecret(byte[] register) {
    ByteBuffer p = ByteBuffer.wrap(register).order(ByteOrder.LITTLE_ENDIAN);
    if (!authTail(p.duplicate().order(ByteOrder.LITTLE_ENDIAN))) {
      return null;
    }
    authTail(p); // moves p to the secret's length
    byte[] s = new byte[Short.toUnsignedInt(p.getShort())];
    p.get(s);
    return s;
  }

  /** Answers each of the next {@code times} Opens with Error {@code code}. */
  void failOpens(int code, int times) {
    for (int i = 0; i < times; i++) {
      openErrors.add(code);
    }
  }

  /** Waits up to 5 s for a request of {@code type}; whether one came. */
  boolean awaitRequest(int type) throws InterruptedException {
    long deadline = System.nanoTime() + 5_000_000_000L;
    while (!types.contains(type) && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    return types.contains(type);
  }

  /** An inline opaque Batch: handle, kind, plane, flags, reserved, offsets, payload. */
  private static Batch batch(ByteBuffer p) {
    p.position(8);
    int kind = Byte.toUnsignedInt(p.get());
    int plane = Byte.toUnsignedInt(p.get());
    if (kind != 1 || plane != 1) {
      throw new IllegalStateException("Batch kind " + kind + " plane " + plane + ", want 1 and 1");
    }
    int flags = Byte.toUnsignedInt(p.get());
    p.get(); // reserved
    long[] off = new long[p.getInt()];
    for (int i = 0; i < off.length; i++) {
      off[i] = p.getLong();
    }
    byte[] payload = new byte[p.getInt()];
    p.get(payload);
    return new Batch(flags, off, payload);
  }

  private static ByteBuffer read(SocketChannel ch, int n) throws IOException {
    ByteBuffer b = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    while (b.hasRemaining()) {
      if (ch.read(b) < 0) {
        throw new IOException("eof");
      }
    }
    return b.flip();
  }

  @Override
  public void close() throws IOException {
    server.close();
  }
}
