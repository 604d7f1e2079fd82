package dev.shuffled.client;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;

/**
 * What the JDK offers. This is the JDK 17 version: a {@link java.nio.channels.SocketChannel}-based transport and no
 * memfd plane. The multi-release jar replaces it on JDK 22+ (src/main/java22) with one that calls
 * memfd_create, fcntl and sendmsg through the FFM API.
 */
final class Platform {
  private Platform() {}

  /** Why the memfd plane is unavailable, or null when it is available. */
  static String memfdUnavailableReason() {
    int feature = Runtime.version().feature();
    if (feature >= 22) {
      return "the JDK 22+ classes of the multi-release jar are not in use (a jar built by a JDK 17"
          + " Maven, or the client's classes run from a directory)";
    }
    return "JDK " + feature + " has no FFM API (memfd needs JDK 22+)";
  }

  /**
   * Connects within {@code timeout} ({@link java.net.SocketTimeoutException} after it); {@code
   * wantFd} asks for a transport that can pass descriptors.
   */
  static Transport connect(Path socket, boolean wantFd, Duration timeout) throws IOException {
    return ChannelTransport.connect(socket, timeout);
  }

  /**
   * A sealed memfd holding {@code data}'s remaining bytes (position unchanged); the caller closes
   * it with {@link #closeFd}.
   */
  static int sealedMemfd(ByteBuffer data) throws IOException {
    throw new IOException(memfdUnavailableReason());
  }

  static void closeFd(int fd) {}
}
