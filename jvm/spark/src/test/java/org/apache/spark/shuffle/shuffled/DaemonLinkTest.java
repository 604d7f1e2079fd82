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

  /** The key at the end of a RegisterExecutor payload, or null when it carries none. */
  private static byte[] registeredKey(byte[] payload) {
    java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(payload).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < 2; i++) { // app_id, executor_id
      int n = Short.toUnsignedInt(b.getShort());
      b.position(b.position() + n);
    }
    b.getInt(); // sub_dirs
    for (int dirs = b.getInt(); dirs > 0; dirs--) {
      int n = Short.toUnsignedInt(b.getShort());
      b.position(b.position() + n);
    }
    if (!b.hasRemaining()) {
      return null;
    }
    byte[] key = new byte[Short.toUnsignedInt(b.getShort())];
    b.get(key);
    assertFalse(b.hasRemaining(), "bytes after the key");
    return key;
  }

  @Test
  void encryptionRegistersTheKeyAndEncryptsEveryMapOutput() throws Exception {
    byte[] key = "0123456789abcdef0123456789abcdef".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    try (FakeDaemon d = new FakeDaemon(dir, FakeDaemon.FEATURE_IO_ENCRYPTION, 1 << 19, 2);
        DaemonLink link =
            new DaemonLink(new DaemonLink.Settings(d.socket, false, Duration.ofSeconds(5), DataPlane.INLINE, true))) {
      var c = link.forWriting(() -> new DaemonLink.Executor("app", "exec", List.of(), 0, key));
      assertNotNull(c);
      assertArrayEquals(key, registeredKey(d.registers.get(0)), "the key RegisterExecutor carried");
      try (var m = c.openMapOutput(1, 1, 2, dev.shuffled.client.OpenOptions.DEFAULTS)) {
        m.abort();
      }
      assertEquals(List.of(1), d.openFlags, "OpenMapOutput flags: ENCRYPT");
      assertFalse(new DaemonLink.Executor("app", "exec", List.of(), 0, key).toString().contains("0123"));
    }
    // Encryption off: no key, no flag, whatever the SecurityManager holds.
    try (FakeDaemon d = new FakeDaemon(dir, FakeDaemon.FEATURE_IO_ENCRYPTION, 1 << 19, 2);
        DaemonLink link =
            new DaemonLink(new DaemonLink.Settings(d.socket, false, Duration.ofSeconds(5), DataPlane.INLINE, false))) {
      var c = link.forWriting(() -> new DaemonLink.Executor("app", "exec", List.of(), 0, key));
      assertNull(registeredKey(d.registers.get(0)));
      try (var m = c.openMapOutput(1, 1, 2, dev.shuffled.client.OpenOptions.DEFAULTS)) {
        m.abort();
      }
      assertEquals(List.of(0), d.openFlags);
    }
  }

  @Test
  void encryptionFallsBackWithoutKeyOrFeature() throws Exception {
    byte[] key = new byte[16];
    // No key from Spark, or a daemon that does not announce io-encryption: Spark's writer.
    for (long features : new long[] {FakeDaemon.FEATURE_IO_ENCRYPTION, 0}) {
      try (FakeDaemon d = new FakeDaemon(dir, features, 1 << 19, 2);
          DaemonLink link =
              new DaemonLink(new DaemonLink.Settings(d.socket, true, Duration.ofSeconds(5), DataPlane.INLINE, true))) {
        byte[] k = features == 0 ? key : null;
        assertNull(link.forWriting(() -> new DaemonLink.Executor("app", "exec", List.of(), 0, k)));
        assertTrue(link.fellBack());
        assertTrue(d.registers.isEmpty(), "a key was sent to a daemon that cannot take it");
      }
    }
  }
}
