package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Device batches against a daemon built without CUDA, on the packaged multi-release jar and a
 * machine without a GPU driver: the driver binding's error names its library; a batch with device
 * bytes is refused before anything is sent and its map output lives on; a batch with none is sent
 * inline and commits.
 */
class DeviceBatchIT {
  private static final ColumnarSchema SCHEMA =
      ColumnarSchema.of(ColumnarSchema.Field.of("k", "bigint"), ColumnarSchema.Field.of("s", "string"));

  @RegisterExtension static final RunningDaemon RUNNING = new RunningDaemon("app-device", "exec-1");

  private static boolean ffm() {
    return Runtime.version().feature() >= 22 && Boolean.getBoolean("shuffled.memfd.built");
  }

  /**
   * Loading a library that is not there is a CudaException naming it (JDK 22+), or naming the JDK
   * (before 22); the driver itself loads and initializes, or fails the same way.
   */
  @Test
  void absentDriver() throws Exception {
    String lib = "libshuffled-no-such-driver.so.1";
    String why = CudaDriver.probe(lib);
    assertNotNull(why);
    assertTrue(why.contains(ffm() ? lib : "JDK"), why);
    try {
      CudaDriver.init();
      assertTrue(CudaDriver.deviceCount() >= 1, "a driver that initializes has a device");
    } catch (CudaException e) {
      assertTrue(e.getMessage().contains(CudaDriver.LIBRARY), e.getMessage());
      String want = !ffm() ? "JDK" : e.result() == -1 ? "cannot load it" : "cuInit";
      assertTrue(e.getMessage().contains(want), "want \"" + want + "\" in: " + e.getMessage());
    }
  }

  /** The CPU daemon offers no cuda-ipc: a batch with device bytes is refused, nothing sent. */
  @Test
  void cpuDaemonRefusesDeviceBytes() throws Exception {
    assertFalse(RUNNING.client().serverInfo().has(ServerInfo.FEATURE_CUDA_IPC));
    try (MapOutput out = RUNNING.client().openColumnarOutput(1, 1, 2, ColumnarFormat.SHFC, SCHEMA, OpenOptions.DEFAULTS)) {
      DeviceBatch b =
          DeviceBatch.of(
              SCHEMA,
              2,
              List.of(
                  DeviceBatch.Column.fixed(new DeviceBatch.Buffer(0x7f0000000000L, 16), null),
                  DeviceBatch.Column.varWidth(
                      new DeviceBatch.Buffer(0x7f0000000100L, 12), new DeviceBatch.Buffer(0x7f0000000200L, 3), null)),
              new long[] {0, 1, 2});
      UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class, () -> out.write(b));
      assertTrue(e.getMessage().contains("cuda-ipc"), e.getMessage());
      CommitResult r = out.commit(); // the map output lives on
      assertArrayEquals(new long[] {0, 0}, r.lengths());
    }
  }

  /** A batch of 0 rows needs neither device memory nor driver: it travels inline. */
  @Test
  void emptyBatchInline() throws Exception {
    try (MapOutput out = RUNNING.client().openColumnarOutput(2, 1, 3, ColumnarFormat.KUDO, SCHEMA, OpenOptions.DEFAULTS)) {
      out.write(DeviceBatch.of(SCHEMA, 0,
          List.of(new DeviceBatch.Column(null, null, null), new DeviceBatch.Column(null, null, null)),
          new long[] {0, 0, 0, 0}));
      CommitResult r = out.commit();
      assertEquals(3, r.lengths().length);
    }
  }

  /**
   * A nested batch of 0 rows travels inline too, its children after their parents: the daemon
   * takes it in SHFC and in kudo.
   */
  @Test
  void emptyNestedBatchInline() throws Exception {
    ColumnarSchema nested =
        ColumnarSchema.of(
            ColumnarSchema.Field.of("a", "array<int>"),
            ColumnarSchema.Field.of("m", "map<string,bigint>"),
            ColumnarSchema.Field.of("s", "struct<x:int,y:array<string>>"));
    int shuffle = 3;
    for (ColumnarFormat f : List.of(ColumnarFormat.SHFC, ColumnarFormat.KUDO)) {
      try (MapOutput out = RUNNING.client().openColumnarOutput(shuffle++, 1, 2, f, nested, OpenOptions.DEFAULTS)) {
        out.write(DeviceBatch.of(nested, 0,
            List.of(
                DeviceBatch.Column.list(null, DeviceBatch.Column.fixed(null, null), null),
                DeviceBatch.Column.list(null, DeviceBatch.Column.struct(null, List.of(
                    DeviceBatch.Column.varWidth(null, null, null), DeviceBatch.Column.fixed(null, null))), null),
                DeviceBatch.Column.struct(null, List.of(
                    DeviceBatch.Column.fixed(null, null),
                    DeviceBatch.Column.list(null, DeviceBatch.Column.varWidth(null, null, null), null)))),
            new long[] {0, 0, 0}));
        CommitResult r = out.commit();
        assertEquals(2, r.lengths().length, f.toString());
      }
    }
  }
}
