package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.*;

import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Path;
import java.util.List;
import dev.shuffled.client.DataPlane;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DaemonLinkTest {
  @TempDir Path dir;

  private static final DaemonLink.Executor WHO =
      new DaemonLink.Executor("app", "exec", List.of(), 0);

  @Test
  void interruptedFirstConnectIsNoVerdictOnTheDaemon() throws Exception {
    // A listener that never accepts: an attempt that is not interrupted times out.
    Path sock = dir.resolve("stalled.sock");
    try (ServerSocketChannel ss = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      ss.bind(UnixDomainSocketAddress.of(sock));
      DaemonLink.Settings conf =
          new DaemonLink.Settings(sock, true, Duration.ofMillis(300), DataPlane.INLINE);
      try (DaemonLink link = new DaemonLink(conf)) {
        Thread.currentThread().interrupt(); // the task is killed while it connects
        try {
          InterruptedIOException e =
              assertThrows(InterruptedIOException.class, () -> link.forWriting(() -> WHO));
          assertFalse(e instanceof SocketTimeoutException, e.toString());
        } finally {
          Thread.interrupted();
        }
        assertFalse(link.fellBack(), "one killed task decided the executor's fallback");

        // The next task's attempt is the verdict: the daemon does not answer, Spark's writer.
        assertNull(link.forWriting(() -> WHO));
        assertTrue(link.fellBack());
      }
    }
  }
}
