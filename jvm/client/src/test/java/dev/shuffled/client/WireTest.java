package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The decoder and the client-side checks on hostile and edge-case input. */
class WireTest {
  /**
   * Every golden payload, cut short and with random bytes changed: the decoder answers a message
   * or a ProtocolException, never another exception.
   */
  @Test
  void mangledPayloadsFailCleanly() throws Exception {
    Map<String, byte[]> frames = GoldenTest.parse(GoldenTest.goldenFile());
    Random r = new Random(11);
    int refused = 0;
    for (byte[] f : frames.values()) {
      Wire.Header h = Wire.readHeader(ByteBuffer.wrap(f), 1 << 20);
      byte[] p = java.util.Arrays.copyOfRange(f, Wire.HEADER_SIZE, f.length);
      for (int cut = 0; cut < p.length; cut++) {
        try {
          Wire.decode(h.type(), ByteBuffer.wrap(p, 0, cut));
        } catch (ProtocolException e) {
          refused++;
        }
      }
      for (int i = 0; i < 300 && p.length > 0; i++) {
        byte[] q = p.clone();
        for (int k = 0; k < 1 + r.nextInt(3); k++) {
          q[r.nextInt(q.length)] = (byte) r.nextInt(256);
        }
        try {
          Wire.decode(h.type(), ByteBuffer.wrap(q));
        } catch (ProtocolException e) {
          refused++;
        }
      }
    }
    assertTrue(refused > 1000, "the decoder refused " + refused + " mangled payloads");
  }

  @Test
  void countsAreCheckedBeforeAllocating() {
    // A CommitResult claiming 2^20 lengths (the most a map output has) in a 16-byte payload.
    byte[] p = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0};
    ProtocolException e =
        assertThrows(
            ProtocolException.class,
            () -> Wire.decode(Wire.COMMIT | Wire.RESPONSE, ByteBuffer.wrap(p)));
    assertTrue(e.getMessage().contains("do not fit"), e.getMessage());
    // Beyond the protocol's bound, the count itself is refused.
    byte[] q = {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0x10, 0, 0, 0, 0, 0};
    e = assertThrows(
        ProtocolException.class, () -> Wire.decode(Wire.COMMIT | Wire.RESPONSE, ByteBuffer.wrap(q)));
    assertTrue(e.getMessage().contains("1048577 entries exceed 1048576"), e.getMessage());
  }

  @Test
  void plainNames() {
    assertNull(Check.plainName("app-20260101-0001"));
    assertNull(Check.plainName("exec-\uD83D\uDE00")); // a supplementary character is fine
    assertNotNull(Check.plainName("bad\uD83D")); // a lone surrogate is not UTF-8
    assertNotNull(Check.plainName(""));
    assertNotNull(Check.plainName("."));
    assertNotNull(Check.plainName(".shuffled.lock"));
    assertNull(Check.plainName("a.b."));
    assertNotNull(Check.plainName("a/b"));
    assertNotNull(Check.plainName("a\u0085b"));
    assertNotNull(Check.plainName("x".repeat(256)));
    assertNull(Check.plainName("x".repeat(255)));
  }

  @Test
  void localDirs() {
    assertNull(Check.localDir("/data/1/blockmgr-abc"));
    assertNotNull(Check.localDir("data"));
    assertNotNull(Check.localDir("/data/./x"));
    assertNotNull(Check.localDir("/data/.."));
    assertNotNull(Check.localDir("/a\0b"));
    assertNotNull(Check.localDir("/" + "x".repeat(4095)));
  }

  @Test
  void batchFlagsOtherThanLastAreRefused() throws Exception {
    byte[] f = GoldenTest.parse(GoldenTest.goldenFile()).get("batch-last");
    byte[] p = java.util.Arrays.copyOfRange(f, Wire.HEADER_SIZE, f.length);
    assertEquals(Wire.BATCH_LAST, p[10], "the golden frame's flags byte");
    Wire.Batch b = (Wire.Batch) Wire.decode(Wire.BATCH, ByteBuffer.wrap(p));
    assertEquals(Wire.BATCH_LAST, b.flags());
    p[10] = 0x03;
    ProtocolException e =
        assertThrows(ProtocolException.class, () -> Wire.decode(Wire.BATCH, ByteBuffer.wrap(p)));
    assertTrue(e.getMessage().contains("Batch.Flags: 0x03"), e.getMessage());
    p[10] = 0x01;
    p[11] = 0x01;
    e = assertThrows(ProtocolException.class, () -> Wire.decode(Wire.BATCH, ByteBuffer.wrap(p)));
    assertTrue(e.getMessage().contains("reserved"), e.getMessage());
  }
}
