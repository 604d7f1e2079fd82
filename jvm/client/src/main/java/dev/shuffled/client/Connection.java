package dev.shuffled.client;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One pipelined connection: a writer thread owns the socket's write side (so an interrupted task
 * thread can never cut a frame in half), a reader thread delivers responses by request id. The
 * invariant: the byte stream stays well formed whatever callers do; losing the connection fails
 * every waiting request, and every later one, with the same {@link ConnectionLostException}.
 */
final class Connection {
  private static final AtomicInteger THREADS = new AtomicInteger();

  /** A frame as the reader got it. */
  record Frame(int type, int id, ByteBuffer payload) {}

  private static final class Pending {
    final CompletableFuture<Frame> done = new CompletableFuture<>();
    /** Set when the caller stopped waiting; the reader then cleans up after the response. */
    volatile boolean abandoned;
  }

  private record Job(byte[] head, ByteBuffer tail, int fd, CompletableFuture<Void> written) {}

  private static final Job STOP = new Job(null, null, -1, null);

  private final Transport transport;
  private final Path socket;
  private final int maxFrame;
  private final Duration requestTimeout;
  private final int maxOutstanding;
  private final Semaphore slots;
  private final Map<Integer, Pending> pending = new ConcurrentHashMap<>();
  private final LinkedBlockingQueue<Job> jobs = new LinkedBlockingQueue<>();
  private final AtomicInteger nextId = new AtomicInteger();
  private final AtomicInteger alive = new AtomicInteger(2);
  private final Thread reader;
  private final Thread writer;
  private volatile ConnectionLostException failure;
  private volatile ServerInfo info;

  private Connection(Transport t, Path socket, ClientOptions o) {
    this.transport = t;
    this.socket = socket;
    this.maxFrame = o.maxFrame();
    this.requestTimeout = o.requestTimeout();
    this.maxOutstanding = o.maxOutstanding();
    this.slots = new Semaphore(o.maxOutstanding());
    int n = THREADS.incrementAndGet();
    reader = new Thread(this::readLoop, "shuffled-client-reader-" + n);
    writer = new Thread(this::writeLoop, "shuffled-client-writer-" + n);
    reader.setDaemon(true);
    writer.setDaemon(true);
  }

  /**
   * Connects and performs the handshake, both within {@code o.connectTimeout()}: connect(2) itself
   * is bounded too (a daemon that stopped accepting leaves it blocked once its listen backlog is
   * full), failing with {@link SocketTimeoutException}.
   */
  static Connection open(Path socket, ClientOptions o, boolean wantFd) throws IOException {
    long deadline = System.nanoTime() + o.connectTimeout().toNanos();
    Transport t = Platform.connect(socket, wantFd, o.connectTimeout());
    Connection c = new Connection(t, socket, o);
    c.reader.start();
    c.writer.start();
    try {
      Wire.Hello hello = new Wire.Hello(Wire.MIN_VERSION, Wire.MAX_VERSION, o.clientName());
      // What connecting left of the timeout; at least a millisecond (zero would wait for ever).
      Duration left = Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime()));
      Wire.ServerHello sh = (Wire.ServerHello) c.call(hello, null, -1, "handshake", left);
      if (sh.version() < Wire.MIN_VERSION || sh.version() > Wire.MAX_VERSION) {
        throw new ProtocolException(
            "handshake: daemon chose version " + sh.version() + ", client speaks "
                + Wire.MIN_VERSION + ".." + Wire.MAX_VERSION);
      }
      c.info = new ServerInfo(sh.version(), sh.maxFrame(), sh.maxInline(), sh.features(), sh.server());
      return c;
    } catch (ConnectionLostException e) {
      c.close();
      if (e.getCause() instanceof ShuffledException se) {
        // The daemon refused the connection (id 0 Error): its code is the answer.
        ShuffledException r = new ShuffledException(se.rawCode(), se.daemonMessage(), "connect to " + socket);
        r.initCause(e);
        throw r;
      }
      if (e.getCause() instanceof ProtocolException pe) {
        // A ServerHello that breaks the protocol (e.g. max_inline 0): name the field and value.
        ProtocolException r =
            new ProtocolException("handshake with the daemon at " + socket + ": " + pe.getMessage());
        r.initCause(e);
        throw r;
      }
      throw e;
    } catch (IOException | RuntimeException e) {
      c.close();
      throw e;
    }
  }

  ServerInfo info() {
    return info;
  }

  boolean canPassFd() {
    return transport.canPassFd();
  }

  /** The failure that ended the connection, or null while it is up. */
  ConnectionLostException failure() {
    return failure;
  }

  /**
   * Sends {@code m} (then {@code tail}'s remaining bytes, or with descriptor {@code fd} when >= 0)
   * and waits for its answer: the decoded success response, of type {@code m.type() | 0x8000}.
   *
   * @param what names the request in errors, e.g. "commit map output 3/7"
   * @throws ShuffledException the daemon answered Error
   * @throws ConnectionLostException the connection failed before the answer came
   * @throws SocketTimeoutException no answer within the request timeout
   * @throws IllegalArgumentException the frame exceeds the daemon's max_frame (nothing was sent)
   */
  Wire.Msg call(Wire.Msg m, ByteBuffer tail, int fd, String what) throws IOException {
    return call(m, tail, fd, what, requestTimeout);
  }

  /** {@link #call(Wire.Msg, ByteBuffer, int, String)} with its own timeout (zero: none). */
  Wire.Msg call(Wire.Msg m, ByteBuffer tail, int fd, String what, Duration timeout)
      throws IOException {
    Sent s = send(m, tail, fd, what, false);
    awaitWritten(s.job, s.id, what, timeout);
    Frame f = awaitResponse(s.p, s.id, what, timeout);
    return decode(f, m.type() | Wire.RESPONSE, what);
  }

  /**
   * A cleanup request ({@code m} without a tail, e.g. Abort), sent whatever the thread's interrupt
   * status: a task that Spark kills is interrupted and cleans up on that thread, and an interrupt
   * must not drop the request, or the daemon keeps what it should release until the connection
   * ends. The interrupt status is left as it was. On a thread that is interrupted (before or
   * while waiting), the answer is not waited for, so that a killed task ends at once; the reader
   * discards it. Otherwise as {@link #call}.
   *
   * @return the answer, or null when it was not waited for
   */
  Wire.Msg cleanup(Wire.Msg m, String what) throws IOException {
    boolean interrupted = Thread.interrupted();
    try {
      Sent s = send(m, null, -1, what, true, interrupted);
      interrupted |= Thread.interrupted();
      if (interrupted) {
        s.p.abandoned = true;
        return null;
      }
      awaitWritten(s.job, s.id, what, requestTimeout);
      Frame f;
      try {
        f = awaitResponse(s.p, s.id, what, requestTimeout);
      } catch (SocketTimeoutException te) {
        // SocketTimeoutException extends InterruptedIOException: a timeout is the caller's to
        // see, not an interrupt to swallow below.
        throw te;
      } catch (InterruptedIOException ie) {
        interrupted |= Thread.interrupted(); // awaitResponse set it again
        return null; // the request is out; the reader discards its answer
      }
      return decode(f, m.type() | Wire.RESPONSE, what);
    } finally {
      interrupted |= Thread.interrupted();
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A request handed to the writer thread. */
  private record Sent(int id, Pending p, Job job) {}

  /**
   * Takes a request slot and hands the frame to the writer thread. With {@code cleanup}, waiting
   * for the slot ignores interrupts (they are kept for the caller) and is bounded by the request
   * timeout instead, or by {@link #INTERRUPTED_SLOT_WAIT} on an interrupted thread ({@code
   * interrupted}: the caller cleared the status).
   */
  private Sent send(Wire.Msg m, ByteBuffer tail, int fd, String what, boolean cleanup)
      throws IOException {
    return send(m, tail, fd, what, cleanup, false);
  }

  private Sent send(
      Wire.Msg m, ByteBuffer tail, int fd, String what, boolean cleanup, boolean interrupted)
      throws IOException {
    Wire.Enc e = new Wire.Enc(64);
    e.skip(Wire.HEADER_SIZE);
    if (m instanceof Wire.Batch b) {
      b.encodeHead(e);
    } else {
      m.encode(e);
    }
    long length = (long) e.len - Wire.HEADER_SIZE + (tail == null ? 0 : tail.remaining());
    ServerInfo si = info;
    if (si != null && length > si.maxFrame()) {
      throw new IllegalArgumentException(
          what + ": " + Wire.typeName(m.type()) + " frame of " + length
              + " bytes exceeds the daemon's max_frame " + si.maxFrame() + "; nothing was sent");
    }
    acquireSlot(what, cleanup, interrupted);
    int id;
    Pending p = new Pending();
    while (true) {
      id = nextId.incrementAndGet();
      if (id != 0 && pending.putIfAbsent(id, p) == null) {
        break;
      }
    }
    // Failure may have cleared the map just before our put: check again after it.
    if (failure != null) {
      forget(id);
      throw lost(what);
    }
    ByteBuffer h = ByteBuffer.wrap(e.buf, 0, Wire.HEADER_SIZE).order(ByteOrder.LITTLE_ENDIAN);
    Wire.putHeader(h, m.type(), fd >= 0 ? Wire.FLAG_FD : 0, id, (int) length);
    byte[] head = java.util.Arrays.copyOf(e.buf, e.len);
    Job job = new Job(head, tail == null ? null : tail.duplicate(), fd, new CompletableFuture<>());
    jobs.add(job);
    if (failure != null && jobs.remove(job)) {
      forget(id); // the writer may have gone: nobody would take the job
      throw lost(what);
    }
    return new Sent(id, p, job);
  }

  /**
   * How long a cleanup request on an interrupted thread (a killed task) waits for a request slot
   * when all are taken: briefly, so that the task ends at once; the request is then dropped, and
   * the connection's end releases what it would have.
   */
  static final Duration INTERRUPTED_SLOT_WAIT = Duration.ofSeconds(1);

  /**
   * Waits for a request slot. A cleanup request's wait goes on through interrupts (restored
   * afterwards) and ends with {@link SocketTimeoutException} after the request timeout, or after
   * {@link #INTERRUPTED_SLOT_WAIT} once the thread is interrupted ({@code interrupted}: before the
   * call); any other request's wait ends at an interrupt ({@link InterruptedIOException}).
   */
  private void acquireSlot(String what, boolean cleanup, boolean interruptedBefore)
      throws IOException {
    boolean interrupted = false;
    long deadline = System.nanoTime() + requestTimeout.toNanos();
    boolean bounded = cleanup && !requestTimeout.isZero();
    Duration bound = requestTimeout;
    if (cleanup && interruptedBefore) {
      interrupted = true; // restored by the caller too; harmless twice
      deadline = shorten(bounded, deadline);
      bounded = true;
      bound = INTERRUPTED_SLOT_WAIT;
    }
    try {
      while (true) {
        if (failure != null) {
          throw lost(what);
        }
        if (bounded && System.nanoTime() - deadline > 0) {
          throw new SocketTimeoutException(
              what + ": no request slot free within " + bound + " (" + maxOutstanding
                  + " requests in flight" + (interrupted ? "; the thread is interrupted" : "")
                  + ")");
        }
        try {
          if (slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
            if (failure != null) {
              slots.release();
              throw lost(what);
            }
            return;
          }
        } catch (InterruptedException ie) {
          if (!cleanup) {
            interrupted = true;
            throw new InterruptedIOException(what + ": interrupted waiting for a request slot");
          }
          if (bound != INTERRUPTED_SLOT_WAIT) {
            deadline = shorten(bounded, deadline);
            bounded = true;
            bound = INTERRUPTED_SLOT_WAIT;
          }
          interrupted = true;
        }
      }
    } finally {
      if (interrupted && !(cleanup && interruptedBefore)) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** The earlier of {@code deadline} (when {@code bounded}) and INTERRUPTED_SLOT_WAIT from now. */
  private static long shorten(boolean bounded, long deadline) {
    long soon = System.nanoTime() + INTERRUPTED_SLOT_WAIT.toNanos();
    return bounded && deadline - soon < 0 ? deadline : soon;
  }

  /**
   * Waits until the writer is done with the job's bytes: the caller's buffer must not be reused
   * while the writer still reads it, so this wait ignores interrupts. A daemon that takes no bytes
   * for the request timeout (it stopped reading) fails the connection, which ends the write.
   */
  private void awaitWritten(Job job, int id, String what, Duration timeout) throws IOException {
    boolean interrupted = false;
    long deadline = timeout.isZero() ? Long.MAX_VALUE : System.nanoTime() + timeout.toNanos();
    try {
      while (true) {
        try {
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            fail(new SocketTimeoutException(
                "writing " + what + " did not finish within " + timeout
                    + " (the daemon stopped reading)"));
            deadline = Long.MAX_VALUE; // the writer now fails promptly
            continue;
          }
          job.written.get(Math.min(left, TimeUnit.SECONDS.toNanos(1)), TimeUnit.NANOSECONDS);
          return;
        } catch (TimeoutException te) {
          // loop: check the deadline
        } catch (InterruptedException ie) {
          interrupted = true;
        } catch (ExecutionException ee) {
          forget(id);
          throw lost(what);
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private Frame awaitResponse(Pending p, int id, String what, Duration timeout)
      throws IOException {
    try {
      if (timeout.isZero()) {
        return p.done.get();
      }
      return p.done.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException te) {
      p.abandoned = true;
      if (p.done.isDone()) {
        return awaitResponse(p, id, what, Duration.ZERO);
      }
      throw new SocketTimeoutException(what + ": no answer from the daemon within " + timeout);
    } catch (InterruptedException ie) {
      p.abandoned = true;
      Thread.currentThread().interrupt();
      throw new InterruptedIOException(what + ": interrupted waiting for the daemon's answer");
    } catch (ExecutionException ee) {
      throw lost(what); // only fail() completes a response exceptionally
    }
  }

  private Wire.Msg decode(Frame f, int want, String what) throws IOException {
    if (f.type() == Wire.ERROR) {
      Wire.Error err;
      try {
        err = (Wire.Error) Wire.decode(f.type(), f.payload());
      } catch (ProtocolException pe) {
        fail(pe);
        throw lost(what);
      }
      throw new ShuffledException(err.code(), err.message(), what);
    }
    try {
      if (f.type() != want) {
        throw new ProtocolException(
            Wire.typeName(f.type()) + " in answer to " + Wire.typeName(want & ~Wire.RESPONSE));
      }
      return Wire.decode(f.type(), f.payload());
    } catch (ProtocolException pe) {
      fail(pe); // the daemon breaks the protocol: trust nothing more on this connection
      throw lost(what);
    }
  }

  private ConnectionLostException lost(String what) {
    ConnectionLostException f = failure;
    return new ConnectionLostException(what + ": " + f.getMessage(), f.getCause());
  }

  private void forget(int id) {
    if (pending.remove(id) != null) {
      slots.release();
    }
  }

  // ---- threads ---------------------------------------------------------------------

  private void writeLoop() {
    try {
      while (true) {
        Job j;
        try {
          j = jobs.take();
        } catch (InterruptedException ie) {
          continue; // nobody interrupts this thread but close(); failure is checked below
        }
        if (j == STOP) {
          if (failure != null) {
            drainJobs();
            return;
          }
          continue;
        }
        if (failure != null) {
          j.written.completeExceptionally(failure);
          continue;
        }
        try {
          ByteBuffer h = ByteBuffer.wrap(j.head);
          ByteBuffer[] srcs = j.tail == null ? new ByteBuffer[] {h} : new ByteBuffer[] {h, j.tail};
          if (j.fd >= 0) {
            transport.writeWithFd(srcs, j.fd);
          } else {
            transport.write(srcs);
          }
          j.written.complete(null);
        } catch (IOException | RuntimeException e) {
          fail(e);
          j.written.completeExceptionally(failure);
        }
      }
    } finally {
      drainJobs();
      exited();
    }
  }

  private void drainJobs() {
    Job j;
    while ((j = jobs.poll()) != null) {
      if (j != STOP) {
        j.written.completeExceptionally(failure);
      }
    }
  }

  private void readLoop() {
    ByteBuffer buf = ByteBuffer.allocate(64 << 10).order(ByteOrder.LITTLE_ENDIAN);
    buf.flip();
    try {
      while (true) {
        fill(buf, Wire.HEADER_SIZE);
        Wire.Header h = Wire.readHeader(buf, maxFrame);
        buf.position(buf.position() + Wire.HEADER_SIZE);
        if ((h.flags() & Wire.FLAG_FD) != 0) {
          throw new ProtocolException(
              "frame header: " + Wire.typeName(h.type()) + " with the FD flag; the daemon never passes descriptors");
        }
        ByteBuffer payload;
        if (h.length() <= buf.capacity()) {
          fill(buf, h.length());
          byte[] p = new byte[h.length()];
          buf.get(p);
          payload = ByteBuffer.wrap(p);
        } else {
          byte[] p = new byte[h.length()];
          int have = buf.remaining();
          buf.get(p, 0, have);
          ByteBuffer rest = ByteBuffer.wrap(p, have, p.length - have);
          while (rest.hasRemaining()) {
            if (transport.read(rest) < 0) {
              throw new IOException("the daemon closed the connection mid-frame");
            }
          }
          payload = ByteBuffer.wrap(p);
        }
        deliver(new Frame(h.type(), h.id(), payload));
      }
    } catch (IOException | RuntimeException e) {
      fail(e);
    } finally {
      exited();
    }
  }

  /** Makes {@code n} bytes readable in {@code buf} (in read mode), reading as needed. */
  private void fill(ByteBuffer buf, int n) throws IOException {
    if (buf.remaining() >= n) {
      return;
    }
    buf.compact();
    while (buf.position() < n) {
      if (transport.read(buf) < 0) {
        boolean between = buf.position() == 0 && n == Wire.HEADER_SIZE;
        buf.flip();
        throw new IOException(
            between ? "the daemon closed the connection" : "the daemon closed the connection mid-frame");
      }
    }
    buf.flip();
  }

  private void deliver(Frame f) throws IOException {
    if (f.id() == 0) {
      String why = Wire.typeName(f.type()) + " frame with request id 0";
      if (f.type() == Wire.ERROR) {
        Wire.Error e = (Wire.Error) Wire.decode(f.type(), f.payload());
        throw new ShuffledException(e.code(), e.message(), "connection-level error");
      }
      throw new ProtocolException(why);
    }
    Pending p = pending.remove(f.id());
    if (p == null) {
      return; // an answer to nothing we asked: ignore it rather than guess
    }
    slots.release();
    if (p.abandoned && f.type() == (Wire.OPEN | Wire.RESPONSE)) {
      abortLate(f); // the caller gave up on an Open: do not leave the map output open
    }
    p.done.complete(f);
  }

  private void abortLate(Frame f) {
    try {
      Wire.Opened o = (Wire.Opened) Wire.decode(f.type(), f.payload());
      Thread t =
          new Thread(
              () -> {
                try {
                  call(new Wire.Abort(o.handle()), null, -1, "abort abandoned map output");
                } catch (IOException | RuntimeException ignored) {
                  // the connection's end aborts it anyway
                }
              },
              "shuffled-client-late-abort");
      t.setDaemon(true);
      t.start();
    } catch (ProtocolException ignored) {
      // decode() reports it to the caller that is still waiting, if any
    }
  }

  private void exited() {
    if (alive.decrementAndGet() == 0) {
      transport.close();
    }
  }

  /** Ends the connection with {@code cause} (the first one wins) and fails every waiter. */
  void fail(Throwable cause) {
    synchronized (this) {
      if (failure != null) {
        return;
      }
      failure = new ConnectionLostException(describe(cause), cause);
    }
    transport.shutdown();
    jobs.add(STOP);
    for (Integer id : pending.keySet()) {
      Pending p = pending.remove(id);
      if (p != null) {
        p.done.completeExceptionally(failure);
      }
    }
    slots.release(maxOutstanding);
  }

  private String describe(Throwable cause) {
    String m = cause.getMessage() == null ? cause.toString() : cause.getMessage();
    if (cause instanceof ClosedByClient) {
      return "connection to " + socket + " closed by the client";
    }
    if (cause instanceof java.nio.channels.AsynchronousCloseException) {
      return "connection to " + socket + " lost";
    }
    return "connection to the daemon at " + socket + " lost: " + m;
  }

  /** The cause of a connection closed by {@link #close()}. */
  static final class ClosedByClient extends IOException {
    private static final long serialVersionUID = 1L;

    ClosedByClient() {
      super("closed by the client");
    }
  }

  /** Closes the connection and waits (bounded) for its threads to end. */
  void close() {
    fail(new ClosedByClient());
    join(reader);
    join(writer);
  }

  private static void join(Thread t) {
    if (t == Thread.currentThread()) {
      return;
    }
    boolean interrupted = false;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (t.isAlive() && System.nanoTime() < deadline) {
      try {
        t.join(100);
      } catch (InterruptedException ie) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
