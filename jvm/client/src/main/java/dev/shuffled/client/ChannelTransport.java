package dev.shuffled.client;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** {@link Transport} on a {@link SocketChannel} with a {@link UnixDomainSocketAddress}. */
final class ChannelTransport implements Transport {
  private final SocketChannel ch;

  private ChannelTransport(SocketChannel ch) {
    this.ch = ch;
  }

  /**
   * Connects within {@code timeout}. connect(2) on a Unix socket blocks while the listener's
   * backlog is full (a daemon that stopped accepting), and a SocketChannel has no connect timeout:
   * a helper thread connects while this one waits; at the timeout, closing the channel ends the
   * helper's connect (AsynchronousCloseException) and this one throws {@link
   * SocketTimeoutException}.
   */
  static ChannelTransport connect(Path socket, Duration timeout) throws IOException {
    SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
    UnixDomainSocketAddress addr;
    try {
      addr = UnixDomainSocketAddress.of(socket);
    } catch (RuntimeException e) {
      ch.close();
      throw e;
    }
    CompletableFuture<Void> done = new CompletableFuture<>();
    Thread t =
        new Thread(
            () -> {
              try {
                ch.connect(addr);
                done.complete(null);
              } catch (Throwable e) {
                done.completeExceptionally(e);
              }
            },
            "shuffled-client-connect");
    t.setDaemon(true);
    t.start();
    try {
      done.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
      return new ChannelTransport(ch);
    } catch (TimeoutException te) {
      ch.close();
      throw new SocketTimeoutException(
          "connect to " + socket + ": not accepted within " + timeout
              + " (the daemon is not accepting connections: its listen backlog is full)");
    } catch (InterruptedException ie) {
      ch.close();
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("connect to " + socket + ": interrupted");
    } catch (ExecutionException ee) {
      ch.close();
      Throwable c = ee.getCause();
      if (c instanceof IOException io) {
        throw io;
      }
      if (c instanceof RuntimeException re) {
        throw re;
      }
      throw new IOException("connect to " + socket + ": " + c, c);
    }
  }

  @Override
  public int read(ByteBuffer dst) throws IOException {
    return ch.read(dst);
  }

  @Override
  public void write(ByteBuffer[] srcs) throws IOException {
    long left = 0;
    for (ByteBuffer b : srcs) {
      left += b.remaining();
    }
    while (left > 0) {
      left -= ch.write(srcs);
    }
  }

  @Override
  public boolean canPassFd() {
    return false;
  }

  @Override
  public void writeWithFd(ByteBuffer[] srcs, int fd) throws IOException {
    throw new UnsupportedOperationException("descriptor passing needs JDK 22+");
  }

  @Override
  public void shutdown() {
    try {
      ch.close(); // wakes blocked readers and writers (AsynchronousCloseException)
    } catch (IOException ignored) {
      // closing a socket channel does not fail in a way we could act on
    }
  }

  @Override
  public void close() {
    shutdown();
  }
}
