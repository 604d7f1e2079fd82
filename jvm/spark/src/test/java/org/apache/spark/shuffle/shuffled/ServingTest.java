package org.apache.spark.shuffle.shuffled;

import static org.junit.jupiter.api.Assertions.*;

import dev.shuffled.client.DataPlane;
import dev.shuffled.client.Serving;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Serving (spark.shuffled.serving.enabled): the settings, the link, the location, removal. */
class ServingTest {
  @TempDir Path dir;

  private static DaemonLink link(FakeDaemon d, boolean serving) {
    return new DaemonLink(
        new DaemonLink.Settings(
            d.socket, false, Duration.ofSeconds(5), DataPlane.INLINE, false, serving));
  }

  private static DaemonLink.Executor who(byte[] secret) {
    return new DaemonLink.Executor("app", "7", List.of(), 0, null, secret);
  }

  @Test
  void servingDaemonGetsTheSecretAndNamesItsAddress() throws Exception {
    byte[] secret = "app-secret".getBytes(StandardCharsets.UTF_8);
    try (FakeDaemon d = new FakeDaemon(dir, FakeDaemon.FEATURE_SERVING, 1 << 19, 2);
        DaemonLink l = link(d, true)) {
      d.serveHost = "10.1.2.3";
      d.servePort = 7337;
      assertNotNull(l.forWriting(() -> who(secret)));
      assertArrayEquals(secret, FakeDaemon.authSecret(d.registers.get(0)));
      assertEquals(new Serving("10.1.2.3", 7337, false), l.serving());
    }
  }

  @Test
  void servingOffPublishesTheExecutorWhateverTheDaemonSays() throws Exception {
    try (FakeDaemon d = new FakeDaemon(dir, FakeDaemon.FEATURE_SERVING, 1 << 19, 2);
        DaemonLink l = link(d, false)) {
      d.serveHost = "10.1.2.3";
      d.servePort = 7337;
      assertNotNull(l.forWriting(() -> who(null)));
      // The client always sends the tails to a serving daemon: an empty secret here.
      assertArrayEquals(new byte[0], FakeDaemon.authSecret(d.registers.get(0)));
      assertNull(l.serving());
    }
  }

  @Test
  void daemonThatDoesNotServeLeavesTheExecutorsLocation() throws Exception {
    // Bit 7 with the block server off, and a daemon without bit 7.
    for (long features : new long[] {FakeDaemon.FEATURE_SERVING, 0}) {
      try (FakeDaemon d = new FakeDaemon(dir, features, 1 << 19, 2);
          DaemonLink l = link(d, true)) {
        assertNotNull(l.forWriting(() -> who("s".getBytes(StandardCharsets.UTF_8))));
        assertNull(l.serving());
        if (features == 0) {
          assertNull(FakeDaemon.authSecret(d.registers.get(0)), "a secret to a non-serving daemon");
        }
      }
    }
  }

  @Test
  void requireAuthWithoutASecretLeavesTheExecutorsLocation() throws Exception {
    try (FakeDaemon d = new FakeDaemon(dir, FakeDaemon.FEATURE_SERVING, 1 << 19, 2);
        DaemonLink l = link(d, true)) {
      d.serveHost = "h";
      d.servePort = 1;
      d.serveFlags = 1;
      assertNotNull(l.forWriting(() -> who(null)));
      assertNull(l.serving(), "the daemon would refuse every unauthenticated fetch");
    }
  }

  @Test
  void tooLongSecretIsNotSent() throws Exception {
    try (FakeDaemon d = new FakeDaemon(dir, FakeDaemon.FEATURE_SERVING, 1 << 19, 2);
        DaemonLink l = link(d, true)) {
      d.serveHost = "h";
      d.servePort = 1;
      assertNotNull(l.forWriting(() -> who(new byte[DaemonLink.MAX_AUTH_SECRET + 1])));
      assertArrayEquals(new byte[0], FakeDaemon.authSecret(d.registers.get(0)));
      assertNull(l.serving());
    }
  }

  // SparkConf and BlockManagerId need Hadoop's classes, which the unit tests do not have: the
  // settings, the location and the driver components are checked by the Spark suite.
  @Test
  void tlsRulesServingOut() {
    assertNull(ShuffledConf.servingOff("false"));
    String why = ShuffledConf.servingOff("TRUE");
    assertTrue(why.contains("spark.ssl.rpc.enabled=true"), why);
  }

  @Test
  void removeMessageByteForByte() throws IOException {
    ByteBuffer b = DaemonRemoval.encode("app-1", 3);
    byte[] want = {100, 0, 0, 0, 5, 'a', 'p', 'p', '-', '1', 0, 0, 0, 3};
    byte[] got = new byte[b.remaining()];
    b.get(got);
    assertArrayEquals(want, got);
    ByteBuffer all = DaemonRemoval.encode("a", DaemonRemoval.WHOLE_APPLICATION);
    assertEquals(-1, all.getInt(all.limit() - 4));
    assertThrows(IllegalArgumentException.class, () -> DaemonRemoval.encode("a", -2));

    ByteBuffer reply = ByteBuffer.allocate(16).putLong(4).putLong(1 << 20).flip();
    assertArrayEquals(new long[] {4, 1 << 20}, DaemonRemoval.decode(reply, "d:1"));
    IOException e =
        assertThrows(IOException.class, () -> DaemonRemoval.decode(ByteBuffer.allocate(15), "d:1"));
    assertTrue(e.getMessage().contains("15 bytes, want 16"), e.getMessage());
    ByteBuffer negative = ByteBuffer.allocate(16).putLong(-1).putLong(0).flip();
    assertThrows(IOException.class, () -> DaemonRemoval.decode(negative, "d:1"));
  }
}
