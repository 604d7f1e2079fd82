package dev.shuffled.client;

import java.io.IOException;
import java.nio.ByteBuffer;

/** Memory a {@link ColumnarBatch} was made in and that can travel as a sealed memfd. */
interface BatchMemory {
  /** Where {@code b}'s first byte lies in the memory, or -1 when it is not a view of it. */
  long offsetOf(ByteBuffer b);

  /** The memory's size in bytes. */
  long size();

  /**
   * Seals the memory (the caller can no longer write it; a second call does nothing) and returns
   * its descriptor, owned by the memory.
   *
   * @throws IllegalStateException the memory was closed
   */
  int seal() throws IOException;

  /** Whether it is sealed: its writable views are gone. */
  boolean sealed();
}
