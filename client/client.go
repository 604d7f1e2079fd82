// Package client is the executor side of the shuffled daemon: it dials the
// daemon's Unix socket, registers the executor, and hands map outputs'
// batches over inline or as sealed memfds.
//
// One Client carries many map tasks at once: requests are pipelined on one
// connection and matched to their responses by request id. The main
// invariant: whatever callers do (cancel, give up, race), the byte stream
// stays well formed. A frame, once its first byte is written, is written
// whole; a caller that cancels only stops waiting for its response, and
// losing the connection fails every waiting call.
//
// A caller that knows which write is a map output's last calls
// MapOutput.MarkLast before it: the daemon then merges a map output of
// several runs while that batch is compressed, not after Commit.
//
// The package imports only protocol: executors link a small client, not
// the daemon.
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/protocol"
	"golang.org/x/sys/unix"
)

var (
	// ErrClosed is returned by calls on a Client after Close.
	ErrClosed = errdefs.New(errdefs.ErrFailedPrecondition, "client: closed")
	// ErrConnLost wraps the cause when the connection to the daemon fails;
	// every call waiting at that moment, and every later one, returns it.
	ErrConnLost = errdefs.New(errdefs.ErrUnavailable, "client: connection lost")
	// ErrTooLarge is returned, before anything is sent, for a request that
	// exceeds the limits the daemon announced.
	ErrTooLarge = errdefs.New(errdefs.ErrResourceExhausted, "client: request exceeds the daemon's limits")
	// ErrBadResponse means the daemon answered with a frame that does not
	// fit the request.
	ErrBadResponse = errdefs.New(errdefs.ErrInternal, "client: unexpected response")

	// errNotSent marks a write refused before its first byte went out:
	// the connection is intact.
	errNotSent = errors.New("not sent")
)

// DataPlane chooses how batch payloads travel to the daemon.
type DataPlane uint8

const (
	// PlaneInline copies payloads through the socket; every daemon takes it.
	PlaneInline DataPlane = iota
	// PlaneMemfd copies each payload once into a sealed memfd and passes its
	// descriptor; the daemon maps it read-only. Falls back to Inline when
	// the daemon does not announce protocol.FeatureMemfd.
	PlaneMemfd
)

func (p DataPlane) String() string {
	switch p {
	case PlaneInline:
		return "inline"
	case PlaneMemfd:
		return "memfd"
	}
	return fmt.Sprintf("DataPlane(%d)", uint8(p))
}

type options struct {
	name     string
	maxFrame uint32
	plane    DataPlane
}

// Option configures Dial.
type Option func(*options) error

// WithName sets the client name sent in Hello (logs only).
func WithName(name string) Option {
	return func(o *options) error {
		if len(name) > protocol.MaxClientNameLen {
			return fmt.Errorf("client: name of %d bytes exceeds %d", len(name), protocol.MaxClientNameLen)
		}
		o.name = name
		return nil
	}
}

// WithMaxFrame bounds the responses the client reads (default
// protocol.DefaultMaxFrame); a larger one closes the connection.
func WithMaxFrame(n uint32) Option {
	return func(o *options) error {
		if n < protocol.MinMaxFrame {
			return fmt.Errorf("client: max frame %d below %d", n, protocol.MinMaxFrame)
		}
		o.maxFrame = n
		return nil
	}
}

// WithDataPlane sets the default data plane of map outputs (default
// PlaneInline); Open can override it per map output.
func WithDataPlane(p DataPlane) Option {
	return func(o *options) error {
		if p != PlaneInline && p != PlaneMemfd {
			return fmt.Errorf("client: unknown data plane %d", uint8(p))
		}
		o.plane = p
		return nil
	}
}

// Client is a connection to the daemon. It is safe for concurrent use.
type Client struct {
	conn  *net.UnixConn
	rd    *protocol.Reader
	hello protocol.ServerHello
	opts  options

	// wlock serializes frame writes: holding it means owning conn's write
	// side and wbuf. A channel rather than a mutex so that waiting for it
	// can be cancelled.
	wlock chan struct{}
	wbuf  []byte

	done       chan struct{} // closed when the connection has failed or closed
	readerDone chan struct{}
	late       sync.WaitGroup // clean-up calls for abandoned requests

	mu struct {
		sync.Mutex
		err     error // why done was closed
		nextID  uint32
		pending map[uint32]*call
	}
}

// call is one outstanding request.
type call struct {
	resp chan response // buffered 1; gets exactly one value
	// abandoned is set, under Client.mu, when the caller stopped waiting;
	// the reader then hands a late response to onLate instead.
	abandoned bool
	onLate    func(protocol.Frame)
}

type response struct {
	frame protocol.Frame
	err   error
}

// Dial connects to the daemon's socket and performs the handshake. ctx
// bounds the connect and the handshake only.
func Dial(ctx context.Context, socketPath string, opts ...Option) (*Client, error) {
	o := options{name: "shuffled-go-client", maxFrame: protocol.DefaultMaxFrame}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", socketPath, err)
	}
	conn := nc.(*net.UnixConn)
	c := &Client{
		conn:       conn,
		rd:         protocol.NewReader(conn, o.maxFrame),
		opts:       o,
		wlock:      make(chan struct{}, 1),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	c.mu.pending = make(map[uint32]*call)
	if err := c.handshake(ctx); err != nil {
		c.rd.Close()
		conn.Close()
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

func (c *Client) handshake(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	hello := &protocol.Hello{MinVersion: protocol.MinVersion, MaxVersion: protocol.MaxVersion, Client: c.opts.name}
	if err := protocol.WriteFrame(c.conn, 1, hello); err != nil {
		// A daemon that refuses the peer (not allowed, too many
		// connections) sends an id-0 Error as it accepts and closes, which
		// may fail the write: its reason is the answer, when it came.
		return c.handshakeErr(ctx, c.refusal(err))
	}
	f, err := c.rd.ReadFrame(nil)
	if err != nil {
		return c.handshakeErr(ctx, err)
	}
	m, err := protocol.DecodeFrame(&f)
	if err != nil {
		return fmt.Errorf("client: handshake: %w", err)
	}
	switch m := m.(type) {
	case *protocol.ServerHello:
		if f.ID != 1 {
			return fmt.Errorf("%w: ServerHello with request id %d, want 1", ErrBadResponse, f.ID)
		}
		if m.Version < protocol.MinVersion || m.Version > protocol.MaxVersion {
			return fmt.Errorf("%w: daemon chose version %d, client speaks %d..%d", ErrBadResponse, m.Version, protocol.MinVersion, protocol.MaxVersion)
		}
		c.hello = *m
	case *protocol.Error:
		return m
	default:
		return fmt.Errorf("%w: %v in answer to Hello", ErrBadResponse, f.Type)
	}
	if !stop() {
		return ctx.Err() // cancelled just now: the deadline was cut
	}
	return c.conn.SetDeadline(time.Time{})
}

// refusal returns the Error the daemon sent before the connection closed,
// if any is there to read, else werr (the failed write's error).
func (c *Client) refusal(werr error) error {
	c.conn.SetReadDeadline(time.Now().Add(time.Second))
	f, err := c.rd.ReadFrame(nil)
	if err != nil {
		return werr
	}
	var e protocol.Error
	if f.Type == protocol.TypeError && e.Unmarshal(f.Payload) == nil {
		return &e
	}
	return werr
}

func (c *Client) handshakeErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("client: handshake: %w", ctx.Err())
	}
	return fmt.Errorf("client: handshake: %w", err)
}

// ServerHello returns the daemon's handshake answer: version, limits,
// features.
func (c *Client) ServerHello() protocol.ServerHello { return c.hello }

// readLoop delivers responses to their callers until the connection ends.
func (c *Client) readLoop() {
	defer close(c.readerDone)
	defer c.rd.Close()
	for {
		f, err := c.rd.ReadFrame(nil)
		if err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrConnLost, err))
			return
		}
		if f.FD >= 0 {
			unix.Close(f.FD) // the daemon never passes descriptors
		}
		if f.ID == 0 {
			// A connection-level error: the daemon closes next.
			var e protocol.Error
			if f.Type == protocol.TypeError && e.Unmarshal(f.Payload) == nil {
				c.fail(fmt.Errorf("%w: %w", ErrConnLost, &e))
			} else {
				c.fail(fmt.Errorf("%w: %w: %v frame with request id 0", ErrConnLost, ErrBadResponse, f.Type))
			}
			continue
		}
		c.mu.Lock()
		cl := c.mu.pending[f.ID]
		delete(c.mu.pending, f.ID)
		abandoned := cl != nil && cl.abandoned
		c.mu.Unlock()
		switch {
		case cl == nil:
			// A response to nothing we asked: ignore it rather than guess.
		case abandoned:
			if cl.onLate != nil {
				c.late.Add(1)
				go func() {
					defer c.late.Done()
					cl.onLate(f)
				}()
			}
		default:
			cl.resp <- response{frame: f}
		}
	}
}

// fail ends the connection with err (the first reason wins) and fails
// every waiting call.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.mu.err != nil {
		c.mu.Unlock()
		return
	}
	c.mu.err = err
	waiting := make([]*call, 0, len(c.mu.pending))
	for _, cl := range c.mu.pending {
		if !cl.abandoned {
			waiting = append(waiting, cl)
		}
	}
	clear(c.mu.pending)
	close(c.done)
	c.mu.Unlock()
	c.conn.Close()
	for _, cl := range waiting {
		cl.resp <- response{err: err}
	}
}

// Close closes the connection: waiting calls fail with ErrClosed, and the
// daemon aborts the map outputs still open on it. Close waits for the
// client's goroutines to end.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	<-c.readerDone
	c.late.Wait()
	return nil
}

// roundTrip sends req (with fd when req wants one) and waits for the
// response of type want, returned decoded. A *protocol.Error from the
// daemon is returned as is. onLate, if set, receives the response, on a
// goroutine of its own, should the caller give up waiting after the
// request was sent.
func (c *Client) roundTrip(ctx context.Context, req protocol.Message, fd int, want protocol.Type, onLate func(protocol.Frame)) (protocol.Message, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	cl := &call{resp: make(chan response, 1), onLate: onLate}
	id, err := c.register(cl)
	if err != nil {
		return nil, err
	}
	select {
	case c.wlock <- struct{}{}:
	case <-ctx.Done(): // nothing went out: the map output stays usable
		c.forget(id)
		return nil, fmt.Errorf("%w: %w", errNotSent, ctx.Err())
	case <-c.done:
		c.forget(id)
		return nil, c.connErr()
	}
	err = c.write(id, req, fd)
	<-c.wlock
	if errors.Is(err, errNotSent) {
		c.forget(id)
		return nil, err
	}
	if err != nil {
		c.fail(fmt.Errorf("%w: %w", ErrConnLost, err))
		c.forget(id)
		return nil, c.connErr()
	}

	var r response
	select {
	case r = <-cl.resp:
	case <-ctx.Done():
		c.mu.Lock()
		_, waiting := c.mu.pending[id]
		if waiting {
			cl.abandoned = true
		}
		c.mu.Unlock()
		if waiting {
			return nil, ctx.Err()
		}
		r = <-cl.resp // the response (or failure) won the race: use it
	}
	if r.err != nil {
		return nil, r.err
	}
	return decodeResponse(r.frame, want)
}

func decodeResponse(f protocol.Frame, want protocol.Type) (protocol.Message, error) {
	if f.Type != want && f.Type != protocol.TypeError {
		return nil, fmt.Errorf("%w: %v in answer to %v", ErrBadResponse, f.Type, want&^0x8000)
	}
	m, err := protocol.Decode(f.Type, f.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	if e, ok := m.(*protocol.Error); ok {
		return nil, e
	}
	return m, nil
}

// register assigns a request id to cl.
func (c *Client) register(cl *call) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.err != nil {
		return 0, c.mu.err
	}
	for {
		c.mu.nextID++
		id := c.mu.nextID
		if _, busy := c.mu.pending[id]; id != 0 && !busy {
			c.mu.pending[id] = cl
			return id, nil
		}
	}
}

func (c *Client) forget(id uint32) {
	c.mu.Lock()
	delete(c.mu.pending, id)
	c.mu.Unlock()
}

func (c *Client) connErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}

// maxWbuf bounds the write buffer kept between requests.
const maxWbuf = 1 << 20

// write sends one frame; the caller holds wlock. Inline batch bytes go
// out with writev, never copied into the buffer.
func (c *Client) write(id uint32, m protocol.Message, fd int) error {
	buf := append(c.wbuf[:0], make([]byte, protocol.HeaderSize)...)
	var tail []byte
	if b, ok := m.(*protocol.Batch); ok && b.Plane == protocol.PlaneInline {
		buf = b.AppendHead(buf)
		tail = b.Inline
	} else {
		buf = m.Append(buf)
	}
	n := len(buf) - protocol.HeaderSize + len(tail)
	if n > int(c.hello.MaxFrame) {
		return fmt.Errorf("%w: %w: %v frame of %d bytes exceeds max_frame %d", ErrTooLarge, errNotSent, m.Type(), n, c.hello.MaxFrame)
	}
	h := protocol.Header{Type: m.Type(), ID: id, Length: uint32(n)}
	if protocol.WantsFD(m) {
		h.Flags |= protocol.FlagFD
	}
	h.Append(buf[:0])
	if cap(buf) <= maxWbuf {
		c.wbuf = buf
	}
	var err error
	switch {
	case h.Flags&protocol.FlagFD != 0:
		err = protocol.WriteFrameFD(c.conn, buf, fd)
	case tail != nil:
		bufs := net.Buffers{buf, tail}
		_, err = bufs.WriteTo(c.conn)
	default:
		_, err = c.conn.Write(buf)
	}
	return err
}

// Register names the executor this connection writes for and where its
// map outputs go; it must precede Open. The result lists the directories
// the daemon resolved. To a daemon that announces FeatureServing it always
// sends the auth tail (req.AuthSecret, empty when the application has no
// secret), and the result then says where the daemon serves map outputs
// (Registered.Serve); a secret for a daemon without the feature is
// ErrUnsupported.
func (c *Client) Register(ctx context.Context, req protocol.RegisterExecutor) (protocol.Registered, error) {
	if len(req.IOEncryptionKey) > 0 && c.hello.Features&protocol.FeatureIOEncryption == 0 {
		return protocol.Registered{}, fmt.Errorf("%w: IO encryption (the daemon does not announce it)", ErrUnsupported)
	}
	req.WithAuth = c.hello.Features&protocol.FeatureServing != 0
	if len(req.AuthSecret) > 0 && !req.WithAuth {
		return protocol.Registered{}, fmt.Errorf("%w: an authentication secret (the daemon does not announce serving)", ErrUnsupported)
	}
	m, err := c.roundTrip(ctx, &req, -1, protocol.TypeRegistered, nil)
	if err != nil {
		return protocol.Registered{}, err
	}
	return *m.(*protocol.Registered), nil
}

// Ping checks that the daemon answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.roundTrip(ctx, &protocol.Ping{}, -1, protocol.TypePong, nil)
	return err
}

// Stats returns the daemon's figures.
func (c *Client) Stats(ctx context.Context) ([]protocol.Stat, error) {
	m, err := c.roundTrip(ctx, &protocol.Stats{}, -1, protocol.TypeStatsResult, nil)
	if err != nil {
		return nil, err
	}
	return m.(*protocol.StatsResult).Stats, nil
}

// RemoveShuffle deletes every map output of one shuffle of an application,
// committed or in flight, and returns what it freed. Removing again frees
// nothing and is no error.
func (c *Client) RemoveShuffle(ctx context.Context, appID string, shuffleID int32) (protocol.Removed, error) {
	m, err := c.roundTrip(ctx, &protocol.RemoveShuffle{AppID: appID, ShuffleID: shuffleID}, -1, protocol.TypeShuffleRemoved, nil)
	if err != nil {
		return protocol.Removed{}, err
	}
	return m.(*protocol.ShuffleRemoved).Removed, nil
}

// RemoveApplication deletes every map output of an application, committed
// or in flight, and returns what it freed.
func (c *Client) RemoveApplication(ctx context.Context, appID string) (protocol.Removed, error) {
	m, err := c.roundTrip(ctx, &protocol.RemoveApplication{AppID: appID}, -1, protocol.TypeApplicationRemoved, nil)
	if err != nil {
		return protocol.Removed{}, err
	}
	return m.(*protocol.ApplicationRemoved).Removed, nil
}

// ListShuffles returns the shuffles of an application that have committed
// map outputs, ascending by id, with their bytes on disk.
func (c *Client) ListShuffles(ctx context.Context, appID string) ([]protocol.ShuffleInfo, error) {
	m, err := c.roundTrip(ctx, &protocol.ListShuffles{AppID: appID}, -1, protocol.TypeShuffleList, nil)
	if err != nil {
		return nil, err
	}
	return m.(*protocol.ShuffleList).Shuffles, nil
}

// ListApplications returns the applications the connection's user may see,
// ascending by id: its own, or every one for root and the daemon's user.
func (c *Client) ListApplications(ctx context.Context) ([]protocol.ApplicationInfo, error) {
	m, err := c.roundTrip(ctx, &protocol.ListApplications{}, -1, protocol.TypeApplicationList, nil)
	if err != nil {
		return nil, err
	}
	return m.(*protocol.ApplicationList).Applications, nil
}
