package dev.shuffled.client;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;

/** {@link Transport} on a {@link SocketChannel} with a {@link UnixDomainSocketAddress}. */
final class ChannelTransport implements Transport {
  private final SocketChannel ch;

  private ChannelTransport(SocketChannel ch) {
    this.ch = ch;
  }

  static ChannelTransport connect(Path socket) throws IOException {
    SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
    try {
      ch.connect(UnixDomainSocketAddress.of(socket));
    } catch (IOException | RuntimeException e) {
      ch.close();
      throw e;
    }
    return new ChannelTransport(ch);
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
