package blockserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/shuffled/shuffled/metrics"
)

// Errors that close a connection or fail a request.
var (
	errLimit     = errors.New("blockserver: limit")
	errClose     = errors.New("blockserver: connection closed by the server")
	errOversized = fmt.Errorf("%w: frame length out of range", ErrMalformed)
)

// Auth tags: the first byte of an RpcRequest body that starts an
// authentication (SASL's SaslMessage; AuthEngine's AuthMessage).
const (
	tagSASL       = 0xEA
	tagAuthEngine = 0xFB
)

// conn is one client connection, served by one goroutine: it reads a
// frame, answers it whole, then reads the next.
type conn struct {
	s   *Server
	nc  net.Conn
	tcp *net.TCPConn // nc, when it is one (sendfile)
	r   *bufio.Reader
	fw  FrameWriter // the cipher's writer, after an encrypted handshake
	enc bool        // fw is set: no sendfile

	start time.Time
	small []byte // frames of at most smallFrame bytes
	out   []byte // the response being built

	hs  Handshake // authentication in progress or done; nil if none started
	app string    // the application authenticated for ("" none)

	streams   map[int64]*stream
	streamMem int64
	execs     map[execKey]*execRef

	closeOnce sync.Once
	reason    string // why the server closed it (metrics.Close*), "" for the client's close
}

type execKey struct{ app, exec string }

// execRef is one executor's Store handle, shared by a connection's
// streams.
type execRef struct {
	key  execKey
	ex   Executor
	refs int
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, start: time.Now(), streams: map[int64]*stream{}, execs: map[execKey]*execRef{}}
	c.tcp, _ = nc.(*net.TCPConn)
	c.r = bufio.NewReaderSize(nc, 4<<10)
	return c
}

// shutdown closes the connection from another goroutine (Server.Close).
func (c *conn) shutdown() {
	c.closeOnce.Do(func() { c.reason = metrics.CloseShutdown })
	c.nc.Close()
}

// closeFor records why the server closes the connection.
func (c *conn) closeFor(reason string) {
	c.closeOnce.Do(func() { c.reason = reason })
}

func (c *conn) serve() {
	defer c.s.ended(c)
	defer func() {
		for id := range c.streams {
			c.endStream(id)
		}
		for _, ref := range c.execs {
			ref.ex.Close()
		}
		c.closeOnce.Do(func() {})
		if c.reason != "" {
			c.s.m.ConnectionsClosed.WithLabelValues(c.reason).Inc()
		}
		c.nc.Close()
	}()
	for {
		frame, release, err := c.readFrame()
		if err != nil {
			c.readFailed(err)
			return
		}
		req, err := DecodeRequest(frame)
		if err != nil {
			release()
			c.s.log.Debug("block server: malformed frame, closing", "remote", c.nc.RemoteAddr(), "err", err)
			c.closeFor(metrics.CloseMalformed)
			return
		}
		err = c.handle(req)
		release()
		if err != nil {
			c.writeFailed(err)
			return
		}
		if cap(c.out) > smallFrame {
			c.out = nil // a large response's buffer is not kept
		}
	}
}

// readFailed records why reading a frame ended the connection.
func (c *conn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, ErrMalformed):
		c.s.log.Debug("block server: bad frame, closing", "remote", c.nc.RemoteAddr(), "err", err)
		c.closeFor(metrics.CloseMalformed)
	case errors.Is(err, errLimit):
		c.s.log.Warn("block server: no frame memory in time, closing", "remote", c.nc.RemoteAddr(), "err", err)
		c.closeFor(metrics.CloseIdle)
	case errors.As(err, &ne) && ne.Timeout():
		if c.hs != nil && !c.hs.Done() || c.mustAuthenticate() {
			c.closeFor(metrics.CloseAuth)
		} else {
			c.closeFor(metrics.CloseIdle)
		}
	}
}

// writeFailed records why answering a request ended the connection.
func (c *conn) writeFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, errClose):
	case errors.As(err, &ne) && ne.Timeout():
		c.closeFor(metrics.CloseSlow)
	default:
		c.s.log.Debug("block server: write failed, closing", "remote", c.nc.RemoteAddr(), "err", err)
	}
}

// mustAuthenticate reports a connection that has not authenticated and
// may do nothing else: the server requires authentication.
func (c *conn) mustAuthenticate() bool { return c.app == "" && c.s.cfg.RequireAuth }

// readDeadline is when the next frame must have started: the idle
// timeout, or the handshake's end while one is due.
func (c *conn) readDeadline() time.Time {
	d := time.Now().Add(c.s.lim.IdleTimeout)
	if c.hs != nil && !c.hs.Done() || c.mustAuthenticate() {
		d = minTime(d, c.start.Add(c.s.lim.HandshakeTimeout))
	}
	return d
}

// readFrame reads one frame after its length: a frame over smallFrame
// bytes waits for its share of FrameMemory first, and release gives it
// back.
func (c *conn) readFrame() (frame []byte, release func(), err error) {
	release = func() {}
	if err := c.nc.SetReadDeadline(c.readDeadline()); err != nil {
		return nil, release, err
	}
	var hdr [FrameLenSize]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return nil, release, err
	}
	n := int64(binary.BigEndian.Uint64(hdr[:]))
	if n <= frameHeaderMin-1 || n > int64(c.s.lim.MaxFrame) {
		return nil, release, fmt.Errorf("%w: %d, want [%d, %d]", errOversized, n, frameHeaderMin, c.s.lim.MaxFrame)
	}
	size := n - FrameLenSize
	deadline := minTime(time.Now().Add(c.s.lim.FrameTimeout), c.readDeadlineAfterHeader())
	if size <= smallFrame {
		if c.small == nil {
			c.small = make([]byte, smallFrame)
		}
		frame = c.small[:size]
	} else {
		ctx, cancel := contextUntil(deadline)
		err := c.s.frames.Acquire(ctx, size)
		cancel()
		if err != nil {
			return nil, release, fmt.Errorf("%w: a frame of %d bytes found no room in %d bytes of frame memory in time", errLimit, size, c.s.lim.FrameMemory)
		}
		release = func() { c.s.frames.Release(size) }
		frame = make([]byte, size)
	}
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		release()
		return nil, func() {}, err
	}
	if _, err := io.ReadFull(c.r, frame); err != nil {
		release()
		return nil, func() {}, err
	}
	return frame, release, nil
}

// readDeadlineAfterHeader is the handshake's end while one is due, else
// far away.
func (c *conn) readDeadlineAfterHeader() time.Time {
	if c.hs != nil && !c.hs.Done() || c.mustAuthenticate() {
		return c.start.Add(c.s.lim.HandshakeTimeout)
	}
	return time.Now().Add(c.s.lim.FrameTimeout)
}

// handle answers one request. An error closes the connection.
func (c *conn) handle(req Request) error {
	switch m := req.(type) {
	case *RpcRequest:
		return c.rpc(m)
	case *ChunkFetchRequest:
		if c.mustAuthenticate() || c.hs != nil && !c.hs.Done() {
			c.closeFor(metrics.CloseAuth)
			return errClose
		}
		return c.fetchChunk(m)
	case *StreamRequest:
		c.s.m.FetchFailures.WithLabelValues(metrics.FetchUnsupported).Inc()
		return c.writeFrame(AppendStreamFailure(c.out[:0], m.StreamID, "StreamRequest is not served by this shuffle daemon: fetch blocks with OpenBlocks or FetchShuffleBlocks"))
	case *OneWayMessage:
		// Nothing answers a one-way message; this server acts on none.
		c.s.m.FetchFailures.WithLabelValues(metrics.FetchUnsupported).Inc()
		return nil
	case *UploadStream:
		// Its body follows the frame outside it: the connection cannot
		// go on without reading it, and uploads are not served.
		c.s.m.FetchFailures.WithLabelValues(metrics.FetchUnsupported).Inc()
		c.closeFor(metrics.CloseMalformed)
		if err := c.writeFrame(AppendRpcFailure(c.out[:0], m.RequestID, "UploadStream is not served by this shuffle daemon; closing the connection")); err != nil {
			return err
		}
		return errClose
	case *MergedBlockMetaRequest:
		c.s.m.FetchFailures.WithLabelValues(metrics.FetchUnsupported).Inc()
		return c.writeFrame(AppendRpcFailure(c.out[:0], m.RequestID, "MergedBlockMetaRequest: push-based shuffle is not served by this shuffle daemon"))
	}
	return fmt.Errorf("blockserver: request %T not handled", req)
}

// rpc answers an RpcRequest: an authentication step, or a block-transfer
// message.
func (c *conn) rpc(m *RpcRequest) error {
	if len(m.Body) > 0 && (m.Body[0] == tagSASL || m.Body[0] == tagAuthEngine) {
		return c.authStep(m)
	}
	if c.hs != nil && !c.hs.Done() {
		c.s.m.AuthFailures.Inc()
		c.closeFor(metrics.CloseAuth)
		c.writeFrame(AppendRpcFailure(c.out[:0], m.RequestID, "authentication in progress: only authentication messages may be sent until it completes; closing the connection"))
		return errClose
	}
	if c.mustAuthenticate() {
		c.s.m.AuthFailures.Inc()
		c.closeFor(metrics.CloseAuth)
		c.writeFrame(AppendRpcFailure(c.out[:0], m.RequestID, "authentication required: this shuffle daemon serves only connections that authenticate first (spark.authenticate=true); closing the connection"))
		return errClose
	}
	body, err := c.message(m.Body)
	if err != nil {
		c.s.m.FetchFailures.WithLabelValues(failureReason(err)).Inc()
		return c.writeFrame(AppendRpcFailure(c.out[:0], m.RequestID, err.Error()))
	}
	return c.writeFrame(AppendRpcResponse(c.out[:0], m.RequestID, body))
}

// authStep hands an authentication message to the handshake.
func (c *conn) authStep(m *RpcRequest) error {
	fail := func(msg string) error {
		c.s.m.AuthFailures.Inc()
		c.closeFor(metrics.CloseAuth)
		c.writeFrame(AppendRpcFailure(c.out[:0], m.RequestID, msg))
		return errClose
	}
	switch {
	case c.s.cfg.Handshake == nil:
		return fail("authentication is not available on this shuffle daemon; closing the connection")
	case c.hs != nil && c.hs.Done():
		return fail("already authenticated; closing the connection")
	case c.hs == nil:
		c.hs = c.s.cfg.Handshake(c.s.cfg.Store.Secret)
	}
	reply, err := c.hs.Step(m.Body)
	if err != nil {
		c.s.log.Info("block server: authentication refused", "remote", c.nc.RemoteAddr(), "err", err)
		return fail("authentication failed; closing the connection")
	}
	if c.hs.Done() && c.hs.AppID() == "" {
		return fail("authentication failed; closing the connection")
	}
	if err := c.writeFrame(AppendRpcResponse(c.out[:0], m.RequestID, reply)); err != nil {
		return err
	}
	if !c.hs.Done() {
		return nil
	}
	c.app = c.hs.AppID()
	if ci := c.hs.Cipher(); ci != nil {
		// The client sends nothing between its last handshake message
		// and our answer to it: bytes already buffered are a client
		// that did not wait, whose bytes cannot be decrypted.
		if c.r.Buffered() > 0 {
			c.closeFor(metrics.CloseMalformed)
			return errClose
		}
		c.r = bufio.NewReaderSize(ci.WrapReader(c.nc), 4<<10)
		c.fw = ci.WrapWriter(c.nc)
		c.enc = true
	}
	return nil
}

// failureReason maps an error onto the "reason" label of FetchFailures.
func failureReason(err error) string {
	switch {
	case errors.Is(err, ErrNotAuthorized):
		return metrics.FetchNotAuthorized
	case errors.Is(err, ErrUnsupported):
		return metrics.FetchUnsupported
	case errors.Is(err, ErrMalformed), errors.Is(err, errBadRequest):
		return metrics.FetchBadRequest
	case errors.Is(err, errLimit):
		return metrics.FetchLimit
	case errors.Is(err, ErrUnknownExecutor), isNotExist(err):
		return metrics.FetchNotFound
	}
	return metrics.FetchIO
}

// writeFrame sends one whole frame, within WriteTimeout.
func (c *conn) writeFrame(b []byte) error {
	c.out = b
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.lim.WriteTimeout)); err != nil {
		return err
	}
	if c.enc {
		if err := c.fw.BeginFrame(int64(len(b))); err != nil {
			return err
		}
		_, err := c.fw.Write(b)
		return err
	}
	_, err := c.nc.Write(b)
	return err
}

// sendBody sends n bytes of f from off after a frame header already
// begun: with sendfile on a plain TCP connection, else through a send
// buffer.
func (c *conn) sendBody(f io.ReaderAt, off, n int64) error {
	if osf, ok := f.(*os.File); ok && c.tcp != nil && !c.enc {
		return c.sendFile(osf, off, n)
	}
	buf, err := c.s.getBuf(time.Now().Add(c.s.lim.WriteTimeout))
	if err != nil {
		return err
	}
	defer c.s.putBuf(buf)
	b := *buf
	var w io.Writer = c.nc
	if c.enc {
		w = c.fw
	}
	for n > 0 {
		k := min(int64(len(b)), n)
		if _, err := f.ReadAt(b[:k], off); err != nil {
			return fmt.Errorf("blockserver: reading the block: %w (connection closed: the client sees the frame cut)", err)
		}
		if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.lim.WriteTimeout)); err != nil {
			return err
		}
		if _, err := w.Write(b[:k]); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// sendFile sends n bytes of f from off with sendfile, a piece of at most
// sendPiece bytes at a time, each within WriteTimeout.
func (c *conn) sendFile(f *os.File, off, n int64) error {
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	for n > 0 {
		if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.lim.WriteTimeout)); err != nil {
			return err
		}
		k := min(n, sendPiece)
		sent, err := c.tcp.ReadFrom(&io.LimitedReader{R: f, N: k})
		n -= sent
		if err != nil {
			return err
		}
		if sent < k {
			return fmt.Errorf("blockserver: %s ended %d bytes before the block's end (connection closed: the client sees the frame cut)", f.Name(), n)
		}
	}
	return nil
}

func contextUntil(deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), deadline)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
