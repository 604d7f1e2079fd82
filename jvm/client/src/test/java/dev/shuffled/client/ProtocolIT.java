package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Every message type against the real daemon, and its error answers. */
class ProtocolIT {
  private Daemon daemon;

  @BeforeEach
  void start() throws Exception {
    daemon = Daemon.start();
  }

  @AfterEach
  void stop() throws Exception {
    daemon.close();
  }

  private static long[] offsets(int... sizes) {
    long[] o = new long[sizes.length + 1];
    for (int i = 0; i < sizes.length; i++) {
      o[i + 1] = o[i] + sizes[i];
    }
    return o;
  }

  @Test
  void handshakePingStats() throws Exception {
    try (ShuffledClient c = daemon.connect(ClientOptions.DEFAULTS.withClientName("test-client/1"))) {
      ServerInfo si = c.serverInfo();
      assertEquals(1, si.version());
      assertTrue(si.maxFrame() >= 65536 && si.maxInline() <= si.maxFrame(), si.toString());
      assertTrue(si.has(ServerInfo.FEATURE_LIFECYCLE), si.toString());
      assertTrue(si.server().startsWith("shuffled"), si.server());
      c.ping();
      Map<String, Long> stats = c.stats();
      assertEquals(1L, Daemon.awaitStat(c, "connections", 1), stats.toString());
      assertEquals(0L, stats.get("open_map_outputs"), stats.toString());
    }
  }

  @Test
  void dataPlaneFollowsTheJdk() throws Exception {
    boolean built = Boolean.getBoolean("shuffled.memfd.built");
    boolean expect = built && Runtime.version().feature() >= 22;
    try (ShuffledClient c = daemon.connect()) {
      assertEquals(expect, c.memfdAvailable(), "memfd on JDK " + Runtime.version() + ", built " + built);
      c.register("app", "e");
      try (MapOutput m = c.openMapOutput(0, 0, 1, OpenOptions.DEFAULTS)) {
        assertEquals(expect ? DataPlane.MEMFD : DataPlane.INLINE, m.plane());
      }
      try (MapOutput m =
          c.openMapOutput(0, 1, 1, OpenOptions.DEFAULTS.withCodec(Codec.NONE).withPlane(DataPlane.INLINE))) {
        assertEquals(DataPlane.INLINE, m.plane());
        m.writeOpaque(new byte[] {1, 2}, offsets(2));
        assertArrayEquals(new long[] {2}, m.commit().lengths());
      }
    }
  }

  @Test
  void registerOpenBatchCommitAbortAndLifecycle() throws Exception {
    try (ShuffledClient c = daemon.connect()) {
      assertThrows(IllegalStateException.class, () -> c.openMapOutput(1, 1, 1, OpenOptions.DEFAULTS));
      List<String> dirs = c.register("app-l", "exec-1");
      assertEquals(List.of(daemon.outputDir("app-l", "exec-1").toString()), dirs);
      assertThrows(IllegalStateException.class, () -> c.register("app-l", "exec-2"));

      CommitResult first;
      try (MapOutput m = c.openMapOutput(1, 5, 3, OpenOptions.of(Codec.NONE, ChecksumAlgorithm.CRC32))) {
        m.writeOpaque("hello world".getBytes(), offsets(5, 0, 6));
        first = m.commit();
        assertArrayEquals(new long[] {5, 0, 6}, first.lengths());
        assertEquals(3, first.checksums().length);
        assertFalse(first.existing());
        assertThrows(IllegalStateException.class, () -> m.writeOpaque(new byte[1], offsets(1, 0, 0)));
        assertThrows(IllegalStateException.class, m::abort);
      }
      // A second attempt of the same map: the first one's result wins.
      try (MapOutput m = c.openMapOutput(1, 5, 3, OpenOptions.of(Codec.NONE, ChecksumAlgorithm.CRC32))) {
        m.writeOpaque("other".getBytes(), offsets(1, 1, 3));
        CommitResult again = m.commit();
        assertTrue(again.existing());
        assertArrayEquals(first.lengths(), again.lengths());
        assertArrayEquals(first.checksums(), again.checksums());
      }
      // Abort: nothing is committed; aborting twice is fine.
      MapOutput aborted = c.openMapOutput(2, 0, 1, OpenOptions.DEFAULTS);
      aborted.writeOpaque(new byte[100], offsets(100));
      assertEquals(1L, c.stats().get("open_map_outputs"));
      aborted.abort();
      aborted.abort();
      assertTrue(aborted.isFinished());
      assertEquals(0L, c.stats().get("open_map_outputs"));
      assertFalse(Files.exists(daemon.outputDir("app-l", "exec-1").resolve("shuffle_2_0_0.index")));
      // close() aborts what was not committed.
      MapOutput closed = c.openMapOutput(2, 1, 1, OpenOptions.DEFAULTS);
      closed.close();
      assertTrue(closed.isFinished());
      assertEquals(0L, c.stats().get("open_map_outputs"));

      try (MapOutput m = c.openMapOutput(3, 0, 1, OpenOptions.DEFAULTS)) {
        m.writeOpaque(new byte[10], offsets(10));
        m.commit();
      }
      List<ShuffleInfo> list = c.listShuffles("app-l");
      assertEquals(List.of(1, 3), list.stream().map(ShuffleInfo::shuffleId).toList());
      assertEquals(1, list.get(0).mapOutputs());
      assertTrue(list.get(0).bytes() >= 11, list.toString());
      // The admin listing (shuffled apps): this connection's application, its two shuffles.
      ApplicationInfo app =
          c.listApplications().stream()
              .filter(a -> a.appId().equals("app-l"))
              .findFirst()
              .orElseThrow(() -> new AssertionError("app-l not listed"));
      assertEquals(2, app.shuffles(), app.toString());
      assertEquals(
          list.stream().mapToLong(ShuffleInfo::mapOutputs).sum(), app.mapOutputs(), app.toString());
      assertEquals(1, app.connections(), app.toString());
      assertTrue(app.ownerUid() >= 0, app.toString());

      Removed r = c.removeShuffle("app-l", 1);
      assertEquals(1, r.mapOutputs());
      assertTrue(r.bytes() >= 11, r.toString());
      assertEquals(new Removed(0, 0), c.removeShuffle("app-l", 1), "removing again frees nothing");
      assertFalse(Files.exists(daemon.outputDir("app-l", "exec-1").resolve("shuffle_1_5_0.data")));

      Removed all = c.removeApplication("app-l");
      assertEquals(1, all.mapOutputs());
      assertEquals(List.of(), c.listShuffles("app-l"));
      assertEquals(List.of(), c.listShuffles("app-unknown"));
    }
  }

  @Test
  void daemonErrorNamesCodeAndMessage() throws Exception {
    try (ShuffledClient c = daemon.connect()) {
      String outside = daemon.dir.resolve("not-allowed").toString();
      Files.createDirectories(daemon.dir.resolve("not-allowed"));
      ShuffledException e =
          assertThrows(
              ShuffledException.class, () -> c.register("app-e", "exec", List.of(outside), 64));
      assertEquals(ErrorCode.PERMISSION_DENIED, e.code());
      assertEquals(5, e.rawCode());
      assertTrue(e.daemonMessage().contains("not-allowed"), e.daemonMessage());
      assertTrue(e.getMessage().contains("PermissionDenied") && e.getMessage().contains("not-allowed"), e.getMessage());
      assertTrue(e.getMessage().startsWith("register executor app-e/exec"), e.getMessage());

      // The connection stays usable, and the failed registration does not count.
      c.ping();
      c.register("app-e", "exec");
      // A map output committed twice: the daemon forgot the handle.
      MapOutput m = c.openMapOutput(0, 0, 1, OpenOptions.DEFAULTS);
      m.writeOpaque(new byte[1], offsets(1));
      m.commit();
      assertThrows(IllegalStateException.class, m::commit);
    }
  }

  @Test
  void clientRefusesBadArguments() throws Exception {
    try (ShuffledClient c = daemon.connect()) {
      assertThrows(IllegalArgumentException.class, () -> c.register("a/b", "e"));
      assertThrows(IllegalArgumentException.class, () -> c.register("..", "e"));
      assertThrows(IllegalArgumentException.class, () -> c.register("a", "e\u0001"));
      assertThrows(IllegalArgumentException.class, () -> c.register("a", "e", List.of("relative"), 4));
      assertThrows(IllegalArgumentException.class, () -> c.register("a", "e", List.of("/x/../y"), 4));
      assertThrows(IllegalArgumentException.class, () -> c.register("a", "e", List.of("/x"), 0));
      assertThrows(IllegalArgumentException.class, () -> c.register("a", "e", List.of(), 3));
      c.register("a", "e");
      assertThrows(IllegalArgumentException.class, () -> c.openMapOutput(-1, 0, 1, OpenOptions.DEFAULTS));
      assertThrows(IllegalArgumentException.class, () -> c.openMapOutput(0, -1, 1, OpenOptions.DEFAULTS));
      assertThrows(IllegalArgumentException.class, () -> c.openMapOutput(0, 0, 0, OpenOptions.DEFAULTS));
      try (MapOutput m = c.openMapOutput(0, 0, 2, OpenOptions.DEFAULTS.withCodec(Codec.NONE))) {
        IllegalArgumentException e =
            assertThrows(IllegalArgumentException.class, () -> m.writeOpaque(new byte[3], new long[] {0, 3}));
        assertTrue(e.getMessage().contains("want numPartitions+1 = 3"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> m.writeOpaque(new byte[3], new long[] {0, 2, 1}));
        assertTrue(e.getMessage().contains("[2] = 1 below [1] = 2"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> m.writeOpaque(new byte[3], new long[] {0, 1, 2}));
        assertTrue(e.getMessage().contains("want the payload length 3"), e.getMessage());
        // Nothing was sent: the map output is intact.
        m.writeOpaque(new byte[3], new long[] {0, 1, 3});
        assertArrayEquals(new long[] {1, 2}, m.commit().lengths());
      }
    }
  }
}
