package dev.shuffled.client;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * The Linux system calls of the memfd plane, through the FFM API (JDK 22+): no JNI. Struct layouts
 * are those of LP64 Linux (x86-64, aarch64), the only platforms {@link #probe} accepts.
 */
@SuppressWarnings("restricted") // the point of this class: it calls the C library
final class Native {
  private Native() {}

  static final int AF_UNIX = 1;
  static final int SOCK_STREAM = 1;
  static final int SOCK_CLOEXEC = 0x80000;
  static final int MSG_NOSIGNAL = 0x4000;
  static final int SOL_SOCKET = 1;
  static final int SCM_RIGHTS = 1;
  static final int SHUT_RDWR = 2;
  /** SO_SNDTIMEO of asm-generic (x86-64, aarch64): struct timeval, 16 bytes on LP64. */
  static final int SO_SNDTIMEO = 21;
  static final int MFD_CLOEXEC = 1;
  static final int MFD_ALLOW_SEALING = 2;
  static final int F_ADD_SEALS = 1033;
  /** F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE, as the Go client. */
  static final int SEALS = 1 | 2 | 4 | 8;
  static final int EINTR = 4;
  static final int EAGAIN = 11;

  private static final Linker LINKER = Linker.nativeLinker();
  private static final MemoryLayout ERRNO_STATE = Linker.Option.captureStateLayout();
  private static final VarHandle ERRNO =
      ERRNO_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
  private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT;
  private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG;
  private static final java.lang.foreign.AddressLayout ADDR = ValueLayout.ADDRESS;

  private static MethodHandle SOCKET, CONNECT, SETSOCKOPT, READ, SEND, SENDMSG, SHUTDOWN, CLOSE;
  private static MethodHandle MEMFD_CREATE, FCNTL, STRERROR, FALLOCATE;
  /** write(2) that may read a heap array in place (a critical call: no errno, no safepoint). */
  private static MethodHandle WRITE_HEAP;
  private static MethodHandle WRITE;

  private static MethodHandle fn(String name, FunctionDescriptor fd, Linker.Option... extra) {
    MemorySegment sym =
        LINKER
            .defaultLookup()
            .find(name)
            .or(() -> SymbolLookup.loaderLookup().find(name))
            .orElseThrow(() -> new UnsatisfiedLinkError("no symbol " + name));
    Linker.Option[] opts = new Linker.Option[extra.length + 1];
    opts[0] = Linker.Option.captureCallState("errno");
    System.arraycopy(extra, 0, opts, 1, extra.length);
    return LINKER.downcallHandle(sym, fd, opts);
  }

  /** Null when the memfd plane works here, else why not. */
  static String probe() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "");
    if (!os.startsWith("linux")) {
      return "memfd needs Linux, not " + os;
    }
    if (!arch.equals("amd64") && !arch.equals("x86_64") && !arch.equals("aarch64")) {
      return "memfd is wired for x86-64 and aarch64 Linux, not " + arch;
    }
    try {
      SOCKET = fn("socket", FunctionDescriptor.of(INT, INT, INT, INT));
      CONNECT = fn("connect", FunctionDescriptor.of(INT, INT, ADDR, INT));
      SETSOCKOPT = fn("setsockopt", FunctionDescriptor.of(INT, INT, INT, INT, ADDR, INT));
      READ = fn("read", FunctionDescriptor.of(LONG, INT, ADDR, LONG));
      SEND = fn("send", FunctionDescriptor.of(LONG, INT, ADDR, LONG, INT));
      SENDMSG = fn("sendmsg", FunctionDescriptor.of(LONG, INT, ADDR, INT));
      SHUTDOWN = fn("shutdown", FunctionDescriptor.of(INT, INT, INT));
      CLOSE = fn("close", FunctionDescriptor.of(INT, INT));
      MEMFD_CREATE = fn("memfd_create", FunctionDescriptor.of(INT, ADDR, INT));
      FCNTL =
          fn("fcntl", FunctionDescriptor.of(INT, INT, INT, INT), Linker.Option.firstVariadicArg(2));
      WRITE = fn("write", FunctionDescriptor.of(LONG, INT, ADDR, LONG));
      FALLOCATE = fn("fallocate", FunctionDescriptor.of(INT, INT, INT, LONG, LONG));
      WRITE_HEAP =
          LINKER.downcallHandle(
              LINKER.defaultLookup().find("write").orElseThrow(),
              FunctionDescriptor.of(LONG, INT, ADDR, LONG),
              Linker.Option.critical(true));
      STRERROR =
          LINKER.downcallHandle(
              LINKER.defaultLookup().find("strerror").orElseThrow(),
              FunctionDescriptor.of(ADDR, INT));
      // One real memfd, sealed, proves the whole path (and that native access is allowed).
      int fd = sealedMemfd(ByteBuffer.wrap(new byte[] {1}));
      close(fd);
      return null;
    } catch (Throwable t) {
      return "the FFM API failed: " + t;
    }
  }

  // ---- calls -------------------------------------------------------------------------

  private static IOException err(String call, int errno) {
    String msg;
    try {
      MemorySegment s = ((MemorySegment) STRERROR.invokeExact(errno)).reinterpret(256);
      msg = s.getString(0);
    } catch (Throwable t) {
      msg = "errno " + errno;
    }
    return new IOException(call + ": " + msg);
  }

  private static int errno(MemorySegment state) {
    return (int) ERRNO.get(state, 0L);
  }

  static int socket() throws IOException {
    try (Arena a = Arena.ofConfined()) {
      MemorySegment st = a.allocate(ERRNO_STATE);
      int fd = (int) SOCKET.invokeExact(st, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        throw err("socket(AF_UNIX)", errno(st));
      }
      return fd;
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw new IOException("socket", t);
    }
  }

  /**
   * connect(2) to a socket path within {@code timeout}, retrying on EINTR. A Unix socket's connect
   * blocks while the listener's backlog is full (a daemon that stopped accepting); SO_SNDTIMEO
   * bounds that wait in the kernel (EAGAIN once it passes), and is cleared again afterwards.
   *
   * @throws java.net.SocketTimeoutException not accepted within {@code timeout}
   */
  static void connect(int fd, String path, java.time.Duration timeout) throws IOException {
    byte[] p = path.getBytes(StandardCharsets.UTF_8);
    if (p.length >= 108) {
      throw new IOException("socket path " + path + ": " + p.length + " bytes, want < 108");
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment st = a.allocate(ERRNO_STATE);
      MemorySegment addr = a.allocate(110);
      addr.set(ValueLayout.JAVA_SHORT, 0, (short) AF_UNIX);
      MemorySegment.copy(p, 0, addr, ValueLayout.JAVA_BYTE, 2, p.length);
      MemorySegment tv = a.allocate(16, 8);
      while (true) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw timedOut(path, timeout);
        }
        // At least a microsecond: a zero timeval means no timeout at all.
        long us = Math.max(1, left / 1000);
        sendTimeout(fd, tv, us / 1_000_000, us % 1_000_000, st);
        int r = (int) CONNECT.invokeExact(st, fd, addr, 2 + p.length + 1);
        int e = r == 0 ? 0 : errno(st);
        sendTimeout(fd, tv, 0, 0, st); // sends block as before
        if (r == 0) {
          return;
        }
        if (e == EAGAIN) {
          throw timedOut(path, timeout);
        }
        if (e != EINTR) {
          throw err("connect " + path, e);
        }
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw new IOException("connect", t);
    }
  }

  private static IOException timedOut(String path, java.time.Duration timeout) {
    return new java.net.SocketTimeoutException(
        "connect to " + path + ": not accepted within " + timeout
            + " (the daemon is not accepting connections: its listen backlog is full)");
  }

  /** setsockopt(SO_SNDTIMEO) to sec s + us microseconds (0, 0: no timeout). */
  private static void sendTimeout(int fd, MemorySegment tv, long s, long us, MemorySegment st)
      throws Throwable {
    tv.set(LONG, 0, s);
    tv.set(LONG, 8, us);
    if ((int) SETSOCKOPT.invokeExact(st, fd, SOL_SOCKET, SO_SNDTIMEO, tv, 16) != 0) {
      throw err("setsockopt(SO_SNDTIMEO)", errno(st));
    }
  }

  /** read(2) into {@code buf}; returns bytes read, 0 at end of stream. */
  static long read(int fd, MemorySegment buf, long n, MemorySegment st) throws IOException {
    try {
      while (true) {
        long r = (long) READ.invokeExact(st, fd, buf, n);
        if (r >= 0) {
          return r;
        }
        int e = errno(st);
        if (e != EINTR && e != EAGAIN) {
          throw err("read from the daemon's socket", e);
        }
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw new IOException("read", t);
    }
  }

  /** send(2) with MSG_NOSIGNAL; returns bytes sent (> 0). */
  static long send(int fd, MemorySegment buf, long n, MemorySegment st) throws IOException {
    try {
      while (true) {
        long r = (long) SEND.invokeExact(st, fd, buf, n, MSG_NOSIGNAL);
        if (r > 0 || (r == 0 && n == 0)) {
          return r;
        }
        int e = errno(st);
        if (e != EINTR && e != EAGAIN) {
          throw err("write to the daemon's socket", e);
        }
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw new IOException("send", t);
    }
  }

  /**
   * sendmsg(2) of {@code n} bytes of {@code buf} with {@code passFd} in one SCM_RIGHTS message;
   * returns bytes sent (the rest follows with {@link #send}, without ancillary data).
   */
  static long sendWithFd(int fd, MemorySegment buf, long n, int passFd, Arena a, MemorySegment st)
      throws IOException {
    MemorySegment iov = a.allocate(16, 8);
    iov.set(ADDR, 0, buf);
    iov.set(LONG, 8, n);
    MemorySegment cmsg = a.allocate(24, 8); // CMSG_SPACE(sizeof(int))
    cmsg.set(LONG, 0, 20); // CMSG_LEN(sizeof(int))
    cmsg.set(INT, 8, SOL_SOCKET);
    cmsg.set(INT, 12, SCM_RIGHTS);
    cmsg.set(INT, 16, passFd);
    MemorySegment msg = a.allocate(56, 8); // struct msghdr
    msg.set(ADDR, 16, iov);
    msg.set(LONG, 24, 1);
    msg.set(ADDR, 32, cmsg);
    msg.set(LONG, 40, 24);
    try {
      while (true) {
        long r = (long) SENDMSG.invokeExact(st, fd, msg, MSG_NOSIGNAL);
        if (r > 0) {
          return r;
        }
        int e = errno(st);
        if (e != EINTR && e != EAGAIN) {
          throw err("sendmsg to the daemon's socket", e);
        }
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw new IOException("sendmsg", t);
    }
  }

  static void shutdown(int fd) {
    try (Arena a = Arena.ofConfined()) {
      int r = (int) SHUTDOWN.invokeExact(a.allocate(ERRNO_STATE), fd, SHUT_RDWR);
      assert r == 0 || r == -1;
    } catch (Throwable ignored) {
      // shutting down a socket that is already gone is fine
    }
  }

  static void close(int fd) {
    try (Arena a = Arena.ofConfined()) {
      int r = (int) CLOSE.invokeExact(a.allocate(ERRNO_STATE), fd);
      assert r == 0 || r == -1;
    } catch (Throwable ignored) {
      // close(2) releases the descriptor even when it reports an error
    }
  }

  /**
   * A memfd holding a copy of {@code data}'s remaining bytes, sealed with {@link #SEALS}: created
   * with MFD_ALLOW_SEALING | MFD_CLOEXEC, filled with write(2), then sealed.
   */
  static int sealedMemfd(ByteBuffer data) throws IOException {
    try (Arena a = Arena.ofConfined()) {
      MemorySegment st = a.allocate(ERRNO_STATE);
      int fd = (int) MEMFD_CREATE.invokeExact(st, a.allocateFrom("shuffled-batch"), MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (fd < 0) {
        throw err("memfd_create", errno(st));
      }
      boolean ok = false;
      try {
        writeAll(fd, MemorySegment.ofBuffer(data), st);
        if ((int) FCNTL.invokeExact(st, fd, F_ADD_SEALS, SEALS) != 0) {
          throw err("fcntl(F_ADD_SEALS) on memfd", errno(st));
        }
        ok = true;
        return fd;
      } finally {
        if (!ok) {
          close(fd);
        }
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw new IOException("memfd", t);
    }
  }

  /**
   * A memfd of {@code size} bytes, created with MFD_ALLOW_SEALING | MFD_CLOEXEC, every page
   * allocated with fallocate(2) (the daemon refuses a region with holes), not sealed.
   */
  static int allocatedMemfd(long size) throws IOException {
    try (Arena a = Arena.ofConfined()) {
      MemorySegment st = a.allocate(ERRNO_STATE);
      int fd = (int) MEMFD_CREATE.invokeExact(st, a.allocateFrom("shuffled-batch"), MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (fd < 0) {
        throw err("memfd_create", errno(st));
      }
      if (size > 0) {
        int r;
        do {
          r = (int) FALLOCATE.invokeExact(st, fd, 0, 0L, size);
        } while (r != 0 && errno(st) == EINTR);
        if (r != 0) {
          IOException e = err("fallocate " + size + " bytes of memfd", errno(st));
          close(fd);
          throw e;
        }
      }
      return fd;
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw new IOException("memfd", t);
    }
  }

  /** Adds {@link #SEALS} to a memfd that has no writable mapping left. */
  static void seal(int fd) throws IOException {
    try (Arena a = Arena.ofConfined()) {
      MemorySegment st = a.allocate(ERRNO_STATE);
      if ((int) FCNTL.invokeExact(st, fd, F_ADD_SEALS, SEALS) != 0) {
        throw err("fcntl(F_ADD_SEALS) on memfd", errno(st));
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw new IOException("memfd seal", t);
    }
  }

  /**
   * Copies {@code src} into the memfd with write(2): heap bytes are read in place (one copy, by
   * the kernel, as the Go client does), in chunks that keep each critical call short.
   */
  private static void writeAll(int fd, MemorySegment src, MemorySegment st) throws Throwable {
    long len = src.byteSize();
    long off = 0;
    while (off < len) {
      long n = Math.min(len - off, 1 << 20);
      long w = (long) WRITE_HEAP.invokeExact(fd, src.asSlice(off, n), n);
      if (w <= 0) {
        // Once more through the errno-capturing handle, from native memory, to learn why.
        try (Arena a = Arena.ofConfined()) {
          MemorySegment tmp = a.allocate(n);
          MemorySegment.copy(src, off, tmp, 0, n);
          w = (long) WRITE.invokeExact(st, fd, tmp, n);
          if (w <= 0) {
            int e = errno(st);
            if (e == EINTR) {
              continue;
            }
            throw err("write " + len + " bytes to memfd", e);
          }
        }
      }
      off += w;
    }
  }

  static MemoryLayout errnoState() {
    return ERRNO_STATE;
  }
}
