package dev.shuffled.client;

import static org.junit.jupiter.api.Assertions.*;

import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The IPC handle is asked once per allocation, and again for an allocation made anew. */
class IpcHandlesTest {
  /** A made-up driver: allocations by base, each with its buffer id; counts the handles asked. */
  private final Map<Long, Long> ids = new HashMap<>();
  private final Map<Long, Integer> asked = new HashMap<>();
  private final IpcHandles handles =
      new IpcHandles(
          base -> {
            Long id = ids.get(base);
            if (id == null) {
              throw new CudaException("no allocation at 0x" + Long.toHexString(base), 1);
            }
            return id;
          },
          base -> {
            asked.merge(base, 1, Integer::sum);
            byte[] h = new byte[64];
            h[0] = (byte) base;
            h[1] = (byte) ids.get(base).longValue();
            return h;
          });

  @Test
  void oncePerAllocation() throws Exception {
    ids.put(0x1000L, 1L);
    ids.put(0x2000L, 2L);
    byte[] a = handles.of(0x1000);
    for (int i = 0; i < 5; i++) {
      assertArrayEquals(a, handles.of(0x1000));
    }
    assertEquals(1, asked.get(0x1000L));
    byte[] b = handles.of(0x2000);
    assertEquals(0x00, b[0]);
    assertEquals(2, b[1]);
    assertEquals(1, asked.get(0x2000L));
    handles.of(0x1000)[1] = 9; // a copy: the next caller's is unchanged
    assertEquals(1, handles.of(0x1000)[1]);
  }

  /** Freed and allocated again at the same address: a new buffer id, a new handle. */
  @Test
  void reallocated() throws Exception {
    ids.put(0x1000L, 1L);
    assertEquals(1, handles.of(0x1000)[1]);
    ids.put(0x1000L, 7L);
    assertEquals(7, handles.of(0x1000)[1]);
    assertEquals(2, asked.get(0x1000L));
  }

  /** The most recently used are kept: the least recently used is asked again. */
  @Test
  void bounded() throws Exception {
    for (long i = 0; i <= IpcHandles.CAPACITY; i++) {
      ids.put(0x1000 * (i + 1), i + 1);
      handles.of(0x1000 * (i + 1));
    }
    handles.of(0x1000 * (IpcHandles.CAPACITY + 1)); // kept
    assertEquals(1, asked.get(0x1000L * (IpcHandles.CAPACITY + 1)));
    handles.of(0x1000); // the first, dropped when the CAPACITY+1st came
    assertEquals(2, asked.get(0x1000L));
  }

  /** A driver failure reaches the caller, and nothing is kept for it. */
  @Test
  void failure() {
    CudaException e = assertThrows(CudaException.class, () -> handles.of(0x5000));
    assertTrue(e.getMessage().contains("0x5000"), e.getMessage());
    assertTrue(asked.isEmpty());
  }
}
