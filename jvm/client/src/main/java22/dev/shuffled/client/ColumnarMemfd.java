package dev.shuffled.client;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * Shared memory that a columnar batch is built in and travels to the daemon as, without a copy: a
 * memfd mapped writable into this process, through the FFM API. Fill it through {@link #segment}
 * (a {@link MemorySegment}) or {@link #buffer} views, make the batch with {@link #batch} of
 * columns whose buffers are slices of this memfd ({@link #column} of {@code segment().asSlice(o,
 * n)}, or {@link ColumnarBatch.Column#of} of {@link #buffer} views), and {@link MapOutput#write(ColumnarBatch)} on the memfd plane seals it and passes its
 * descriptor: the daemon maps the same pages read-only. Sealing unmaps the writable mapping; using
 * a view afterwards throws {@link IllegalStateException}. On the inline plane the batch is copied,
 * as any batch, while the memfd is not yet sealed. Not safe for concurrent use.
 *
 * <p>This is the JDK 22+ version, from the multi-release jar.
 */
public final class ColumnarMemfd implements AutoCloseable {
  private final long size;
  private int fd;
  private Arena arena; // the writable mapping's; null once sealed or closed
  private MemorySegment segment;
  private boolean sealed;

  private ColumnarMemfd(int fd, long size, Arena arena, MemorySegment segment) {
    this.fd = fd;
    this.size = size;
    this.arena = arena;
    this.segment = segment;
  }

  /**
   * A memfd of {@code size} bytes, every page allocated (fallocate), mapped writable and shared.
   *
   * @throws IOException where the memfd plane is unavailable, saying why, or a call failed
   */
  public static ColumnarMemfd allocate(long size) throws IOException {
    if (size < 0) {
      throw new IllegalArgumentException("memfd size " + size + ": want >= 0");
    }
    String why = Platform.memfdUnavailableReason();
    if (why != null) {
      throw new IOException("ColumnarMemfd: " + why);
    }
    int fd = Native.allocatedMemfd(size);
    Arena arena = Arena.ofShared();
    try {
      MemorySegment seg;
      if (size == 0) {
        seg = arena.allocate(0);
      } else {
        try (FileChannel ch =
            FileChannel.open(
                Path.of("/proc/self/fd/" + fd), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
          seg = ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
        }
      }
      return new ColumnarMemfd(fd, size, arena, seg);
    } catch (IOException | RuntimeException e) {
      arena.close();
      Native.close(fd);
      throw e;
    }
  }

  /** Its size in bytes. */
  public long size() {
    return size;
  }

  /**
   * The whole writable mapping.
   *
   * @throws IllegalStateException once sealed or closed
   */
  public synchronized MemorySegment segment() {
    if (arena == null) {
      throw new IllegalStateException(sealed ? "memfd is sealed" : "memfd is closed");
    }
    return segment;
  }

  /**
   * A writable little-endian view of bytes {@code [offset, offset+length)}.
   *
   * @throws IllegalStateException once sealed or closed
   */
  public ByteBuffer buffer(long offset, int length) {
    return segment().asSlice(offset, length).asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
  }

  /**
   * The column of these slices of {@link #segment()} (null for an absent buffer), each at most 2 GiB
   * less a byte (a {@link ByteBuffer}'s bound).
   *
   * @throws IllegalArgumentException naming the buffer that is no slice of this memfd's mapping or
   *     too large
   * @throws IllegalStateException once sealed or closed
   */
  public ColumnarBatch.Column column(MemorySegment validity, MemorySegment offsets, MemorySegment data) {
    return ColumnarBatch.Column.of(view("validity", validity), view("offsets", offsets), view("data", data));
  }

  /**
   * A nested column (list, struct, map) of these slices of {@link #segment()} and these children,
   * themselves columns of this memfd; as {@link #column(MemorySegment, MemorySegment,
   * MemorySegment)}.
   */
  public ColumnarBatch.Column column(
      MemorySegment validity, MemorySegment offsets, MemorySegment data, List<ColumnarBatch.Column> children) {
    return new ColumnarBatch.Column(
        view("validity", validity), view("offsets", offsets), view("data", data), children);
  }

  private ByteBuffer view(String name, MemorySegment s) {
    if (s == null) {
      return null;
    }
    MemorySegment all = segment();
    long start = s.address() - all.address();
    if (s.isNative() != all.isNative() || start < 0 || start > size || s.byteSize() > size - start) {
      throw new IllegalArgumentException(name + ": not a slice of this memfd's segment");
    }
    if (s.byteSize() > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          name + ": " + s.byteSize() + " bytes, over a ByteBuffer's " + Integer.MAX_VALUE);
    }
    return all.asSlice(start, s.byteSize()).asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
  }

  /**
   * A batch whose buffers are all views of this memfd; as {@link ColumnarBatch#of}.
   *
   * @throws IllegalArgumentException also for a buffer outside this memfd, naming it
   */
  public ColumnarBatch batch(
      ColumnarSchema schema, long rows, List<ColumnarBatch.Column> columns, long[] partitionRows) {
    segment(); // not sealed or closed
    return ColumnarBatch.make(schema, rows, columns, partitionRows, memory);
  }

  /** What a batch made in it sees: kept apart so that sealing is no public method. */
  private final BatchMemory memory =
      new BatchMemory() {
        @Override
        public long offsetOf(ByteBuffer b) {
          return ColumnarMemfd.this.offsetOf(b);
        }

        @Override
        public long size() {
          return size;
        }

        @Override
        public int seal() throws IOException {
          return ColumnarMemfd.this.seal();
        }

        @Override
        public boolean sealed() {
          return ColumnarMemfd.this.sealed();
        }
      };

  private synchronized long offsetOf(ByteBuffer b) {
    if (arena == null || !b.isDirect()) {
      return -1;
    }
    MemorySegment s = MemorySegment.ofBuffer(b);
    long start = s.address() - segment.address();
    if (start < 0 || start > size || s.byteSize() > size - start) {
      return -1;
    }
    return start;
  }

  private synchronized int seal() throws IOException {
    if (fd < 0) {
      throw new IllegalStateException("the batch's memfd is closed; nothing was sent");
    }
    if (!sealed) {
      arena.close(); // F_SEAL_WRITE refuses a file with a writable shared mapping
      arena = null;
      segment = null;
      sealed = true;
      Native.seal(fd);
    }
    return fd;
  }

  /** Whether it is sealed: written on the memfd plane once. */
  public synchronized boolean sealed() {
    return sealed;
  }

  /** Unmaps it and closes the descriptor. */
  @Override
  public synchronized void close() {
    if (arena != null) {
      arena.close();
      arena = null;
      segment = null;
    }
    if (fd >= 0) {
      Native.close(fd);
      fd = -1;
    }
  }
}
