package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import org.junit.jupiter.api.Test;

class SmokeIT {
  @Test
  void roundTrip() throws Exception {
    try (Daemon d = Daemon.start();
        ShuffledClient c = d.connect()) {
      c.ping();
      c.register("app", "e1");
      try (MapOutput m = c.openMapOutput(3, 7, 2, OpenOptions.of(Codec.NONE, ChecksumAlgorithm.CRC32))) {
        assertEquals(c.memfdAvailable() ? DataPlane.MEMFD : DataPlane.INLINE, m.plane());
        m.writeOpaque("abc".getBytes(), new long[] {0, 2, 3});
        CommitResult r = m.commit();
        assertArrayEquals(new long[] {2, 1}, r.lengths());
        System.out.println(r + " " + m + " " + c.stats() + " memfd=" + c.memfdAvailable());
      }
    }
  }
}
