// Package blockserver serves committed map outputs to Spark's reducers over
// TCP, speaking Spark's network-common framing and the block-transfer
// messages of network-shuffle (docs/serving.md has every byte): OpenBlocks
// and FetchShuffleBlocks answered by a StreamHandle, then one
// ChunkFetchRequest per block answered by ChunkFetchSuccess, whose body
// the kernel sends straight from the data file (sendfile); and
// GetLocalDirsForExecutors, DiagnoseCorruption, RemoveBlocks and this
// daemon's RemoveOutputs.
//
// Main invariants: a request reads only the committed map outputs of the
// application it names, found through the Store from what the daemon
// registered, and only when the connection may read that application (it
// authenticated for it, or the application has no secret and the server
// does not require authentication); every connection holds a bounded
// amount of memory and all of them together a bounded total (Limits), a
// connection's next request is read only once its last response is sent
// (back-pressure), and anything that is not a frame Spark's encoder writes
// closes the connection.
package blockserver

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shuffled/shuffled/internal/accept"
	"github.com/shuffled/shuffled/limiter"
	"github.com/shuffled/shuffled/metrics"
)

// Limits bound what the server holds. The zero value of a field means its
// default.
type Limits struct {
	// MaxConnections bounds the open connections; one past it is closed
	// at accept. Default 4096.
	MaxConnections int
	// IdleTimeout closes a connection that sends no frame for this long
	// (a connection's next request, not a response in progress). Default
	// 120s, Spark's spark.network.timeout.
	IdleTimeout time.Duration
	// FrameTimeout bounds how long a frame's bytes may take to arrive
	// once its length has. Default 30s.
	FrameTimeout time.Duration
	// HandshakeTimeout bounds the time from accept to a completed
	// authentication, for a connection that starts one or must
	// authenticate. Default 30s.
	HandshakeTimeout time.Duration
	// WriteTimeout closes a connection whose reader takes no part of a
	// response for this long (a slow or stalled reader). Default 120s.
	WriteTimeout time.Duration
	// MaxFrame is the largest request frame accepted, length field
	// included; a larger length closes the connection. Default 16 MiB
	// (an OpenBlocks of about 500,000 block ids).
	MaxFrame int
	// FrameMemory bounds the request frames over 4 KiB being read or
	// handled, all connections together; a frame waits (FIFO) for its
	// share, within FrameTimeout. Default 64 MiB, at least MaxFrame.
	FrameMemory int64
	// MaxStreams bounds the open streams (StreamHandles whose chunks are
	// not all fetched) of one connection. Default 256.
	MaxStreams int
	// StreamMemory bounds what one connection's open streams hold (16
	// bytes a chunk and 256 a stream), TotalStreamMemory all
	// connections'. Defaults 16 MiB and 256 MiB. A request past either is
	// answered RpcFailure.
	StreamMemory, TotalStreamMemory int64
	// SendBuffer is the buffer an encrypted connection sends a block
	// through (and a DiagnoseCorruption reads one with); SendMemory
	// bounds those buffers, all connections together. Defaults 256 KiB
	// and 64 MiB.
	SendBuffer int
	SendMemory int64
}

// smallFrame is the largest frame a connection reads into its own buffer;
// larger ones take their share of Limits.FrameMemory.
const smallFrame = 4 << 10

// sendPiece is the most one sendfile call sends: each piece gets its own
// write deadline, so a slow reader is found within WriteTimeout.
const sendPiece = 4 << 20

// withDefaults returns l with every zero field at its default.
func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxConnections, 4096)
	defDur(&l.IdleTimeout, 120*time.Second)
	defDur(&l.FrameTimeout, 30*time.Second)
	defDur(&l.HandshakeTimeout, 30*time.Second)
	defDur(&l.WriteTimeout, 120*time.Second)
	def(&l.MaxFrame, 16<<20)
	def64(&l.FrameMemory, 64<<20)
	l.FrameMemory = max(l.FrameMemory, int64(l.MaxFrame))
	def(&l.MaxStreams, 256)
	def64(&l.StreamMemory, 16<<20)
	def64(&l.TotalStreamMemory, 256<<20)
	def(&l.SendBuffer, 256<<10)
	def64(&l.SendMemory, 64<<20)
	l.SendMemory = max(l.SendMemory, int64(l.SendBuffer))
	return l
}

// Config configures a Server.
type Config struct {
	// Store finds the map outputs and secrets; required.
	Store Store
	// Handshake runs authentication (package sparkauth); nil serves
	// none.
	Handshake NewHandshake
	// RequireAuth makes every connection authenticate before any
	// request (--serve-require-auth); otherwise an application without
	// a secret is served to any connection, as Spark's external shuffle
	// service serves it with spark.authenticate off.
	RequireAuth bool
	// Limits bound memory, connections and time.
	Limits Limits
	// Metrics is updated as the server runs (default: fresh, registered
	// nowhere).
	Metrics *metrics.Serving
	// Log receives the server's log lines (default slog.Default()).
	Log *slog.Logger
}

// Server serves blocks on the listeners handed to Serve until Close.
type Server struct {
	cfg     Config
	lim     Limits
	log     *slog.Logger
	m       *metrics.Serving
	frames  *limiter.Limiter // FrameMemory
	sends   *limiter.Limiter // SendMemory
	bufs    sync.Pool        // *[]byte of SendBuffer bytes
	streams atomic.Int64     // bytes of stream state, all connections (TotalStreamMemory)
	nextID  atomic.Int64     // stream ids

	wg sync.WaitGroup // connections
	mu struct {
		sync.Mutex
		closed    bool
		listeners accept.Listeners
		conns     map[*conn]struct{}
	}
}

// New returns a Server of cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("blockserver: Config.Store is nil")
	}
	s := &Server{cfg: cfg, lim: cfg.Limits.withDefaults(), log: cfg.Log, m: cfg.Metrics}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.m == nil {
		s.m = metrics.NewServing()
	}
	s.frames = limiter.New(s.lim.FrameMemory)
	s.sends = limiter.New(s.lim.SendMemory)
	size := s.lim.SendBuffer
	s.bufs.New = func() any { b := make([]byte, size); return &b }
	// Stream ids start at a random point, as Spark's stream manager's
	// do, so that ids of an earlier run are unlikely to name a stream of
	// this one.
	s.nextID.Store(int64(rand.Int32N(1<<31-1)) * 1000)
	s.mu.conns = map[*conn]struct{}{}
	return s, nil
}

// Limits returns the limits the server runs with, defaults filled in.
func (s *Server) Limits() Limits { return s.lim }

// Serve accepts connections on ln until ln is closed or Close is called;
// then it returns nil.
func (s *Server) Serve(ln net.Listener) error {
	err := accept.Serve(ln, accept.Loop{
		Mu:        &s.mu,
		Listeners: &s.mu.listeners,
		Closed:    func() bool { return s.mu.closed },
		Warn:      func(err error) { s.log.Warn("block server: accept", "err", err) },
		Handle: func(nc net.Conn) {
			if c := s.admit(nc); c != nil {
				go c.serve()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("blockserver: accept: %w", err)
	}
	return nil
}

// admit registers a new connection, or closes it past MaxConnections or
// after Close.
func (s *Server) admit(nc net.Conn) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || len(s.mu.conns) >= s.lim.MaxConnections {
		s.m.ConnectionsRefused.Inc()
		nc.Close()
		return nil
	}
	c := newConn(s, nc)
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1)
	s.m.ConnectionsTotal.Inc()
	s.m.Connections.Inc()
	return c
}

// ended unregisters a connection that has closed.
func (s *Server) ended(c *conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	s.m.Connections.Dec()
	s.wg.Done()
}

// Conns returns the number of open connections.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

// Close stops the listeners, closes every connection (a response in
// progress is cut) and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	s.mu.listeners.CloseAll()
	for c := range s.mu.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// getBuf takes a send buffer within SendMemory; put gives it back.
func (s *Server) getBuf(deadline time.Time) (*[]byte, error) {
	ctx, cancel := contextUntil(deadline)
	defer cancel()
	if err := s.sends.Acquire(ctx, int64(s.lim.SendBuffer)); err != nil {
		return nil, fmt.Errorf("%w: no send buffer free within the write timeout (%d bytes of buffers, all in use)", errLimit, s.lim.SendMemory)
	}
	return s.bufs.Get().(*[]byte), nil
}

func (s *Server) putBuf(b *[]byte) {
	s.bufs.Put(b)
	s.sends.Release(int64(s.lim.SendBuffer))
}

// newStreamID returns a fresh stream id.
func (s *Server) newStreamID() int64 { return s.nextID.Add(1) }
