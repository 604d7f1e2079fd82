package dev.shuffled.client;

import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * One map task's output on the daemon, from {@link ShuffledClient#openMapOutput}. Batches are
 * applied in the order of the write calls, so one map output is meant for one thread at a time;
 * many map outputs of one client may be written concurrently.
 *
 * <p>A failed write leaves the map output aborted on the daemon: later writes and commit throw
 * that first failure again; {@link #abort()} is always allowed. {@link #close()} aborts a map
 * output that was not committed.
 *
 * <p>A writer that knows which write is its last calls {@link #markLast()} before it: a speed
 * hint that lets the daemon start merging the map output's runs before commit.
 */
public final class MapOutput implements AutoCloseable {
  private enum State {
    OPEN,
    COMMITTED,
    ABORTED
  }

  private final Connection conn;
  private final long handle;
  private final int shuffleId;
  private final long mapId;
  private final int numPartitions;
  private final DataPlane plane;
  private final String name;
  private final Object lock = new Object();
  private State state = State.OPEN; // guarded by lock
  private IOException firstError; // guarded by lock
  private boolean lastMarked; // markLast was called; guarded by lock
  private boolean lastWritten; // the marked write was sent; guarded by lock

  private final ColumnarSchema schema; // columnar map outputs: their columns; else null

  MapOutput(
      Connection conn, long handle, int shuffleId, long mapId, int numPartitions, DataPlane plane) {
    this(conn, handle, shuffleId, mapId, numPartitions, plane, null);
  }

  MapOutput(
      Connection conn,
      long handle,
      int shuffleId,
      long mapId,
      int numPartitions,
      DataPlane plane,
      ColumnarSchema schema) {
    this.schema = schema;
    this.conn = conn;
    this.handle = handle;
    this.shuffleId = shuffleId;
    this.mapId = mapId;
    this.numPartitions = numPartitions;
    this.plane = plane;
    this.name = "map output " + shuffleId + "/" + mapId;
  }

  public int shuffleId() {
    return shuffleId;
  }

  public long mapId() {
    return mapId;
  }

  public int numPartitions() {
    return numPartitions;
  }

  /** The data plane this map output's batches use. */
  public DataPlane plane() {
    return plane;
  }

  /**
   * The largest payload one batch may carry. For the inline plane, the daemon's max_inline, or
   * less where the Batch frame's head (handle, flags, and 8 bytes for each of numPartitions+1
   * offsets) would take the frame past the daemon's max_frame: the smaller of max_inline and
   * max_frame less that head (0 when the head alone exceeds it). For memfd, bounded only by
   * memory (Integer.MAX_VALUE - 8 for one byte array).
   */
  public long maxBatchBytes() {
    if (plane != DataPlane.INLINE) {
      return Integer.MAX_VALUE - 8;
    }
    ServerInfo si = conn.info();
    long room = si.maxFrame() - Wire.Batch.headSize(numPartitions, Wire.PLANE_INLINE);
    return Math.max(0, Math.min(si.maxInline(), room));
  }

  /**
   * Says that the next write is this map output's last batch. When the daemon announced {@link
   * ServerInfo#FEATURE_LAST_BATCH}, the client sets the protocol's {@code LAST} flag on that
   * write's Batch frame (one write sends one frame), and the daemon starts merging a map output of
   * several runs while it compresses that batch instead of at commit. When it did not, the client
   * silently sends the write without the flag: it is only a hint. The output is the same either
   * way.
   *
   * <p>After that write (whether it succeeded or failed), any further write on this map output
   * throws {@link IllegalStateException} without sending anything; {@link #commit()} and {@link
   * #abort()} work as before. A write refused before sending ({@link IllegalArgumentException})
   * does not count: the mark stays for the next write. Calling it again before that write changes
   * nothing.
   *
   * @throws IllegalStateException after commit or abort, or after the marked write
   */
  public void markLast() {
    synchronized (lock) {
      checkOpen();
      checkNotLast();
      lastMarked = true;
    }
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
   * @throws IllegalStateException after commit or abort, or after the write {@link #markLast()}
   *     marked as the last (nothing is sent)
   */
  public void writeOpaque(ByteBuffer data, long[] partitionOffsets) throws IOException {
    if (partitionOffsets.length != numPartitions + 1) {
      throw new IllegalArgumentException(
          name + ": " + partitionOffsets.length + " partition offsets, want numPartitions+1 = "
              + (numPartitions + 1));
    }
    long len = data.remaining();
    String bad = Check.offsets(partitionOffsets, len);
    if (bad != null) {
      throw new IllegalArgumentException(name + ": partitionOffsets: " + bad);
    }
    long max = maxBatchBytes();
    if (len > max) {
      String limit;
      if (plane != DataPlane.INLINE) {
        limit = "the limit " + max;
      } else if (max == conn.info().maxInline()) {
        limit = "the daemon's max_inline " + max;
      } else {
        limit = "the " + max + " bytes that the daemon's max_frame " + conn.info().maxFrame()
            + " leaves after the Batch head of " + numPartitions + " partitions";
      }
      throw new IllegalArgumentException(
          name + ": batch of " + len + " bytes exceeds " + limit + "; split it; nothing was sent");
    }
    long[] off = partitionOffsets.clone();
    submit((flags, what) -> {
      if (plane == DataPlane.INLINE) {
        conn.call(
            new Wire.Batch(handle, Wire.PLANE_INLINE, flags, off, null, 0, 0), data, -1, what);
      } else {
        int fd = Platform.sealedMemfd(data);
        try {
          conn.call(
              new Wire.Batch(handle, Wire.PLANE_MEMFD, flags, off, null, 0, len), null, fd, what);
        } finally {
          Platform.closeFd(fd);
        }
      }
    });
  }

  /** Sends one batch: {@code flags} has LAST when this is the marked write. */
  private interface Send {
    void send(int flags, String what) throws IOException;
  }

  /** Sends a batch refused by nothing before: the mark, the state and the first failure. */
  private void submit(Send s) throws IOException {
    boolean last;
    synchronized (lock) {
      checkOpen();
      checkNotLast();
      last = lastMarked;
    }
    checkWritable();
    int flags = last && conn.info().has(ServerInfo.FEATURE_LAST_BATCH) ? Wire.BATCH_LAST : 0;
    String what = (last ? "write last batch of " : "write batch of ") + name;
    try {
      s.send(flags, what);
      if (last) {
        synchronized (lock) {
          lastWritten = true;
        }
      }
    } catch (IllegalArgumentException e) {
      throw e; // refused before sending: the map output is intact
    } catch (IOException e) {
      synchronized (lock) {
        if (last) {
          lastWritten = true;
        }
        if (firstError == null) {
          firstError = e;
        }
      }
      throw e;
    }
  }

  /** The columns of a columnar map output ({@link ShuffledClient#openColumnarOutput}); else null. */
  public ColumnarSchema schema() {
    return schema;
  }

  /**
   * Writes one columnar batch (docs/protocol.md, "Columnar layout"): the daemon serializes each
   * partition's rows in the map output's format (SHFC or kudo), compresses, checksums and writes
   * them. Returns once the daemon no longer needs the batch's bytes; a batch's rows of a partition
   * below the previous batch's last are fine (merged at commit).
   *
   * <p>The columns go to the daemon with their children after them, in pre-order. On the inline
   * plane the rows' bytes of every buffer, children's included, are copied into the frame, each
   * buffer starting on a 64-byte boundary. On the memfd plane a batch made in a {@link ColumnarMemfd}
   * travels as that memfd, without a copy: this seals it (its writable views are gone; the batch
   * can still be written again, on the memfd plane); any other batch is copied into a fresh sealed
   * memfd.
   *
   * @throws IllegalArgumentException the batch's schema or partition count differs from the map
   *     output's, or an inline batch exceeds the daemon's max_inline or max_frame; nothing is sent
   * @throws IllegalStateException on an opaque map output, after commit or abort, after the write
   *     {@link #markLast()} marked, for a batch whose memfd is sealed on the inline plane, or one
   *     whose memfd was closed; nothing is sent
   * @throws ShuffledException the daemon refused the batch (the map output is aborted)
   * @throws ConnectionLostException the connection failed
   */
  public void write(ColumnarBatch batch) throws IOException {
    java.util.Objects.requireNonNull(batch, "batch");
    checkShape(batch.schema(), batch.numPartitions());
    BatchMemory mem = batch.memory();
    boolean inPlace = mem != null && plane == DataPlane.MEMFD;
    if (mem != null && !inPlace && mem.sealed()) {
      throw new IllegalStateException(
          name + ": the batch's memfd is sealed (it was written on the memfd plane), and this map"
              + " output's plane is inline; nothing was sent");
    }
    long rows = batch.rows();
    List<ColumnarBatch.Flat> flat = batch.flat(); // children after their parent, in pre-order
    List<Wire.Col> cols = new ArrayList<>(flat.size());
    List<ByteBuffer> copies = new ArrayList<>(); // inline and copied memfd: sources
    List<Wire.Buf> places = new ArrayList<>(); //   and where they go
    long pos = 0;
    for (ColumnarBatch.Flat fc : flat) {
      ColumnarSchema.Field f = fc.field();
      ColumnarBatch.Column c = fc.column();
      long n = fc.rows();
      long[] lens = {
        c.validity() == null ? 0 : n / 8 + (n % 8 == 0 ? 0 : 1),
        c.offsets() == null ? 0 : 4 * (n + 1),
        fc.used()
      };
      ByteBuffer[] bufs = {c.validity(), c.offsets(), c.data()};
      Wire.Buf[] w = new Wire.Buf[3];
      for (int k = 0; k < 3; k++) {
        if (lens[k] == 0) {
          w[k] = Wire.Buf.NONE;
        } else if (inPlace) {
          w[k] = new Wire.Buf(fc.memOffsets()[k], lens[k]);
        } else {
          w[k] = new Wire.Buf(pos, lens[k]);
          copies.add(bufs[k].limit((int) lens[k]));
          places.add(w[k]);
          pos = (pos + lens[k] + ALIGN - 1) & -ALIGN;
        }
      }
      cols.add(new Wire.Col(
          f.type().wireId, f.children().size(), f.precision(), f.scale(), f.name(), w[0], w[1], w[2]));
    }
    long len = inPlace ? mem.size() : places.isEmpty() ? 0 : places.get(places.size() - 1).offset()
        + places.get(places.size() - 1).length();
    if (!inPlace && len > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException(
          name + ": batch of " + len + " bytes exceeds the " + (Integer.MAX_VALUE - 8)
              + " one copy can hold; split it, or make it in a ColumnarMemfd; nothing was sent");
    }
    if (plane == DataPlane.INLINE && len > conn.info().maxInline()) {
      throw new IllegalArgumentException(
          name + ": batch of " + len + " bytes exceeds the daemon's max_inline "
              + conn.info().maxInline() + "; split it; nothing was sent");
    }
    long[] pr = batch.partitionRowsRef();
    long payloadLen = len;
    submit((flags, what) -> {
      if (inPlace) {
        int fd = mem.seal();
        conn.call(
            new Wire.ColumnarBatchMsg(handle, Wire.PLANE_MEMFD, flags, rows, cols, pr, 0, payloadLen),
            null, fd, what);
        return;
      }
      byte[] payload = new byte[(int) payloadLen];
      for (int k = 0; k < copies.size(); k++) {
        copies.get(k).get(0, payload, (int) places.get(k).offset(), (int) places.get(k).length());
      }
      ByteBuffer data = ByteBuffer.wrap(payload);
      if (plane == DataPlane.INLINE) {
        conn.call(
            new Wire.ColumnarBatchMsg(handle, Wire.PLANE_INLINE, flags, rows, cols, pr, 0, payloadLen),
            data, -1, what);
      } else {
        int fd = Platform.sealedMemfd(data);
        try {
          conn.call(
              new Wire.ColumnarBatchMsg(handle, Wire.PLANE_MEMFD, flags, rows, cols, pr, 0, payloadLen),
              null, fd, what);
        } finally {
          Platform.closeFd(fd);
        }
      }
    });
  }

  /** Throws unless a batch of this schema and partition count fits this columnar map output. */
  private void checkShape(ColumnarSchema batchSchema, int batchPartitions) {
    if (schema == null) {
      throw new IllegalStateException(
          name + ": a columnar batch for a map output not opened with openColumnarOutput");
    }
    if (!batchSchema.equals(schema)) {
      int n = Math.min(schema.size(), batchSchema.size());
      int i = 0;
      while (i < n && schema.field(i).equals(batchSchema.field(i))) {
        i++;
      }
      String why =
          i < n
              ? "column " + i + " is " + batchSchema.field(i) + ", the map output's "
                  + schema.field(i)
              : batchSchema.size() + " columns, the map output has " + schema.size();
      throw new IllegalArgumentException(name + ": batch schema differs: " + why + "; nothing was sent");
    }
    if (batchPartitions != numPartitions) {
      throw new IllegalArgumentException(
          name + ": batch of " + batchPartitions + " partitions (partitionRows), want "
              + numPartitions + "; nothing was sent");
    }
  }

  /**
   * Writes one columnar batch from GPU memory on the CUDA IPC data plane (docs/protocol.md; JDK
   * 22+, a daemon that announces {@link ServerInfo#FEATURE_CUDA_IPC}), whatever this map output's
   * {@link #plane()}: the batch travels as the IPC handle of the device allocation its buffers lie
   * in ({@code cuMemGetAddressRange}, {@code cuIpcGetMemHandle}) plus their offsets, and the
   * daemon copies the bytes out of it. Returns once the daemon answered: only then may the caller
   * free or reuse the device memory (until then it must stay allocated and unchanged). A batch
   * with no device bytes (0 rows) is sent inline.
   *
   * <p>The driver calls run on the calling thread: when no context, or another device's, is
   * current there, the buffers' device's primary context is made current (as the CUDA runtime's
   * {@code cudaSetDevice} does), and stays so.
   *
   * @throws IllegalArgumentException the batch's schema or partition count differs from the map
   *     output's, or its buffers do not lie in one allocation, naming the column and buffer;
   *     nothing is sent
   * @throws CudaException the driver is unavailable (naming {@value CudaDriver#LIBRARY}, or the
   *     JDK) or a driver call failed, naming it; nothing is sent
   * @throws UnsupportedOperationException the daemon does not offer the CUDA IPC data plane (a
   *     build without CUDA); nothing is sent
   * @throws IllegalStateException on an opaque map output, after commit or abort, or after the
   *     write {@link #markLast()} marked; nothing is sent
   * @throws ShuffledException the daemon refused the batch (the map output is aborted)
   * @throws ConnectionLostException the connection failed
   */
  public void write(DeviceBatch batch) throws IOException {
    java.util.Objects.requireNonNull(batch, "batch");
    checkShape(batch.schema(), batch.numPartitions());
    long rows = batch.rows();
    long[] pr = batch.partitionRowsRef();
    long first = batch.firstSent();
    if (first == 0) {
      List<Wire.Col> cols = batch.place(a -> {
        throw new IllegalStateException("no device buffer to resolve");
      }).columns();
      submit((flags, what) -> conn.call(
          new Wire.ColumnarBatchMsg(handle, Wire.PLANE_INLINE, flags, rows, cols, pr, 0, 0),
          ByteBuffer.allocate(0), -1, what));
      return;
    }
    if (!conn.info().has(ServerInfo.FEATURE_CUDA_IPC)) {
      throw new UnsupportedOperationException(
          name + ": the daemon (" + conn.info().server() + ") does not offer the cuda-ipc data"
              + " plane (a build without CUDA); nothing was sent");
    }
    int device = deviceOf(first);
    DeviceBatch.Placement p = batch.place(CudaDriver::addressRange);
    byte[] ipc = IpcHandles.DRIVER.of(p.base()); // cuIpcGetMemHandle once per allocation
    submit((flags, what) -> conn.call(
        new Wire.ColumnarBatchMsg(handle, Wire.PLANE_CUDA_IPC, flags, rows, p.columns(), pr,
            p.regionOffset(), p.regionLength(), ipc, device),
        null, -1, what));
  }

  /**
   * The device of {@code address}, made current on this thread (its primary context) unless it
   * already is.
   */
  private static int deviceOf(long address) throws CudaException {
    CudaDriver.init();
    int current = CudaDriver.currentDevice();
    int device;
    try {
      device = CudaDriver.pointerDevice(address);
    } catch (CudaException e) {
      if (current >= 0 || e.result() != CUDA_ERROR_INVALID_CONTEXT) {
        throw e;
      }
      CudaDriver.setCurrentDevice(0); // a context to ask in
      current = 0;
      device = CudaDriver.pointerDevice(address);
    }
    if (device != current) {
      CudaDriver.setCurrentDevice(device);
    }
    return device;
  }

  private static final int CUDA_ERROR_INVALID_CONTEXT = 201;

  /** Where {@link #write(ColumnarBatch)} starts each buffer it copies: Arrow's alignment. */
  private static final long ALIGN = 64;

  private void checkWritable() throws IOException {
    synchronized (lock) {
      checkOpen();
      if (firstError != null) {
        throw again(firstError);
      }
    }
    ConnectionLostException lost = conn.failure();
    if (lost != null) {
      throw new ConnectionLostException(name + ": " + lost.getMessage(), lost.getCause());
    }
  }

  /** Throws IllegalStateException after commit or abort; the caller holds lock. */
  private void checkOpen() {
    if (state != State.OPEN) {
      throw new IllegalStateException(name + " is already " + state.name().toLowerCase(java.util.Locale.ROOT));
    }
  }

  /** Throws IllegalStateException after the write markLast marked; the caller holds lock. */
  private void checkNotLast() {
    if (lastWritten) {
      throw new IllegalStateException(
          name + ": its last batch (markLast) was already written; commit or abort it;"
              + " nothing was sent");
    }
  }

  /**
   * Tests only: forgets the mark, that the last batch was written and any failed write, so that a
   * test can send what the client refuses (a Batch after a LAST one, the Commit after it) and see
   * the daemon's answer.
   */
  void forgetLastAndFailure() {
    synchronized (lock) {
      lastMarked = false;
      lastWritten = false;
      firstError = null;
    }
  }

  /** A fresh exception of the same kind as an earlier failure, which it carries as its cause. */
  private IOException again(IOException first) {
    String m = name + ": an earlier write failed: " + first.getMessage();
    if (first instanceof ShuffledException se) {
      ShuffledException e = new ShuffledException(se.rawCode(), se.daemonMessage(), name + ": an earlier write failed");
      e.initCause(first);
      return e;
    }
    if (first instanceof ConnectionLostException) {
      return new ConnectionLostException(m, first);
    }
    if (first instanceof SocketTimeoutException) {
      SocketTimeoutException e = new SocketTimeoutException(m);
      e.initCause(first);
      return e;
    }
    return new IOException(m, first);
  }

  /**
   * Finishes the map output: the daemon waits for its batches, merges its runs and commits Spark's
   * {@code shuffle_S_M_0.data}, {@code .index} and {@code .checksum.ALGO} atomically. Either way
   * the map output is finished afterwards.
   *
   * @return the partition lengths and checksums, and whether an earlier attempt had won
   * @throws IllegalStateException after commit or abort
   */
  public CommitResult commit() throws IOException {
    checkWritable();
    Wire.CommitRes r;
    try {
      r = (Wire.CommitRes) conn.call(new Wire.Commit(handle), null, -1, "commit " + name);
    } catch (ShuffledException | ConnectionLostException e) {
      synchronized (lock) {
        state = State.ABORTED; // the daemon discarded it
      }
      throw e;
    } catch (IOException e) {
      synchronized (lock) {
        if (firstError == null) {
          firstError = e;
        }
      }
      throw e;
    }
    if (r.lengths().length != numPartitions
        || (r.checksums().length != 0 && r.checksums().length != numPartitions)) {
      conn.fail(new ProtocolException(
          "CommitResult of " + name + ": " + r.lengths().length + " lengths and "
              + r.checksums().length + " checksums for " + numPartitions + " partitions"));
      synchronized (lock) {
        state = State.ABORTED;
      }
      throw new ConnectionLostException(name + ": " + conn.failure().getMessage(), conn.failure());
    }
    synchronized (lock) {
      state = State.COMMITTED;
    }
    return new CommitResult(r.existing(), r.runs(), r.lengths(), r.checksums());
  }

  /**
   * Discards the map output; nothing is committed. A no-op for one already aborted (by an error,
   * an earlier abort, or a lost connection).
   *
   * <p>An interrupted thread aborts too (Spark interrupts the tasks it kills, which then clean up
   * on that thread): the Abort is sent whatever the thread's interrupt status, which is left as it
   * was; on an interrupted thread the call does not wait for the daemon's answer.
   *
   * @throws IllegalStateException after a successful commit
   */
  public void abort() throws IOException {
    synchronized (lock) {
      if (state == State.ABORTED) {
        return;
      }
      if (state == State.COMMITTED) {
        throw new IllegalStateException(name + " is already committed");
      }
    }
    try {
      if (conn.failure() == null) {
        conn.cleanup(new Wire.Abort(handle), "abort " + name);
      }
    } catch (ShuffledException e) {
      if (e.code() != ErrorCode.NOT_FOUND && e.code() != ErrorCode.ABORTED) {
        throw e;
      }
    } catch (ConnectionLostException e) {
      // the daemon aborts what was open on a lost connection
    }
    synchronized (lock) {
      state = State.ABORTED;
    }
  }

  /** Whether the map output was committed or aborted. */
  public boolean isFinished() {
    synchronized (lock) {
      return state != State.OPEN;
    }
  }

  /**
   * Aborts the map output unless it was committed, on an interrupted thread too (see {@link
   * #abort()}); failures of that abort are not thrown.
   */
  @Override
  public void close() {
    synchronized (lock) {
      if (state != State.OPEN) {
        return;
      }
    }
    try {
      abort();
    } catch (IOException | RuntimeException e) {
      synchronized (lock) {
        state = State.ABORTED;
      }
    }
  }

  @Override
  public String toString() {
    return name + " (handle " + handle + ", " + plane.name().toLowerCase(java.util.Locale.ROOT) + ")";
  }
}
