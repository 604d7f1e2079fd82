package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/ingest"
	"github.com/shuffled/shuffled/internal/buildinfo"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/protocol"
	"golang.org/x/sync/semaphore"
)

// session is one client connection. Its reader goroutine reads and applies
// requests in order; Commit runs on a goroutine of its own so a long commit
// holds back neither other map outputs nor Ping.
type session struct {
	s    *Server
	conn *net.UnixConn
	cred unixsock.Cred
	log  *slog.Logger
	// connLog is log before a registration named the application and
	// executor in it (dropEnded goes back to it).
	connLog *slog.Logger

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

	// data is its share of the data planes: the mappings of the sealed
	// memfds its batches pass again, the device allocations they name.
	data *ingest.Conn
	// opened counts its map outputs that have not ended (output.end); at 0
	// the memfd cache is dropped.
	opened atomic.Int64
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
		s.mu.uidMemfds[cred.UID] = new(ingest.MemfdBudget)
	}
	sess.data = s.planes.NewConn(sess.ctx, s.mu.uidMemfds[cred.UID])
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
		sess.data.Close()
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
					err = fmt.Errorf("a frame's payload did not arrive within %v of its header: %w", s.frameReadTimeout, err)
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
		// A RegisterExecutor's payload may carry the IO encryption key:
		// once the request is applied or refused, no copy of its bytes is
		// left but the expanded key (scrubKey).
		secret := f.Type == protocol.TypeRegister
		if err != nil {
			if secret {
				scrubKey(rd, f.Payload, nil)
			}
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
		if secret {
			scrubKey(rd, f.Payload, m)
		}
		h.release()
		if !isBatch {
			putFrame(f.Payload)
		}
		if !more {
			return
		}
	}
}

// scrubKey zeroes what a RegisterExecutor frame left in memory once it was
// applied or refused: the reader's buffer, the payload and the decoded
// message's key (m may be nil: the frame did not decode). The key itself
// lives on expanded, in its iocrypt.Key, for as long as it is bound.
func scrubKey(rd *protocol.Reader, payload []byte, m protocol.Message) {
	rd.Scrub()
	clear(payload)
	if r, ok := m.(*protocol.RegisterExecutor); ok {
		r.IOEncryptionKey.Clear()
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
		sess.connLog = sess.log
		// An allowed peer that completed the handshake gets its frames
		// allocated whole; before, a declared length costs only what
		// arrives.
		rd.SetPreallocate(sess.s.cfg.MaxFrame)
		rd.SetMaxFrame(uint32(sess.s.cfg.MaxFrame))
		sess.send(id, &protocol.ServerHello{
			Version:   v,
			MaxFrame:  uint32(sess.s.cfg.MaxFrame),
			MaxInline: uint32(maxInline(sess.s.cfg.MaxFrame)),
			Features:  protocol.FeatureMemfd | protocol.FeatureColumnar | protocol.FeatureLifecycle | protocol.FeatureKudo | protocol.FeatureLastBatch | protocol.FeatureIOEncryption | protocol.FeatureServing | ingest.DeviceFeatures,
			Server:    "shuffled " + buildinfo.Get().Version, // the daemon's version, as `shuffled version` reports it
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
