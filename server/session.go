package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
	"golang.org/x/sync/semaphore"
)

// maxInline is the largest inline payload announced: the frame limit less
// room for the Batch head and its layout (partition offsets, column
// descriptors), so a payload of max_inline bytes still fits in a frame.
func maxInline(maxFrame int) int { return max(maxFrame-1<<20, maxFrame/2) }

// MaxOutputsPerConnection bounds the map outputs one connection holds open.
const MaxOutputsPerConnection = 4096

// PartitionStateBytes is what an open map output is charged per partition
// against Config.PartitionStateLimit at Open: the writer's per-run lengths
// and checksums (12 bytes), the index it encodes (8) and the CommitResult
// (16), rounded up for a second run and the tables' slack. Every run after
// the second is charged writer.RunTableBytes per partition when it starts.
const PartitionStateBytes = 48

// commitResultSize is the payload size of a CommitResult of n partitions
// with checksums: the largest response a map output of n partitions gets.
func commitResultSize(n int) int { return 4 + 4 + 4 + 8*n + 4 + 8*n }

// writeTimeout bounds how long a response may wait for a client that does
// not read; past it the connection is closed.
const writeTimeout = time.Minute

// session is one client connection. Its reader goroutine reads and applies
// requests in order; Commit runs on a goroutine of its own so a long commit
// holds back neither other map outputs nor Ping.
type session struct {
	s    *Server
	conn *net.UnixConn
	cred unixsock.Cred
	log  *slog.Logger

	ctx    context.Context // cancelled when the session ends
	cancel context.CancelFunc

	wmu   sync.Mutex // serializes writes to conn
	wbuf  []byte
	ended bool // under wmu: a connection-level Error (id 0) was sent, nothing follows it
	// stopping: the daemon is closing the connection (closeWith); a
	// response still sent waits at most stopWriteTimeout for the client.
	stopping atomic.Bool

	// Owned by the reader goroutine.
	hello   bool
	reg     *registration
	outputs map[uint64]*output
	handle  uint64

	commits sync.WaitGroup

	// frame: the bytes of Server.frames, and of the peer uid's share
	// uidFrames, that the frame being read or applied holds (0: none).
	// Owned by the reader goroutine.
	frame     int64
	uidFrames *semaphore.Weighted

	memfds memfdCache // mappings of the sealed memfds its batches pass again
	// opened counts its map outputs that have not ended (output.end); at 0
	// the memfd cache is dropped.
	opened atomic.Int64
}

// registration is where a session's map outputs go: the registered Spark
// local dirs (layout), or, when layout is nil, the executor's directory on
// whichever disk of the daemon's root each map output is placed.
type registration struct {
	app, executor string
	layout        shufflefile.Layout
	root          *shufflefile.Root // the opened local dirs; closed when the session ends
	dirs          []string
	key           *appKey // the IO encryption key registered, if any; released when the session ends
}

// output is one open map output of a session.
type output struct {
	w      *writer.MapWriter
	kind   protocol.PayloadKind
	app    string
	uid    uint32   // the peer uid of its connection
	sess   *session // its connection
	id     shufflefile.ID
	res    *disks.Reservation // nil outside the daemon's root
	state  int64              // partition-state bytes charged (PartitionStateBytes each)
	failed error              // a batch failed: the map output is aborted
	last   bool               // a Batch with LAST came: no other may follow
	ended  sync.Once          // counts the output as ended, once
	schema []partition.Field  // kudo: the columns declared at Open; nil otherwise
}

// end counts the map output as no longer open, committed or aborted, and
// releases its disk space reservation; only the first call counts.
func (o *output) end(s *Server, aborted bool) {
	o.ended.Do(func() {
		if aborted {
			s.metrics.Aborts.Inc()
			s.aborts.Add(1)
		}
		if o.res != nil {
			o.res.Release()
		}
		s.outputEnded(o)
		s.releaseOutput(o)
		if o.sess != nil && o.sess.opened.Add(-1) == 0 {
			o.sess.memfds.idle() // nothing of the connection references its mappings
		}
	})
}

// newSession checks the peer and registers the session; nil means refused.
func (s *Server) newSession(conn *net.UnixConn) *session {
	cred, err := unixsock.PeerCred(conn)
	if err != nil {
		s.log.Warn("refusing connection: peer credentials", "err", err)
		conn.Close()
		return nil
	}
	log := s.log.With("pid", cred.PID, "uid", cred.UID)
	if !s.peerAllowed(cred) {
		s.metrics.Errors.WithLabelValues(protocol.CodePermissionDenied.String()).Inc()
		msg := protocol.Errorf(protocol.CodePermissionDenied, "peer uid %d gid %d is not allowed to use this daemon", cred.UID, cred.GID)
		s.refused(log, cred.UID, metrics.RequestConnection, msg, "gid", cred.GID)
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		_ = protocol.WriteFrame(conn, 0, msg)
		conn.Close()
		return nil
	}
	sess := &session{s: s, conn: conn, cred: cred, log: log, outputs: make(map[uint64]*output)}
	sess.ctx, sess.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.draining {
		conn.Close()
		return nil
	}
	var bound string
	switch {
	case len(s.mu.sessions) >= s.cfg.MaxConnections:
		bound = fmt.Sprintf("%d connections open, the most --max-connections allows", len(s.mu.sessions))
	case s.mu.perUID[cred.UID] >= s.cfg.MaxConnectionsPerUID:
		bound = fmt.Sprintf("%d connections open from uid %d, the most --max-connections-per-uid allows", s.mu.perUID[cred.UID], cred.UID)
	}
	if bound != "" {
		go func() { // not under s.mu: the peer may not read
			s.metrics.Errors.WithLabelValues(protocol.CodeResourceExhausted.String()).Inc()
			msg := protocol.Errorf(protocol.CodeResourceExhausted, "%s", bound)
			s.refused(log, cred.UID, metrics.RequestConnection, msg)
			conn.SetWriteDeadline(time.Now().Add(time.Second))
			_ = protocol.WriteFrame(conn, 0, msg)
			conn.Close()
		}()
		return nil
	}
	s.mu.perUID[cred.UID]++
	if s.mu.uidFrames[cred.UID] == nil {
		s.mu.uidFrames[cred.UID] = semaphore.NewWeighted(uidFrameShare(s.cfg))
	}
	sess.uidFrames = s.mu.uidFrames[cred.UID]
	if s.mu.uidMemfds[cred.UID] == nil {
		s.mu.uidMemfds[cred.UID] = new(memfdBudget)
	}
	sess.memfds.budget = s.mu.uidMemfds[cred.UID]
	s.mu.sessions[sess] = struct{}{}
	s.sessions.Add(1)
	s.metrics.Sessions.Set(float64(len(s.mu.sessions)))
	return sess
}

// peerAllowed: the daemon's own uid and root always; others when listed.
func (s *Server) peerAllowed(c unixsock.Cred) bool {
	if c.UID == 0 || c.UID == uint32(os.Getuid()) {
		return true
	}
	return unixsock.Allowed(c, s.cfg.AllowedUIDs, s.cfg.AllowedGIDs)
}

// close ends the session from outside: the reader goroutine sees the
// closed connection and cleans up.
func (sess *session) close() {
	sess.cancel()
	sess.conn.Close()
}

// stopWriteTimeout bounds the writes to a connection the daemon closes.
const stopWriteTimeout = time.Second

// closeWith ends the session from outside (shutdown) after telling the
// client why: the Commits it cancels answer (Aborted) first, if they end
// within stopWriteTimeout, then a connection-level Error (request id 0)
// with err's code goes out. A client that does not read holds it up for
// at most 2 × stopWriteTimeout: the connection closes then whatever is
// being written.
func (sess *session) closeWith(err error) {
	sess.stopping.Store(true)
	sess.conn.SetWriteDeadline(time.Now().Add(stopWriteTimeout)) // a write blocked on the client gives up
	cut := time.AfterFunc(2*stopWriteTimeout, func() { sess.conn.Close() })
	defer cut.Stop()
	sess.cancel()
	answered := make(chan struct{})
	go func() {
		sess.commits.Wait()
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(stopWriteTimeout):
	}
	sess.reply(0, err)
	sess.conn.Close()
}

// helloMaxFrame is the frame limit before the handshake: a Hello's
// payload is at most 6 + 255 bytes.
const helloMaxFrame = 4 << 10

// frameAdmitMin: a payload longer than this waits for its share of
// Config.FrameMemory (admitFrame); shorter ones are read at once.
const frameAdmitMin = 64 << 10

// frameReadTimeout bounds how long the payload of an admitted frame may
// take to arrive; past it the connection is closed (a framing error).
var frameReadTimeout = time.Minute

// uidFrameShare is what the frames of one peer uid may hold of
// Config.FrameMemory: half of it, or one frame if that is more.
func uidFrameShare(c Config) int64 { return max(c.FrameMemory/2, int64(c.MaxFrame)) }

// admitFrame takes n bytes of the daemon's frame memory for the payload
// about to be read, within the peer uid's share, waiting while other
// connections hold them; the frame then has frameReadTimeout to arrive.
// releaseFrame gives the bytes back once the request is applied.
func (sess *session) admitFrame(n int) error {
	if err := sess.uidFrames.Acquire(sess.ctx, int64(n)); err != nil {
		return fmt.Errorf("waiting for uid %d's share of --frame-memory for a frame of %d bytes: %w", sess.cred.UID, n, err)
	}
	if err := sess.s.frames.Acquire(sess.ctx, int64(n)); err != nil {
		sess.uidFrames.Release(int64(n))
		return fmt.Errorf("waiting for --frame-memory for a frame of %d bytes: %w", n, err)
	}
	sess.frame = int64(n)
	sess.conn.SetReadDeadline(time.Now().Add(frameReadTimeout))
	return nil
}

func (sess *session) releaseFrame() {
	if sess.frame > 0 {
		sess.s.frames.Release(sess.frame)
		sess.uidFrames.Release(sess.frame)
		sess.frame = 0
		sess.conn.SetReadDeadline(time.Time{})
	}
}

func (sess *session) serve() {
	s := sess.s
	rd := protocol.NewReader(sess.conn, helloMaxFrame)
	rd.SetAdmit(frameAdmitMin, sess.admitFrame)
	defer func() {
		sess.releaseFrame()
		rd.Close()
		for h, o := range sess.outputs {
			sess.abort(o, "connection closed")
			delete(sess.outputs, h)
		}
		// A Commit the client sent before it closed (or half-closed) the
		// connection took its map output: it finishes, and its result goes
		// out if the client still reads. Only a shutdown past its drain
		// deadline, or a client that stops reading, cancels it (close).
		sess.commits.Wait()
		sess.cancel()
		sess.memfds.close()
		sess.conn.Close()
		s.sessionEnded(sess)
	}()
	rd.SetAllocator(getFrame)
	// A connection that does not send its Hello in time is closed: one
	// that never speaks would hold its connection slots for good.
	sess.conn.SetReadDeadline(time.Now().Add(s.cfg.HelloTimeout))
	for {
		sess.releaseFrame() // the last frame's request is applied
		f, err := rd.ReadFrame(nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && sess.ctx.Err() == nil {
				switch {
				case errors.Is(err, os.ErrDeadlineExceeded) && !sess.hello:
					err = fmt.Errorf("no Hello within %v of connecting (--hello-timeout): %w", s.cfg.HelloTimeout, err)
				case errors.Is(err, os.ErrDeadlineExceeded):
					err = fmt.Errorf("a frame's payload did not arrive within %v of its header: %w", frameReadTimeout, err)
				}
				sess.log.Warn("closing connection: framing error", "err", err)
				sess.reply(0, fmt.Errorf("%w: %v", errdefs.ErrInvalidArgument, err))
			}
			return
		}
		h := held{fd: f.FD}
		if f.ID == 0 {
			// Id 0 is the connection-level error's: a response to it could
			// not be told from one. A protocol violation, like a framing
			// error.
			h.release()
			sess.log.Warn("closing connection: request with the reserved id 0", "type", f.Type)
			sess.reply(0, fmt.Errorf("%w: %v request with id 0: the id is reserved for connection-level errors", errdefs.ErrInvalidArgument, f.Type))
			return
		}
		if f.Type.IsResponse() {
			h.release()
			if !sess.hello {
				sess.reply(f.ID, protocol.Errorf(protocol.CodeFailedPrecondition, "first frame is %v, want Hello", f.Type))
				return
			}
			sess.reply(f.ID, fmt.Errorf("%w: %v is a response type, not a request", errdefs.ErrInvalidArgument, f.Type))
			continue
		}
		m, err := protocol.DecodeFrame(&f) // closes f.FD on error
		if err != nil {
			if sess.hello {
				sess.failUndecoded(&f, err)
			}
			sess.reply(f.ID, err)
			if !sess.hello {
				return
			}
			continue
		}
		_, isBatch := m.(*protocol.Batch)
		if b, ok := m.(*protocol.Batch); ok && b.Plane == protocol.PlaneInline {
			h.inline = f.Payload // the writer holds the payload; the batch's release recycles it
		}
		more := sess.handle1(rd, f.ID, m, &h)
		h.release()
		if !isBatch {
			putFrame(f.Payload)
		}
		if !more {
			return
		}
	}
}

// handle1 applies one request; false ends the session.
func (sess *session) handle1(rd *protocol.Reader, id uint32, m protocol.Message, h *held) bool {
	if !sess.hello {
		hello, ok := m.(*protocol.Hello)
		if !ok {
			sess.reply(id, protocol.Errorf(protocol.CodeFailedPrecondition, "first frame is %v, want Hello", m.Type()))
			return false
		}
		v, err := protocol.Negotiate(hello, protocol.MinVersion, protocol.MaxVersion)
		if err != nil {
			sess.reply(id, err)
			return false
		}
		sess.hello = true
		sess.conn.SetReadDeadline(time.Time{}) // --hello-timeout met
		sess.log = sess.log.With("client", hello.Client)
		// An allowed peer that completed the handshake gets its frames
		// allocated whole; before, a declared length costs only what
		// arrives.
		rd.SetPreallocate(sess.s.cfg.MaxFrame)
		rd.SetMaxFrame(uint32(sess.s.cfg.MaxFrame))
		sess.send(id, &protocol.ServerHello{
			Version:   v,
			MaxFrame:  uint32(sess.s.cfg.MaxFrame),
			MaxInline: uint32(maxInline(sess.s.cfg.MaxFrame)),
			Features:  protocol.FeatureMemfd | protocol.FeatureColumnar | protocol.FeatureLifecycle | protocol.FeatureKudo | protocol.FeatureLastBatch | protocol.FeatureIOEncryption | deviceFeatures,
			Server:    "shuffled " + Version,
		})
		return true
	}
	switch m := m.(type) {
	case *protocol.Hello:
		sess.reply(id, protocol.Errorf(protocol.CodeFailedPrecondition, "Hello was already answered"))
	case *protocol.RegisterExecutor:
		err := sess.register(id, m)
		sess.s.refused(sess.log, sess.cred.UID, metrics.RequestRegister, err, "app", m.AppID, "executor", m.ExecutorID)
		sess.reply(id, err)
	case *protocol.OpenMapOutput:
		err := sess.open(id, m)
		sess.s.refused(sess.log, sess.cred.UID, metrics.RequestOpen, err, "shuffle", m.ShuffleID, "map", m.MapID)
		sess.reply(id, err)
	case *protocol.Batch:
		sess.reply(id, sess.batch(id, m, h))
	case *protocol.Commit:
		if err := sess.commit(id, m); err != nil {
			sess.reply(id, err)
		}
	case *protocol.Abort:
		o, err := sess.take(m.Handle)
		if err == nil {
			sess.abort(o, "client abort")
			sess.send(id, &protocol.Aborted{})
		} else {
			sess.reply(id, err)
		}
	case *protocol.Ping:
		sess.send(id, &protocol.Pong{})
	case *protocol.Stats:
		sess.send(id, sess.s.stats())
	case *protocol.RemoveShuffle:
		sess.reply(id, sess.removeShuffle(id, m))
	case *protocol.RemoveApplication:
		sess.reply(id, sess.removeApplication(id, m))
	case *protocol.ListShuffles:
		sess.reply(id, sess.listShuffles(id, m))
	case *protocol.ListApplications:
		sess.reply(id, sess.listApplications(id))
	default:
		sess.reply(id, fmt.Errorf("%w: %v is not served by this daemon", errdefs.ErrUnsupported, m.Type()))
	}
	return true
}

// reply sends err as an Error response, or nothing when err is nil (the
// handler sent its own response).
func (sess *session) reply(id uint32, err error) {
	if err == nil {
		return
	}
	code := codeOf(err)
	sess.s.metrics.Errors.WithLabelValues(code.String()).Inc()
	msg := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) {
		msg = pe.Message
	}
	if code == protocol.CodeInternal {
		sess.log.Error("request failed", "id", id, "err", err)
	} else {
		sess.log.Debug("request refused", "id", id, "code", code, "err", err)
	}
	sess.send(id, protocol.Errorf(code, "%s", msg)) // Errorf cuts an overlong message on a character boundary
}

// send writes one response frame; a client that does not read within
// writeTimeout loses its connection.
func (sess *session) send(id uint32, m protocol.Message) {
	sess.wmu.Lock()
	defer sess.wmu.Unlock()
	if sess.ended {
		return // a connection-level error went out: it is the last frame
	}
	sess.ended = id == 0
	var err error
	sess.wbuf, err = protocol.AppendFrame(sess.wbuf[:0], id, m)
	if err != nil {
		sess.log.Error("encoding response", "type", m.Type(), "err", err)
		sess.wbuf, _ = protocol.AppendFrame(sess.wbuf[:0], id, protocol.Errorf(protocol.CodeInternal, "response %v does not encode: %v", m.Type(), err))
	} else if n := len(sess.wbuf) - protocol.HeaderSize; n > sess.s.cfg.MaxFrame {
		// No response is larger than max_frame: a client that accepts
		// max_frame reads every one.
		sess.wbuf, _ = protocol.AppendFrame(sess.wbuf[:0], id, protocol.Errorf(protocol.CodeResourceExhausted,
			"response %v of %d bytes exceeds max_frame %d", m.Type(), n, sess.s.cfg.MaxFrame))
	}
	timeout := writeTimeout
	if sess.stopping.Load() {
		timeout = stopWriteTimeout
	}
	sess.conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := sess.conn.Write(sess.wbuf); err != nil {
		sess.close()
	}
	if cap(sess.wbuf) > 1<<20 {
		sess.wbuf = nil
	}
}

func (sess *session) register(id uint32, m *protocol.RegisterExecutor) error {
	if sess.reg != nil {
		return protocol.Errorf(protocol.CodeAlreadyExists, "connection already registered as %s/%s", sess.reg.app, sess.reg.executor)
	}
	reg, err := sess.s.registerExecutor(sess.cred.UID, m)
	if err != nil {
		return err
	}
	sess.reg = reg
	sess.log = sess.log.With("app", reg.app, "executor", reg.executor)
	sess.log.Info("executor registered", "dirs", reg.dirs, "io_encryption", reg.key != nil)
	sess.send(id, &protocol.Registered{Dirs: reg.dirs})
	return nil
}

func (sess *session) open(id uint32, m *protocol.OpenMapOutput) error {
	s := sess.s
	if sess.reg == nil {
		return fmt.Errorf("%w: OpenMapOutput before RegisterExecutor", errdefs.ErrFailedPrecondition)
	}
	if len(sess.outputs) >= MaxOutputsPerConnection {
		return fmt.Errorf("%w: %d map outputs already open on this connection", errdefs.ErrResourceExhausted, len(sess.outputs))
	}
	if n := commitResultSize(int(m.NumPartitions)); n > s.cfg.MaxFrame {
		return fmt.Errorf("%w: OpenMapOutput.num_partitions %d: its CommitResult (%d bytes) would not fit in max_frame %d",
			errdefs.ErrInvalidArgument, m.NumPartitions, n, s.cfg.MaxFrame)
	}
	k := s.codec
	if m.Codec != "" {
		var err error
		if k, err = codec.Parse(m.Codec); err != nil {
			return fmt.Errorf("%w: OpenMapOutput.codec: %v", errdefs.ErrUnsupported, err)
		}
	}
	alg := s.checksum
	if m.Checksum != "" {
		var err error
		if alg, err = checksum.Parse(m.Checksum); err != nil {
			return fmt.Errorf("%w: OpenMapOutput.checksum: %v", errdefs.ErrUnsupported, err)
		}
	}
	blockSize, level, err := codecOptions(k, m)
	if err != nil {
		return err
	}
	format, schema, err := openFormat(m)
	if err != nil {
		return err
	}
	oid := shufflefile.ID{Shuffle: m.ShuffleID, Map: m.MapID}
	if err := oid.Validate(); err != nil {
		return err
	}
	var key *iocrypt.Key
	state := int64(m.NumPartitions) * PartitionStateBytes
	if m.Flags&protocol.OpenEncrypt != 0 {
		if key, err = s.keys.usable(sess.reg.key); err != nil {
			return err
		}
		state += int64(m.NumPartitions) * iocrypt.IVSize // the IV table
	}
	o := &output{kind: m.Kind, app: sess.reg.app, uid: sess.cred.UID, id: oid, state: state, schema: schema}
	if err := s.admitOutput(o); errors.Is(err, errRemoving) {
		// A removal of its shuffle runs: the map output opens aborted,
		// as the removal's own victims are, with nothing made of it; its
		// Batch and Commit get Aborted.
		o.failed = err
		sess.handle++
		sess.outputs[sess.handle] = o
		sess.send(id, &protocol.Opened{Handle: sess.handle})
		return nil
	} else if err != nil {
		return err
	}
	defer s.openEnded(o.app)
	opened := false
	defer func() {
		if !opened {
			s.releaseOutput(o)
		}
	}()
	layout := sess.reg.layout
	if layout == nil {
		dir, res, err := s.place(sess.reg, oid)
		if err != nil {
			return err
		}
		layout, o.res = shufflefile.Flat(dir), res
	}
	spec := writer.Spec{
		ID:            oid,
		NumPartitions: int(m.NumPartitions),
		Codec:         k,
		BlockSize:     blockSize,
		Level:         level,
		Checksum:      alg,
		Layout:        layout,
		Format:        format,
		Encryption:    key,
	}
	if o.res != nil {
		spec.Space = o.res
	}
	spec.RunState = func(n int64) error { return s.chargeRun(o, n) }
	w, err := s.eng.Open(sess.ctx, spec)
	if err != nil {
		if o.res != nil {
			s.disks.ReportError(o.res.Disk(), err)
			o.res.Release()
		}
		return err
	}
	o.w = w
	if err := s.outputOpened(o); err != nil {
		_ = w.Abort()
		if o.res != nil {
			o.res.Release()
		}
		return err
	}
	opened = true // o.end releases the admission from now on
	o.sess = sess
	sess.opened.Add(1)
	sess.handle++
	sess.outputs[sess.handle] = o
	sess.send(id, &protocol.Opened{Handle: sess.handle})
	return nil
}

// batch applies one Batch. Any failure aborts the map output; later
// requests on its handle get Aborted.
func (sess *session) batch(id uint32, m *protocol.Batch, h *held) error {
	o, ok := sess.outputs[m.Handle]
	if !ok {
		return fmt.Errorf("%w: handle %d is not an open map output of this connection", errdefs.ErrNotFound, m.Handle)
	}
	if o.failed != nil {
		return fmt.Errorf("%w: map output %d/%d: %v", writer.ErrAborted, o.id.Shuffle, o.id.Map, o.failed)
	}
	err := sess.applyBatch(o, m, h)
	if err != nil {
		o.failed = err
		sess.abort(o, "batch failed")
		return err
	}
	sess.send(id, &protocol.BatchAccepted{})
	return nil
}

// applyBatch hands the batch to the writer. What it takes of h (the
// descriptor, the inline frame) it owns; the caller releases the rest.
func (sess *session) applyBatch(o *output, m *protocol.Batch, h *held) error {
	if o.last {
		return fmt.Errorf("%w: Batch on map output %d/%d after its last batch (Batch.flags LAST)", errdefs.ErrFailedPrecondition, o.id.Shuffle, o.id.Map)
	}
	if m.Kind != o.kind {
		return fmt.Errorf("%w: Batch.kind %v, but the map output was opened %v", errdefs.ErrFailedPrecondition, m.Kind, o.kind)
	}
	field, parts := "partition_offsets", len(m.Opaque.PartitionOffsets)-1
	if m.Kind == protocol.KindColumnar {
		field, parts = "partition_rows", len(m.Columnar.PartitionRows)-1
	}
	if parts != o.w.NumPartitions() {
		return fmt.Errorf("%w: Batch.%s has %d entries (%d partitions), but the map output was opened with num_partitions %d, want %d entries",
			errdefs.ErrFailedPrecondition, field, parts+1, parts, o.w.NumPartitions(), o.w.NumPartitions()+1)
	}
	if m.Flags&protocol.BatchLast != 0 {
		o.last = true
		o.w.MarkLast() // a merge of several runs may start in this batch
	}
	var payload []byte
	release := func() {}
	switch m.Plane {
	case protocol.PlaneInline:
		if limit := maxInline(sess.s.cfg.MaxFrame); len(m.Inline) > limit {
			return fmt.Errorf("%w: Batch inline length %d exceeds max_inline %d; send larger batches in a memfd", errdefs.ErrResourceExhausted, len(m.Inline), limit)
		}
		payload, release = m.Inline, h.takeInline()
	case protocol.PlaneMemfd:
		data, unmap, err := sess.memfds.mapFD(h.takeFD(), m.Region.Offset, m.Region.Length)
		if err != nil {
			return err
		}
		payload, release = data, unmap
	case protocol.PlaneCUDAIPC:
		return sess.deviceBatch(o, m, h.takeFD())
	default:
		return fmt.Errorf("%w: data plane %v is not supported by this build", errdefs.ErrUnsupported, m.Plane)
	}
	bytesIn := int64(len(payload))
	var err error
	switch m.Kind {
	case protocol.KindOpaque:
		err = o.w.WriteOpaque(sess.ctx, payload, m.Opaque.PartitionOffsets, release)
	case protocol.KindColumnar:
		b, cerr := columnarBatch(&m.Columnar, payload)
		if cerr == nil {
			cerr = o.checkColumns(b)
		}
		if cerr != nil {
			release()
			return cerr
		}
		err = o.w.WriteBatch(sess.ctx, b, release)
	default:
		release()
		return fmt.Errorf("%w: Batch.kind %v", errdefs.ErrUnsupported, m.Kind)
	}
	if err == nil {
		sess.s.metrics.BytesIn.Add(float64(bytesIn))
	}
	return err
}

// failUndecoded aborts the open map output that a Batch which failed to
// decode names (its payload starts with the u64 handle), as any batch that
// fails validation does: a later Commit of it gets Aborted.
func (sess *session) failUndecoded(f *protocol.Frame, err error) {
	if f.Type != protocol.TypeBatch || len(f.Payload) < 8 {
		return
	}
	o, ok := sess.outputs[binary.LittleEndian.Uint64(f.Payload)]
	if !ok || o.failed != nil {
		return
	}
	o.failed = err
	sess.abort(o, "batch failed")
}

// take removes a handle from the session, for Commit and Abort.
func (sess *session) take(handle uint64) (*output, error) {
	o, ok := sess.outputs[handle]
	if !ok {
		return nil, fmt.Errorf("%w: handle %d is not an open map output of this connection", errdefs.ErrNotFound, handle)
	}
	delete(sess.outputs, handle)
	return o, nil
}

func (sess *session) abort(o *output, why string) {
	if o.w == nil {
		return // opened aborted (a removal ran): nothing was admitted
	}
	_ = o.w.Abort() // only a committed output refuses, and it is not in sess.outputs
	sess.log.Debug("map output aborted", "shuffle", o.id.Shuffle, "map", o.id.Map, "why", why)
	o.end(sess.s, true)
}

func (sess *session) commit(id uint32, m *protocol.Commit) error {
	o, err := sess.take(m.Handle)
	if err != nil {
		return err
	}
	if o.failed != nil {
		return fmt.Errorf("%w: map output %d/%d: %v", writer.ErrAborted, o.id.Shuffle, o.id.Map, o.failed)
	}
	sess.commits.Add(1)
	go func() {
		defer sess.commits.Done()
		s := sess.s
		start := time.Now()
		res, err := o.w.Commit(sess.ctx)
		if o.res != nil {
			if err != nil {
				s.disks.ReportError(o.res.Disk(), err)
			} else {
				s.disks.ReportSuccess(o.res.Disk())
			}
		}
		// The map output stops counting as open (--max-open-outputs, the
		// partition state, Stats) before its client hears the result: a
		// client at the bound may open its next one at once.
		if err != nil {
			o.end(s, true)
			sess.reply(id, err)
		} else {
			elapsed := time.Since(start)
			s.metrics.Commits.Inc()
			s.commits.Add(1)
			s.metrics.CommitSeconds.Observe(elapsed.Seconds())
			if o.last {
				s.metrics.MarkedCommits.Inc()
				s.markedCommits.Add(1)
			}
			if res.EarlyMerge {
				s.metrics.EarlyMerges.Inc()
				s.earlyMerges.Add(1)
			}
			if !res.Existing {
				for _, ph := range []struct {
					name string
					d    time.Duration
				}{{metrics.PhaseEncodeWait, res.EncodeWait}, {metrics.PhaseMergeTail, res.MergeTail}, {metrics.PhaseFiles, res.Files}} {
					s.metrics.CommitPhaseSeconds.WithLabelValues(ph.name).Observe(ph.d.Seconds())
				}
			}
			s.metrics.RunsPerMapOutput.Observe(float64(res.Runs))
			s.metrics.BytesOut.Add(float64(res.BytesOut))
			s.metrics.MergeBytes.Add(float64(res.MergeBytes))
			s.metrics.Records.Add(float64(res.Records))
			cr := &protocol.CommitResult{Lengths: res.Lengths, Existing: res.Existing, Runs: int32(res.Runs)}
			if res.Existing {
				cr.Runs = 0
			}
			if res.Checksums != nil {
				cr.Checksums = make([]int64, len(res.Checksums))
				for i, c := range res.Checksums {
					cr.Checksums[i] = int64(c)
				}
			}
			o.end(s, false)
			sess.send(id, cr)
			sess.log.Debug("map output committed", "shuffle", o.id.Shuffle, "map", o.id.Map, "runs", res.Runs, "bytes", res.BytesOut, "existing", res.Existing, "latency", elapsed)
		}
	}()
	return nil
}

func (s *Server) sessionEnded(sess *session) {
	if sess.reg != nil {
		s.unregister(sess.reg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.sessions, sess)
	if s.mu.perUID[sess.cred.UID]--; s.mu.perUID[sess.cred.UID] <= 0 {
		delete(s.mu.perUID, sess.cred.UID)
		delete(s.mu.uidFrames, sess.cred.UID)
		delete(s.mu.uidMemfds, sess.cred.UID)
	}
	s.metrics.Sessions.Set(float64(len(s.mu.sessions)))
	s.sessions.Done()
}

// unregister undoes a registration: a session ended, or its key was
// refused.
func (s *Server) unregister(reg *registration) {
	s.apps.ended(reg.app)
	if reg.root != nil {
		reg.root.Close()
	}
	if reg.key != nil {
		s.keys.release(reg.key)
	}
}

// registerExecutor is register with the IO encryption key the executor
// may carry: it is bound to the application only once the registry has
// checked that uid owns the application, so that no other uid's
// registration ever places or changes a key.
func (s *Server) registerExecutor(uid uint32, m *protocol.RegisterExecutor) (*registration, error) {
	key, err := ioKey(m)
	if err != nil {
		return nil, err
	}
	reg, err := s.register(uid, m)
	if err != nil {
		return nil, err
	}
	if key != nil {
		if reg.key, err = s.keys.bind(reg.app, uid, key); err != nil {
			s.unregister(reg)
			return nil, err
		}
	}
	return reg, nil
}

// ioKey expands RegisterExecutor's IO encryption key, if it carries one,
// and clears the message's copy of it.
func ioKey(m *protocol.RegisterExecutor) (*iocrypt.Key, error) {
	if len(m.IOEncryptionKey) == 0 {
		return nil, nil
	}
	defer m.IOEncryptionKey.Clear()
	k, err := iocrypt.NewKey(m.IOEncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("%w: RegisterExecutor.io_encryption_key: %v", errdefs.ErrInvalidArgument, err)
	}
	return k, nil
}

// register resolves where an executor's map outputs go and records the
// application's owner. Spark local dirs are opened once (a
// shufflefile.Root): every later file operation in them runs relative to
// those descriptors. The first registration of a local dir in this process
// sweeps the temp files a crash left there, outside every lock; a
// concurrent registration of the same dir waits for that sweep.
func (s *Server) register(uid uint32, m *protocol.RegisterExecutor) (*registration, error) {
	if err := protocol.ValidateName("RegisterExecutor.app_id", m.AppID); err != nil {
		return nil, err
	}
	if err := disks.ValidateApp(m.AppID); err != nil {
		return nil, fmt.Errorf("RegisterExecutor.app_id: %w", err)
	}
	if err := protocol.ValidateName("RegisterExecutor.executor_id", m.ExecutorID); err != nil {
		return nil, err
	}
	reg := &registration{app: m.AppID, executor: m.ExecutorID}
	var hashed *shufflefile.SparkHashed
	if len(m.LocalDirs) == 0 {
		for _, d := range s.disks.Disks() {
			dir, err := d.ExecutorDir(m.AppID, m.ExecutorID)
			if err != nil {
				return nil, err
			}
			reg.dirs = append(reg.dirs, dir)
		}
	} else {
		for i, d := range m.LocalDirs {
			resolved, err := s.allowedDir(d)
			if err != nil {
				return nil, fmt.Errorf("RegisterExecutor.local_dirs[%d]: %w", i, err)
			}
			reg.dirs = append(reg.dirs, resolved)
		}
		hashed = &shufflefile.SparkHashed{LocalDirs: reg.dirs, SubDirs: int(m.SubDirs)}
		if err := hashed.Validate(); err != nil {
			return nil, fmt.Errorf("%w: RegisterExecutor: %v", errdefs.ErrInvalidArgument, err)
		}
		root, err := shufflefile.OpenRoot(s.fs, *hashed, s.owners(uid))
		if err != nil {
			return nil, fmt.Errorf("%w: RegisterExecutor.local_dirs: %v", errdefs.ErrPermissionDenied, err)
		}
		if err := s.checkLocalDirs(root, uid); err != nil {
			root.Close()
			return nil, err
		}
		reg.layout, reg.root = root, root
	}

	s.apps.unowned(m.AppID, func() bool { return s.disks.HasApplication(m.AppID) })
	claim, err := s.apps.claim(uid, m.AppID, hashed)
	if err != nil {
		if reg.root != nil {
			reg.root.Close()
		}
		return nil, err
	}
	s.metrics.Applications.Set(float64(claim.apps))
	if claim.changed {
		s.saveRegistry()
	}
	for d, done := range claim.mine {
		if n, err := shufflefile.Sweep(reg.root.FS(), d); err != nil {
			s.log.Warn("sweeping local dir", "dir", d, "err", err)
		} else if n > 0 {
			s.log.Info("removed temp files left by an earlier run", "dir", d, "files", n)
		}
		close(done)
	}
	for _, done := range claim.others {
		<-done
	}
	return reg, nil
}

// allowedDir resolves a client-named local dir and checks that it is a
// directory under one of the allowed roots, after symlinks. Whether the
// peer owns it is checked on the opened directory (checkLocalDirs).
//
// Resolving runs with the daemon's rights, so what its errors say must be
// about the allowed roots' trees only, never about what lies where the peer
// cannot look: the path as given must name an allowed root (as configured
// or resolved) first, and it is then resolved beneath that root
// (resolveBeneath), where a step out of it is refused before the kernel
// looks further. A path that leads out of its root (a symbolic link to
// another allowed root aside) gets one answer, whatever is there.
func (s *Server) allowedDir(dir string) (string, error) {
	clean, root := filepath.Clean(dir), ""
	for i, r := range s.roots {
		for _, cand := range []string{r, filepath.Clean(s.cfg.AllowedRoots[i])} {
			if root == "" && underDir(clean, cand) {
				root = cand
			}
		}
	}
	if root == "" {
		return "", fmt.Errorf("%w: %q is not under an allowed root %v", errdefs.ErrPermissionDenied, dir, s.cfg.AllowedRoots)
	}
	rel, err := filepath.Rel(root, clean)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", errdefs.ErrInvalidArgument, dir, err)
	}
	resolved, err := resolveBeneath(root, rel)
	switch {
	case errors.Is(err, errEscapes):
		// Only a link into another allowed root is followed; the answer
		// is the same whether the path leads nowhere, to a file or to a
		// directory outside the roots.
		if r, err := filepath.EvalSymlinks(dir); err == nil && s.underRoots(r) {
			resolved = r
			break
		}
		return "", fmt.Errorf("%w: %q %v, to nothing under an allowed root %v", errdefs.ErrPermissionDenied, dir, errEscapes, s.cfg.AllowedRoots)
	case errors.Is(err, errNoBeneath):
		if resolved, err = filepath.EvalSymlinks(dir); err != nil {
			return "", fmt.Errorf("%w: %q: %v", errdefs.ErrInvalidArgument, dir, err)
		}
	case err != nil:
		return "", fmt.Errorf("%w: %q: %v", errdefs.ErrInvalidArgument, dir, err)
	}
	if fi, err := s.fs.Stat(resolved); err != nil {
		return "", fmt.Errorf("%w: %q: %v", errdefs.ErrInvalidArgument, dir, err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%w: %q is not a directory", errdefs.ErrInvalidArgument, dir)
	}
	if !s.underRoots(resolved) {
		return "", fmt.Errorf("%w: %q (resolved %q) is not under an allowed root %v", errdefs.ErrPermissionDenied, dir, resolved, s.roots)
	}
	return resolved, nil
}

// underRoots reports whether the resolved path p lies under an allowed
// root.
func (s *Server) underRoots(p string) bool {
	for _, root := range s.roots {
		if underDir(p, root) {
			return true
		}
	}
	return false
}

// underDir reports whether the clean path p is dir or lies below it.
func underDir(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// checkLocalDirs checks the opened local dirs of a registration: each a
// directory of the peer (root and the daemon's own user aside: a client may
// name only its own executor's dirs), and each, with the hashed sub-dirs it
// already has, writable by the daemon, so that a setup that cannot work is
// refused at registration, plainly, rather than at the first commit.
func (s *Server) checkLocalDirs(r *shufflefile.Root, uid uint32) error {
	fsys := r.FS()
	tops, _ := r.Dirs()
	for i, d := range tops {
		fi, err := fsys.Stat(d)
		if err != nil {
			return fmt.Errorf("%w: RegisterExecutor.local_dirs[%d] %q: %v", errdefs.ErrInvalidArgument, i, d, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%w: RegisterExecutor.local_dirs[%d] %q is not a directory", errdefs.ErrInvalidArgument, i, d)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && uid != 0 && uid != uint32(os.Getuid()) && st.Uid != uid {
			return fmt.Errorf("%w: RegisterExecutor.local_dirs[%d] %q belongs to uid %d, not to the peer's uid %d", errdefs.ErrPermissionDenied, i, d, st.Uid, uid)
		}
	}
	dirs, err := shufflefile.ListDirs(fsys, r)
	if err != nil {
		return fmt.Errorf("%w: RegisterExecutor.local_dirs: %v", errdefs.ErrPermissionDenied, err)
	}
	for _, d := range dirs {
		if err := probeWritable(fsys, d); err != nil {
			return fmt.Errorf("%w: the daemon (uid %d) cannot create files in %s: %v; "+
				"local dirs and their sub-dirs must be writable by a group the daemon is in "+
				"(Spark makes them so with spark.shuffle.service.removeShuffle=true)", errdefs.ErrPermissionDenied, os.Getuid(), d, err)
		}
	}
	return nil
}

// probeWritable checks that the daemon may create files in dir: by
// faccessat where the file system can, else by creating and removing a
// temp file.
func probeWritable(fsys vfs.FS, dir string) error {
	if wc, ok := fsys.(vfs.WritableChecker); ok {
		return wc.CheckWritable(dir)
	}
	name := shufflefile.TempName(filepath.Join(dir, "probe"))
	f, err := fsys.Create(name, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return fsys.Remove(name)
}

// stats answers Stats.
func (s *Server) stats() *protocol.StatsResult {
	ls := s.eng.Limiter().Stats()
	s.mu.Lock()
	open, conns, state := s.mu.open, len(s.mu.sessions), s.mu.state
	s.mu.Unlock()
	return &protocol.StatsResult{Stats: []protocol.Stat{
		{Name: "bytes_in_flight", Value: ls.InFlight},
		{Name: "bytes_in_flight_limit", Value: ls.Limit},
		{Name: "peak_bytes_in_flight", Value: ls.Peak},
		{Name: "limiter_waits", Value: ls.Waits},
		{Name: "limiter_wait_ns", Value: int64(ls.WaitTime)},
		{Name: "open_map_outputs", Value: int64(open)},
		{Name: "partition_state_bytes", Value: state},
		{Name: "partition_state_limit", Value: s.cfg.PartitionStateLimit},
		{Name: "connections", Value: int64(conns)},
		{Name: "peak_rss_bytes", Value: peakRSS()},
		{Name: "commits_total", Value: s.commits.Load()},
		{Name: "aborts_total", Value: s.aborts.Load()},
		{Name: "marked_commits_total", Value: s.markedCommits.Load()},
		{Name: "early_merges_total", Value: s.earlyMerges.Load()},
	}}
}

// Stats returns the figures a StatsResult reports (docs/protocol.md,
// Stats), for a process that embeds the server.
func (s *Server) Stats() []protocol.Stat { return s.stats().Stats }
