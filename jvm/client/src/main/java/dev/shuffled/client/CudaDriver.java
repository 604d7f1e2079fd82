package dev.shuffled.client;

import java.nio.ByteBuffer;

/**
 * The few CUDA driver API calls a device batch needs, made through the FFM API from {@value
 * #LIBRARY}: no JNI, nothing loaded until the first call. Addresses are {@code CUdeviceptr}s (what
 * cuDF's {@code BaseDeviceMemoryBuffer.getAddress()} gives) as {@code long}.
 *
 * <p>This is the JDK 17 version, from the multi-release jar's base: every call throws {@link
 * CudaException}; the JDK 22+ version (src/main/java22) binds the driver.
 */
public final class CudaDriver {
  private CudaDriver() {}

  /** The driver library loaded on first use. */
  public static final String LIBRARY = "libcuda.so.1";

  /** The device allocation that encloses an address: its base address and size in bytes. */
  public record AddressRange(long base, long size) {}

  /**
   * Null when {@code library} loads and binds every call this class makes, else why not, naming
   * the library. Loads nothing for good: a probe of another library than {@link #LIBRARY} does not
   * change what later calls use.
   */
  public static String probe(String library) {
    return unavailable();
  }

  /** Loads {@value #LIBRARY} (once) and calls {@code cuInit(0)}. */
  public static void init() throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /** cuDeviceGetCount. */
  public static int deviceCount() throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /**
   * Makes device {@code ordinal}'s primary context (cuDevicePrimaryCtxRetain, retained once per
   * device for the process) current on the calling thread, as the CUDA runtime (and so cuDF and
   * RMM) does.
   */
  public static void setCurrentDevice(int ordinal) throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /** The current context's device on the calling thread, or -1 when no context is current. */
  static int currentDevice() throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /** The ordinal of the device that {@code address} lives on (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL). */
  public static int pointerDevice(long address) throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /**
   * The process-wide unique id of the allocation that {@code address} lies in
   * (CU_POINTER_ATTRIBUTE_BUFFER_ID): an allocation freed and made again gets a new one.
   */
  public static long bufferId(long address) throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /** cuMemGetAddressRange: the allocation that encloses {@code address}. */
  public static AddressRange addressRange(long address) throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /** cuIpcGetMemHandle: the 64-byte IPC handle of the allocation whose base is {@code base}. */
  public static byte[] ipcMemHandle(long base) throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /** cuMemAlloc in the current context. */
  public static long memAlloc(long bytes) throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /** cuMemcpyHtoD of {@code src}'s remaining bytes (position unchanged) to {@code dst}. */
  public static void memcpyHtoD(long dst, ByteBuffer src) throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /** cuMemcpyDtoH of {@code dst.remaining()} bytes from {@code src} (position unchanged). */
  public static void memcpyDtoH(ByteBuffer dst, long src) throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  /** cuMemFree. */
  public static void memFree(long address) throws CudaException {
    throw new CudaException(unavailable(), -1);
  }

  private static String unavailable() {
    int feature = Runtime.version().feature();
    return "CUDA driver (" + LIBRARY + "): "
        + (feature >= 22
            ? "the JDK 22+ classes of the multi-release jar are not in use"
            : "JDK " + feature + " has no FFM API (device batches need JDK 22+)");
  }
}
