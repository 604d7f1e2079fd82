package dev.shuffled.client;

import java.io.IOException;
import java.nio.ByteBuffer;

/** One connected Unix stream socket. Reads come from one thread, writes from one at a time. */
interface Transport {
  /** Reads at least one byte into {@code dst}; -1 at end of stream. */
  int read(ByteBuffer dst) throws IOException;

  /** Writes all remaining bytes of {@code srcs}, in order. */
  void write(ByteBuffer[] srcs) throws IOException;

  /** Whether {@link #writeWithFd} works on this transport. */
  boolean canPassFd();

  /**
   * Writes all remaining bytes of {@code srcs}, passing {@code fd} with the first byte as one
   * SCM_RIGHTS message (docs/protocol.md section 5).
   */
  void writeWithFd(ByteBuffer[] srcs, int fd) throws IOException;

  /** Wakes a blocked read or write with an error or end of stream; later calls fail. */
  void shutdown();

  /** Releases the socket; called once nobody is inside a read or write. */
  void close();
}
