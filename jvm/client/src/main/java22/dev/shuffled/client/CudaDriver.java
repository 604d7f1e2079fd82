package dev.shuffled.client;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The few CUDA driver API calls a device batch needs, made through the FFM API from {@value
 * #LIBRARY}: no JNI, nothing loaded until the first call. Addresses are {@code CUdeviceptr}s (what
 * cuDF's {@code BaseDeviceMemoryBuffer.getAddress()} gives) as {@code long}.
 *
 * <p>The JDK 22+ version: the library is loaded with {@link SymbolLookup#libraryLookup(String,
 * Arena)} into the global arena on the first call; where it cannot be, every call throws {@link
 * CudaException} naming the library and why.
 */
@SuppressWarnings("restricted") // the point of this class: it calls the CUDA driver
public final class CudaDriver {
  private CudaDriver() {}

  /** The driver library loaded on first use. */
  public static final String LIBRARY = "libcuda.so.1";

  /** The device allocation that encloses an address: its base address and size in bytes. */
  public record AddressRange(long base, long size) {}

  private static final int CU_POINTER_ATTRIBUTE_BUFFER_ID = 7;
  private static final int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
  private static final int IPC_HANDLE_SIZE = 64;
  private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT;
  private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG;
  private static final ValueLayout ADDR = ValueLayout.ADDRESS;

  /** The bound calls, or why there are none. */
  private record Bound(
      String error,
      MethodHandle init,
      MethodHandle deviceGetCount,
      MethodHandle deviceGet,
      MethodHandle primaryCtxRetain,
      MethodHandle ctxSetCurrent,
      MethodHandle ctxGetCurrent,
      MethodHandle ctxGetDevice,
      MethodHandle pointerGetAttribute,
      MethodHandle memGetAddressRange,
      MethodHandle ipcGetMemHandle,
      MethodHandle memAlloc,
      MethodHandle memcpyHtoD,
      MethodHandle memcpyDtoH,
      MethodHandle memFree,
      MethodHandle getErrorName) {}

  private static final class Holder {
    static final Bound DRIVER = bind(LIBRARY, Arena.global());
    static final CudaException INIT = initOnce();
  }

  private static final ConcurrentHashMap<Integer, MemorySegment> PRIMARY = new ConcurrentHashMap<>();

  private static Bound bind(String library, Arena arena) {
    SymbolLookup lib;
    try {
      lib = SymbolLookup.libraryLookup(library, arena);
    } catch (IllegalArgumentException | IllegalCallerException e) {
      return new Bound(
          "CUDA driver (" + library + "): cannot load it (no NVIDIA driver on this machine?): "
              + e.getMessage(),
          null, null, null, null, null, null, null, null, null, null, null, null, null, null, null);
    }
    Linker linker = Linker.nativeLinker();
    String[] names = {
      "cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
      "cuCtxGetCurrent", "cuCtxGetDevice", "cuPointerGetAttribute", "cuMemGetAddressRange_v2",
      "cuIpcGetMemHandle", "cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemFree_v2",
      "cuGetErrorName"
    };
    FunctionDescriptor[] fds = {
      FunctionDescriptor.of(INT, INT),
      FunctionDescriptor.of(INT, ADDR),
      FunctionDescriptor.of(INT, ADDR, INT),
      FunctionDescriptor.of(INT, ADDR, INT),
      FunctionDescriptor.of(INT, ADDR),
      FunctionDescriptor.of(INT, ADDR),
      FunctionDescriptor.of(INT, ADDR),
      FunctionDescriptor.of(INT, ADDR, INT, LONG),
      FunctionDescriptor.of(INT, ADDR, ADDR, LONG),
      FunctionDescriptor.of(INT, ADDR, LONG),
      FunctionDescriptor.of(INT, ADDR, LONG),
      FunctionDescriptor.of(INT, LONG, ADDR, LONG),
      FunctionDescriptor.of(INT, ADDR, LONG, LONG),
      FunctionDescriptor.of(INT, LONG),
      FunctionDescriptor.of(INT, INT, ADDR)
    };
    MethodHandle[] h = new MethodHandle[names.length];
    for (int i = 0; i < names.length; i++) {
      var sym = lib.find(names[i]);
      if (sym.isEmpty()) {
        return new Bound(
            "CUDA driver (" + library + "): no symbol " + names[i] + " (a driver too old?)",
            null, null, null, null, null, null, null, null, null, null, null, null, null, null, null);
      }
      h[i] = linker.downcallHandle(sym.get(), fds[i]);
    }
    return new Bound(
        null, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12],
        h[13], h[14]);
  }

  private static CudaException initOnce() {
    Bound b = Holder.DRIVER;
    if (b.error() != null) {
      return new CudaException(b.error(), -1);
    }
    try {
      int r = (int) b.init().invokeExact(0);
      return r == 0 ? null : failure("cuInit", r);
    } catch (Throwable t) {
      return new CudaException("CUDA driver (" + LIBRARY + "): cuInit: " + t, -1);
    }
  }

  /**
   * Null when {@code library} loads and binds every call this class makes, else why not, naming
   * the library. Loads nothing for good: a probe of another library than {@link #LIBRARY} does not
   * change what later calls use.
   */
  public static String probe(String library) {
    if (library.equals(LIBRARY)) {
      return Holder.DRIVER.error();
    }
    try (Arena a = Arena.ofConfined()) {
      return bind(library, a).error();
    }
  }

  /** Loads {@value #LIBRARY} (once) and calls {@code cuInit(0)}. */
  public static void init() throws CudaException {
    CudaException e = Holder.INIT;
    if (e != null) {
      throw new CudaException(e.getMessage(), e.result());
    }
  }

  private static Bound driver() throws CudaException {
    init();
    return Holder.DRIVER;
  }

  /** cuDeviceGetCount. */
  public static int deviceCount() throws CudaException {
    Bound b = driver();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment n = a.allocate(INT);
      check("cuDeviceGetCount", (int) b.deviceGetCount().invokeExact(n));
      return n.get(INT, 0);
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("cuDeviceGetCount", t);
    }
  }

  /**
   * Makes device {@code ordinal}'s primary context (cuDevicePrimaryCtxRetain, retained once per
   * device for the process) current on the calling thread, as the CUDA runtime (and so cuDF and
   * RMM) does.
   */
  public static void setCurrentDevice(int ordinal) throws CudaException {
    Bound b = driver();
    try {
      MemorySegment ctx = PRIMARY.get(ordinal);
      if (ctx == null) {
        synchronized (PRIMARY) {
          ctx = PRIMARY.get(ordinal);
          if (ctx == null) {
            try (Arena a = Arena.ofConfined()) {
              MemorySegment dev = a.allocate(INT);
              check("cuDeviceGet(" + ordinal + ")", (int) b.deviceGet().invokeExact(dev, ordinal));
              MemorySegment p = a.allocate(ADDR);
              check(
                  "cuDevicePrimaryCtxRetain(" + ordinal + ")",
                  (int) b.primaryCtxRetain().invokeExact(p, dev.get(INT, 0)));
              ctx = p.get(ValueLayout.ADDRESS, 0);
            }
            PRIMARY.put(ordinal, ctx);
          }
        }
      }
      check("cuCtxSetCurrent", (int) b.ctxSetCurrent().invokeExact(ctx));
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("setCurrentDevice", t);
    }
  }

  /**
   * The current context's device on the calling thread, or -1 when no context is current.
   */
  static int currentDevice() throws CudaException {
    Bound b = driver();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment p = a.allocate(ADDR);
      check("cuCtxGetCurrent", (int) b.ctxGetCurrent().invokeExact(p));
      if (p.get(ValueLayout.ADDRESS, 0).equals(MemorySegment.NULL)) {
        return -1;
      }
      MemorySegment dev = a.allocate(INT);
      check("cuCtxGetDevice", (int) b.ctxGetDevice().invokeExact(dev));
      return dev.get(INT, 0);
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("cuCtxGetCurrent", t);
    }
  }

  /** The ordinal of the device that {@code address} lives on (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL). */
  public static int pointerDevice(long address) throws CudaException {
    return (int) pointerAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "DEVICE_ORDINAL", INT, address);
  }

  /**
   * The process-wide unique id of the allocation that {@code address} lies in
   * (CU_POINTER_ATTRIBUTE_BUFFER_ID): an allocation freed and made again gets a new one.
   */
  public static long bufferId(long address) throws CudaException {
    return pointerAttribute(CU_POINTER_ATTRIBUTE_BUFFER_ID, "BUFFER_ID", LONG, address);
  }

  /**
   * cuPointerGetAttribute: attribute {@code attribute} (named {@code name} in errors) of {@code
   * address}, a value of {@code layout} (INT or LONG). The call's name is made on error only: this
   * runs for every device batch.
   */
  private static long pointerAttribute(int attribute, String name, ValueLayout layout, long address)
      throws CudaException {
    Bound b = driver();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment v = a.allocate(layout);
      int r = (int) b.pointerGetAttribute().invokeExact(v, attribute, address);
      if (r != 0) {
        throw failure("cuPointerGetAttribute(" + name + ", 0x" + Long.toHexString(address) + ")", r);
      }
      return layout == INT ? v.get(INT, 0) : v.get(LONG, 0);
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("cuPointerGetAttribute", t);
    }
  }

  /** cuMemGetAddressRange: the allocation that encloses {@code address}. */
  public static AddressRange addressRange(long address) throws CudaException {
    Bound b = driver();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment base = a.allocate(LONG);
      MemorySegment size = a.allocate(LONG);
      check(
          "cuMemGetAddressRange(0x" + Long.toHexString(address) + ")",
          (int) b.memGetAddressRange().invokeExact(base, size, address));
      return new AddressRange(base.get(LONG, 0), size.get(LONG, 0));
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("cuMemGetAddressRange", t);
    }
  }

  /** cuIpcGetMemHandle: the 64-byte IPC handle of the allocation whose base is {@code base}. */
  public static byte[] ipcMemHandle(long base) throws CudaException {
    Bound b = driver();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment h = a.allocate(IPC_HANDLE_SIZE, 8);
      check(
          "cuIpcGetMemHandle(0x" + Long.toHexString(base) + ")",
          (int) b.ipcGetMemHandle().invokeExact(h, base));
      return h.toArray(ValueLayout.JAVA_BYTE);
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("cuIpcGetMemHandle", t);
    }
  }

  /** cuMemAlloc in the current context. */
  public static long memAlloc(long bytes) throws CudaException {
    Bound b = driver();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment p = a.allocate(LONG);
      check("cuMemAlloc(" + bytes + ")", (int) b.memAlloc().invokeExact(p, bytes));
      return p.get(LONG, 0);
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("cuMemAlloc", t);
    }
  }

  /** cuMemcpyHtoD of {@code src}'s remaining bytes (position unchanged) to {@code dst}. */
  public static void memcpyHtoD(long dst, ByteBuffer src) throws CudaException {
    Bound b = driver();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment s = MemorySegment.ofBuffer(src);
      if (!s.isNative()) {
        s = a.allocate(s.byteSize(), 8).copyFrom(s);
      }
      check("cuMemcpyHtoD(" + s.byteSize() + " bytes)", (int) b.memcpyHtoD().invokeExact(dst, s, s.byteSize()));
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("cuMemcpyHtoD", t);
    }
  }

  /** cuMemcpyDtoH of {@code dst.remaining()} bytes from {@code src} (position unchanged). */
  public static void memcpyDtoH(ByteBuffer dst, long src) throws CudaException {
    Bound b = driver();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment d = MemorySegment.ofBuffer(dst);
      MemorySegment tmp = d.isNative() ? d : a.allocate(d.byteSize(), 8);
      check("cuMemcpyDtoH(" + d.byteSize() + " bytes)", (int) b.memcpyDtoH().invokeExact(tmp, src, d.byteSize()));
      if (tmp != d) {
        d.copyFrom(tmp);
      }
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("cuMemcpyDtoH", t);
    }
  }

  /** cuMemFree. */
  public static void memFree(long address) throws CudaException {
    Bound b = driver();
    try {
      check("cuMemFree(0x" + Long.toHexString(address) + ")", (int) b.memFree().invokeExact(address));
    } catch (CudaException e) {
      throw e;
    } catch (Throwable t) {
      throw unexpected("cuMemFree", t);
    }
  }

  private static void check(String call, int r) throws CudaException {
    if (r != 0) {
      throw failure(call, r);
    }
  }

  private static CudaException failure(String call, int r) {
    String name = "CUresult " + r;
    try (Arena a = Arena.ofConfined()) {
      MemorySegment p = a.allocate(ADDR);
      if ((int) Holder.DRIVER.getErrorName().invokeExact(r, p) == 0) {
        name = p.get(ValueLayout.ADDRESS, 0).reinterpret(256).getString(0) + " (" + r + ")";
      }
    } catch (Throwable ignored) {
      // keep the number
    }
    return new CudaException("CUDA driver (" + LIBRARY + "): " + call + ": " + name, r);
  }

  private static CudaException unexpected(String call, Throwable t) {
    if (t instanceof Error err) {
      throw err;
    }
    return new CudaException("CUDA driver (" + LIBRARY + "): " + call + ": " + t, -1);
  }
}
