package dev.shuffled.client;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * One map task's output on the daemon, from {@link ShuffledClient#openMapOutput}. Batches are
 * applied in the order of the write calls, so one map output is meant for one thread at a time;
 * many map outputs of one client may be written concurrently.
 *
 * <p>A failed write leaves the map output aborted on the daemon: later writes and commit throw
 * that first failure again; {@link #abort()} is always allowed. {@link #close()} aborts a map
 * output that was not committed.
 */
public final class MapOutput implements AutoCloseable {
  private MapOutput() {}

  public int shuffleId() {
    throw new UnsupportedOperationException("not yet");
  }

  public long mapId() {
    throw new UnsupportedOperationException("not yet");
  }

  public int numPartitions() {
    throw new UnsupportedOperationException("not yet");
  }

  /** The data plane this map output's batches use. */
  public DataPlane plane() {
    throw new UnsupportedOperationException("not yet");
  }

  /**
   * The largest payload one batch may carry: the daemon's max_inline for the inline plane; for
   * memfd, bounded only by memory (Integer.MAX_VALUE - 8 for one byte array).
   */
  public long maxBatchBytes() {
    throw new UnsupportedOperationException("not yet");
  }

  /** {@link #writeOpaque(ByteBuffer, long[])} of the whole array. */
  public void writeOpaque(byte[] data, long[] partitionOffsets) throws IOException {
    writeOpaque(ByteBuffer.wrap(data), partitionOffsets);
  }

  /**
   * Writes one batch of already serialized (uncompressed) partitions: partition {@code p} is bytes
   * {@code [partitionOffsets[p], partitionOffsets[p+1])} of {@code data}'s remaining bytes, with
   * numPartitions+1 offsets, the first 0, non-decreasing, the last {@code data.remaining()}. The
   * daemon compresses, checksums and writes them; a batch whose first partitions come before the
   * previous batch's last is fine (merged at commit). Returns once the daemon no longer needs the
   * bytes; {@code data}'s position is unchanged.
   *
   * @throws IllegalArgumentException for bad offsets or a batch over {@link #maxBatchBytes()},
   *     before anything is sent
   * @throws ShuffledException the daemon refused the batch (the map output is aborted)
   * @throws ConnectionLostException the connection failed
   * @throws IllegalStateException after commit or abort
   */
  public void writeOpaque(ByteBuffer data, long[] partitionOffsets) throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /**
   * Finishes the map output: the daemon waits for its batches, merges its runs and commits Spark's
   * {@code shuffle_S_M_0.data}, {@code .index} and {@code .checksum.ALGO} atomically. Either way
   * the map output is finished afterwards.
   *
   * @return the partition lengths and checksums, and whether an earlier attempt had won
   */
  public CommitResult commit() throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /**
   * Discards the map output; nothing is committed. A no-op for one already aborted (by an error,
   * an earlier abort, or a lost connection).
   *
   * @throws IllegalStateException after a successful commit
   */
  public void abort() throws IOException {
    throw new UnsupportedOperationException("not yet");
  }

  /** Whether the map output was committed or aborted. */
  public boolean isFinished() {
    throw new UnsupportedOperationException("not yet");
  }

  /** Aborts the map output unless it was committed; failures of that abort are not thrown. */
  @Override
  public void close() {
    throw new UnsupportedOperationException("not yet");
  }
}
