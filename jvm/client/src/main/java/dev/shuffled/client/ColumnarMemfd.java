package dev.shuffled.client;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * Shared memory that a columnar batch is built in and travels to the daemon as, without a copy: a
 * memfd mapped writable into this process (JDK 22+ on Linux, through the FFM API; on JDK 22+ also
 * as a {@code MemorySegment}, from {@code segment()}). Fill it through {@link #buffer} views, make
 * the batch with {@link #batch}, and {@link MapOutput#write(ColumnarBatch)} on the memfd plane
 * seals it and passes its descriptor: the daemon maps the same pages read-only. Sealing unmaps the
 * writable views; using one afterwards throws {@link IllegalStateException}. On the inline plane
 * the batch is copied, as any batch, while the memfd is not yet sealed.
 *
 * <p>This is the JDK 17 version, from the multi-release jar's base: {@link #allocate} throws.
 */
public final class ColumnarMemfd implements AutoCloseable {
  private ColumnarMemfd() {}

  /**
   * A memfd of {@code size} bytes, every page allocated, mapped writable.
   *
   * @throws IOException always on JDK 17-21, and on 22+ where the memfd plane is unavailable,
   *     saying why
   */
  public static ColumnarMemfd allocate(long size) throws IOException {
    if (size < 0) {
      throw new IllegalArgumentException("memfd size " + size + ": want >= 0");
    }
    throw new IOException("ColumnarMemfd: " + Platform.memfdUnavailableReason());
  }

  /** Its size in bytes. */
  public long size() {
    throw new IllegalStateException("unreachable");
  }

  /**
   * A writable little-endian view of bytes {@code [offset, offset+length)}.
   *
   * @throws IllegalStateException once sealed or closed
   */
  public ByteBuffer buffer(long offset, int length) {
    throw new IllegalStateException("unreachable");
  }

  /**
   * A batch whose buffers are all views of this memfd (from {@link #buffer}); as {@link
   * ColumnarBatch#of}.
   *
   * @throws IllegalArgumentException also for a buffer outside this memfd, naming it
   */
  public ColumnarBatch batch(
      ColumnarSchema schema, long rows, List<ColumnarBatch.Column> columns, long[] partitionRows) {
    throw new IllegalStateException("unreachable");
  }

  /** Whether it is sealed: written on the memfd plane once. */
  public boolean sealed() {
    return false;
  }

  /** Unmaps it and closes the descriptor. */
  @Override
  public void close() {}
}
