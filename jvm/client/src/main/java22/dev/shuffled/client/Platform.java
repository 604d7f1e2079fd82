package dev.shuffled.client;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;

/**
 * What the JDK offers: the JDK 22+ version, from the multi-release jar. It calls memfd_create,
 * fcntl and sendmsg through the FFM API ({@link Native}); where that is not possible (another OS,
 * native access denied) it behaves as the JDK 17 version: inline payloads only.
 */
final class Platform {
  private Platform() {}

  private static final String UNAVAILABLE = Native.probe();

  /** Why the memfd plane is unavailable, or null when it is available. */
  static String memfdUnavailableReason() {
    return UNAVAILABLE;
  }

  /**
   * Connects within {@code timeout} ({@link java.net.SocketTimeoutException} after it); {@code
   * wantFd} asks for a transport that can pass descriptors.
   */
  static Transport connect(Path socket, boolean wantFd, Duration timeout) throws IOException {
    if (wantFd && UNAVAILABLE == null) {
      return NativeTransport.connect(socket, timeout);
    }
    return ChannelTransport.connect(socket, timeout);
  }

  /**
   * A sealed memfd holding {@code data}'s remaining bytes (position unchanged); the caller closes
   * it with {@link #closeFd}.
   */
  static int sealedMemfd(ByteBuffer data) throws IOException {
    if (UNAVAILABLE != null) {
      throw new IOException(UNAVAILABLE);
    }
    return Native.sealedMemfd(data);
  }

  static void closeFd(int fd) {
    if (fd >= 0) {
      Native.close(fd);
    }
  }
}
