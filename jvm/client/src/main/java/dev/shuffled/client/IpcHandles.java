package dev.shuffled.client;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The CUDA IPC handles of the device allocations that batches were written from, by allocation:
 * {@code cuIpcGetMemHandle} is asked once per allocation, not once per batch, as an executor whose
 * batches come out of one RMM pool block writes many from the same allocation. An allocation is
 * known by its buffer id ({@code CU_POINTER_ATTRIBUTE_BUFFER_ID}), unique in the process for its
 * lifetime: memory freed and allocated again at the same address has a new id, and so asks for
 * its new handle. The most recently used {@link #CAPACITY} are kept. Thread-safe.
 */
final class IpcHandles {
  /** How many allocations' handles are kept. */
  static final int CAPACITY = 64;

  /** Asks the driver something about a device address. */
  interface Query<T> {
    T at(long address) throws CudaException;
  }

  private final Query<Long> bufferId;
  private final Query<byte[]> handle;
  private final Map<Long, byte[]> byId =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, byte[]> eldest) {
          return size() > CAPACITY;
        }
      };

  /**
   * @param bufferId the buffer id of an allocation's base address
   * @param handle the IPC handle of the allocation at a base address
   */
  IpcHandles(Query<Long> bufferId, Query<byte[]> handle) {
    this.bufferId = bufferId;
    this.handle = handle;
  }

  /** The handles of the driver ({@link CudaDriver}). */
  static final IpcHandles DRIVER = new IpcHandles(CudaDriver::bufferId, CudaDriver::ipcMemHandle);

  /** The IPC handle of the allocation whose base is {@code base} (a copy: the caller's own). */
  byte[] of(long base) throws CudaException {
    long id = bufferId.at(base); // an allocation's: its base is the same for as long as the id is
    byte[] h;
    synchronized (byId) {
      h = byId.get(id);
    }
    if (h == null) {
      h = handle.at(base);
      synchronized (byId) {
        byId.put(id, h);
      }
    }
    return h.clone();
  }
}
