package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Feature bit 7 (serving): RegisterExecutor's auth secret tail and Registered's serving tail, byte
 * for byte, and what the client sends to and takes from a daemon with and without the bit.
 */
class ServingTest {
  @TempDir Path dir;

  private static byte[] payload(Wire.Msg m) {
    byte[] f = Wire.frame(1, m, 0);
    return Arrays.copyOfRange(f, Wire.HEADER_SIZE, f.length);
  }

  private static final byte[] HEAD = {
    // app_id "a", executor_id "e", sub_dirs 0, local_dirs []
    1, 0, 'a', 1, 0, 'e', 0, 0, 0, 0, 0, 0, 0, 0
  };

  private static byte[] concat(byte[]... parts) {
    int n = 0;
    for (byte[] p : parts) {
      n += p.length;
    }
    byte[] out = new byte[n];
    int o = 0;
    for (byte[] p : parts) {
      System.arraycopy(p, 0, out, o, p.length);
      o += p.length;
    }
    return out;
  }

  @Test
  void registerTailsByteForByte() throws Exception {
    byte[] key = new byte[16];
    Arrays.fill(key, (byte) 7);
    byte[] secret = {'s', 'e', 'c'};
    // Both tails: the key's, then the secret's.
    Wire.Register both = new Wire.Register("a", "e", 0, List.of(), key, secret);
    byte[] want = concat(HEAD, new byte[] {16, 0}, key, new byte[] {3, 0}, secret);
    assertArrayEquals(want, payload(both));
    assertEquals(both, Wire.decode(Wire.REGISTER, ByteBuffer.wrap(want)));
    // No key, a secret: key_length 0, then the secret.
    Wire.Register noKey = new Wire.Register("a", "e", 0, List.of(), null, secret);
    want = concat(HEAD, new byte[] {0, 0, 3, 0}, secret);
    assertArrayEquals(want, payload(noKey));
    assertEquals(noKey, Wire.decode(Wire.REGISTER, ByteBuffer.wrap(want)));
    // Neither (to a serving daemon): both lengths 0.
    Wire.Register none = new Wire.Register("a", "e", 0, List.of(), null, new byte[0]);
    want = concat(HEAD, new byte[] {0, 0, 0, 0});
    assertArrayEquals(want, payload(none));
    Wire.Register back = (Wire.Register) Wire.decode(Wire.REGISTER, ByteBuffer.wrap(want));
    assertNull(back.ioEncryptionKey());
    assertArrayEquals(new byte[0], back.authSecret());
    // No auth tail: what the client sent before bit 7, unchanged.
    assertArrayEquals(HEAD, payload(new Wire.Register("a", "e", 0, List.of(), null, null)));
    assertArrayEquals(
        concat(HEAD, new byte[] {16, 0}, key),
        payload(new Wire.Register("a", "e", 0, List.of(), key, null)));
    String text = both.toString();
    assertFalse(text.contains("sec"), text);
    assertTrue(text.contains("authSecret=[redacted]"), text);
  }

  @Test
  void registerTailsRefusedWhenMalformed() {
    // key_length 0 with nothing after it: "no key" needs the auth tail.
    ProtocolException e =
        assertThrows(
            ProtocolException.class,
            () -> Wire.decode(Wire.REGISTER, ByteBuffer.wrap(concat(HEAD, new byte[] {0, 0}))));
    assertTrue(e.getMessage().contains("IOEncryptionKey"), e.getMessage());
    // A secret of 1025 bytes.
    byte[] big = concat(HEAD, new byte[] {0, 0, 0x01, 0x04}, new byte[1025]);
    e = assertThrows(
        ProtocolException.class, () -> Wire.decode(Wire.REGISTER, ByteBuffer.wrap(big)));
    assertTrue(e.getMessage().contains("AuthSecret") && e.getMessage().contains("1025"),
        e.getMessage());
    // 1024 bytes is the most.
    byte[] most = concat(HEAD, new byte[] {0, 0, 0x00, 0x04}, new byte[1024]);
    assertDoesNotThrow(() -> Wire.decode(Wire.REGISTER, ByteBuffer.wrap(most)));
    // A secret shorter than its length, and trailing bytes after it.
    byte[] cut = concat(HEAD, new byte[] {0, 0, 5, 0, 1, 2});
    assertThrows(ProtocolException.class, () -> Wire.decode(Wire.REGISTER, ByteBuffer.wrap(cut)));
    byte[] trailing = concat(HEAD, new byte[] {0, 0, 1, 0, 9, 9});
    assertThrows(
        ProtocolException.class, () -> Wire.decode(Wire.REGISTER, ByteBuffer.wrap(trailing)));
  }

  @Test
  void registeredServingTailByteForByte() throws Exception {
    Wire.Registered r =
        new Wire.Registered(List.of("/r"), new Wire.Serve("10.0.0.7", 7337, Wire.SERVE_REQUIRE_AUTH));
    byte[] want = {
      1, 0, 0, 0, 2, 0, '/', 'r', // dirs ["/r"]
      8, 0, '1', '0', '.', '0', '.', '0', '.', '7', // serve_host
      (byte) 0xa9, 0x1c, 0, 0, // serve_port 7337
      1 // serve_flags: require_auth
    };
    assertArrayEquals(want, payload(r));
    assertEquals(r, Wire.decode(Wire.REGISTER | Wire.RESPONSE, ByteBuffer.wrap(want)));
    // Not serving: "" and 0.
    byte[] off = {1, 0, 0, 0, 2, 0, '/', 'r', 0, 0, 0, 0, 0, 0, 0};
    assertEquals(
        new Wire.Registered(List.of("/r"), new Wire.Serve("", 0, 0)),
        Wire.decode(Wire.REGISTER | Wire.RESPONSE, ByteBuffer.wrap(off)));
    // A port without a host, a host without a port, a port over 65535: refused, naming the field.
    for (byte[] bad :
        List.of(
            new byte[] {1, 0, 0, 0, 2, 0, '/', 'r', 0, 0, 1, 0, 0, 0, 0},
            new byte[] {1, 0, 0, 0, 2, 0, '/', 'r', 1, 0, 'h', 0, 0, 0, 0, 0},
            new byte[] {1, 0, 0, 0, 2, 0, '/', 'r', 1, 0, 'h', 0, 0, 1, 0, 0})) {
      ProtocolException e =
          assertThrows(
              ProtocolException.class,
              () -> Wire.decode(Wire.REGISTER | Wire.RESPONSE, ByteBuffer.wrap(bad)));
      assertTrue(e.getMessage().contains("ServePort"), e.getMessage());
    }
  }

  // ---- against a fake daemon ------------------------------------------------------------

  /**
   * A daemon announcing {@code features} that answers RegisterExecutor with {@code registered}
   * and records the requests it reads.
   */
  private Path daemon(long features, Wire.Registered registered, List<Wire.Msg> got)
      throws IOException {
    return FakeDaemon.serve(
        dir.resolve("fake.sock"),
        ch -> {
          while (true) {
            FakeDaemon.Req r = FakeDaemon.readReq(ch);
            got.add(r.m());
            FakeDaemon.send(
                ch,
                r.id(),
                r.m() instanceof Wire.Hello
                    ? new Wire.ServerHello(1, 1 << 20, 1 << 19, features, "fake")
                    : registered);
          }
        });
  }

  private static final long SERVES =
      ServerInfo.FEATURE_LIFECYCLE | ServerInfo.FEATURE_IO_ENCRYPTION | ServerInfo.FEATURE_SERVING;

  @Test
  void servingDaemonGetsBothTailsAndNamesItsAddress() throws Exception {
    List<Wire.Msg> got = new CopyOnWriteArrayList<>();
    Path sock =
        daemon(SERVES, new Wire.Registered(List.of("/d"), new Wire.Serve("node-1", 7337, 1)), got);
    byte[] secret = "the-app-secret".getBytes();
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      assertTrue(c.serverInfo().has(ServerInfo.FEATURE_SERVING));
      assertNull(c.serving(), "before register");
      assertEquals(List.of("/d"), c.register("app", "1", List.of(), 0, null, secret));
      assertEquals(new Serving("node-1", 7337, true), c.serving());
    }
    Wire.Register reg = (Wire.Register) got.get(1);
    assertArrayEquals(secret, reg.authSecret());
    assertNull(reg.ioEncryptionKey());
  }

  @Test
  void servingDaemonGetsAnEmptySecretWithoutOne() throws Exception {
    List<Wire.Msg> got = new CopyOnWriteArrayList<>();
    Path sock = daemon(SERVES, new Wire.Registered(List.of("/d"), new Wire.Serve("", 0, 0)), got);
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      c.register("app", "1");
      assertNull(c.serving(), "serve_host \"\": the daemon's block server is off");
    }
    assertArrayEquals(new byte[0], ((Wire.Register) got.get(1)).authSecret());
  }

  @Test
  void daemonWithoutTheBitGetsNoSecret() throws Exception {
    List<Wire.Msg> got = new CopyOnWriteArrayList<>();
    Path sock = daemon(ServerInfo.FEATURE_LIFECYCLE, new Wire.Registered(List.of("/d")), got);
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      c.register("app", "1", List.of(), 0, null, "secret".getBytes());
      assertNull(c.serving());
    }
    assertNull(((Wire.Register) got.get(1)).authSecret(), "no auth tail to a daemon without bit 7");
  }

  @Test
  void servingDaemonThatOmitsTheTailIsAProtocolError() throws Exception {
    Path sock = daemon(SERVES, new Wire.Registered(List.of("/d")), new CopyOnWriteArrayList<>());
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      ProtocolException e = assertThrows(ProtocolException.class, () -> c.register("app", "1"));
      assertTrue(e.getMessage().contains("serving tail"), e.getMessage());
    }
  }

  @Test
  void tailFromADaemonWithoutTheBitIsAProtocolError() throws Exception {
    Path sock =
        daemon(
            ServerInfo.FEATURE_LIFECYCLE,
            new Wire.Registered(List.of("/d"), new Wire.Serve("h", 1, 0)),
            new CopyOnWriteArrayList<>());
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      assertThrows(ProtocolException.class, () -> c.register("app", "1"));
    }
  }

  @Test
  void secretLengthIsCheckedBeforeSending() throws Exception {
    List<Wire.Msg> got = new CopyOnWriteArrayList<>();
    Path sock = daemon(SERVES, new Wire.Registered(List.of("/d"), new Wire.Serve("", 0, 0)), got);
    try (ShuffledClient c = ShuffledClient.connect(sock)) {
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () -> c.register("app", "1", List.of(), 0, null, new byte[1025]));
      assertTrue(e.getMessage().contains("authSecret: 1025 bytes"), e.getMessage());
      assertThrows(
          IllegalArgumentException.class,
          () -> c.register("app", "1", List.of(), 0, null, new byte[0]));
    }
    assertEquals(1, got.size(), "only Hello reached the daemon: " + got);
  }
}
