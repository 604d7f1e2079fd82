package dev.shuffled.client;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;

/**
 * {@link Transport} on a Unix socket made and driven through the FFM API, so that it can pass
 * descriptors with sendmsg(2): JDK 22+ only. Heap bytes are staged through native buffers, as the
 * JDK's own socket channels do.
 */
final class NativeTransport implements Transport {
  private static final int STAGE = 256 << 10;

  private final int fd;
  private final Arena arena = Arena.ofShared();
  private final MemorySegment readBuf = arena.allocate(STAGE, 64);
  private final MemorySegment readState = arena.allocate(Native.errnoState());
  private final MemorySegment writeBuf = arena.allocate(STAGE, 64);
  private final MemorySegment writeState = arena.allocate(Native.errnoState());
  private volatile boolean down;

  private NativeTransport(int fd) {
    this.fd = fd;
  }

  /** Connects within {@code timeout} ({@link java.net.SocketTimeoutException} after it). */
  static NativeTransport connect(Path socket, Duration timeout) throws IOException {
    int fd = Native.socket();
    try {
      Native.connect(fd, socket.toString(), timeout);
    } catch (IOException | RuntimeException e) {
      Native.close(fd);
      throw e;
    }
    return new NativeTransport(fd);
  }

  @Override
  public int read(ByteBuffer dst) throws IOException {
    if (down) {
      throw new IOException("connection shut down");
    }
    int n = Math.min(dst.remaining(), STAGE);
    long r = Native.read(fd, readBuf, n, readState);
    if (r == 0) {
      return -1;
    }
    MemorySegment.copy(readBuf, 0, MemorySegment.ofBuffer(dst), 0, r);
    dst.position(dst.position() + (int) r);
    return (int) r;
  }

  @Override
  public void write(ByteBuffer[] srcs) throws IOException {
    for (ByteBuffer b : srcs) {
      writeAll(b);
    }
  }

  private void writeAll(ByteBuffer b) throws IOException {
    if (down) {
      throw new IOException("connection shut down");
    }
    MemorySegment src = MemorySegment.ofBuffer(b);
    long len = src.byteSize();
    long off = 0;
    if (b.isDirect()) {
      while (off < len) {
        off += Native.send(fd, src.asSlice(off), len - off, writeState);
      }
      return;
    }
    while (off < len) {
      long n = Math.min(STAGE, len - off);
      MemorySegment.copy(src, off, writeBuf, 0, n);
      long sent = 0;
      while (sent < n) {
        sent += Native.send(fd, writeBuf.asSlice(sent), n - sent, writeState);
      }
      off += n;
    }
  }

  @Override
  public boolean canPassFd() {
    return true;
  }

  @Override
  public void writeWithFd(ByteBuffer[] srcs, int passFd) throws IOException {
    if (down) {
      throw new IOException("connection shut down");
    }
    ByteBuffer first = srcs[0];
    try (Arena a = Arena.ofConfined()) {
      MemorySegment head = a.allocate(Math.max(1, first.remaining()), 8);
      MemorySegment.copy(MemorySegment.ofBuffer(first), 0, head, 0, first.remaining());
      long n = first.remaining();
      long sent = Native.sendWithFd(fd, head, n, passFd, a, writeState);
      while (sent < n) {
        sent += Native.send(fd, head.asSlice(sent), n - sent, writeState);
      }
    }
    for (int i = 1; i < srcs.length; i++) {
      writeAll(srcs[i]);
    }
  }

  @Override
  public void shutdown() {
    down = true;
    Native.shutdown(fd);
  }

  @Override
  public void close() {
    shutdown();
    Native.close(fd);
    arena.close();
  }
}
