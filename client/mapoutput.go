package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/protocol"
	"golang.org/x/sys/unix"
)

var (
	// ErrUnsupported is returned for a data plane or payload kind the
	// daemon did not announce in its ServerHello.
	ErrUnsupported = errdefs.New(errdefs.ErrUnsupported, "client: not supported by the daemon")
	// ErrFinished is returned by calls on a map output after its Commit
	// or Abort.
	ErrFinished = errdefs.New(errdefs.ErrNotFound, "client: map output already committed or aborted")
	// ErrAfterLast is returned by a write after the one MarkLast
	// announced as the map output's last.
	ErrAfterLast = errdefs.New(errdefs.ErrFailedPrecondition, "client: the map output's last batch was already written")
)

// OutputOption configures one map output.
type OutputOption func(*MapOutput)

// WithPlane overrides the client's default data plane for one map output.
func WithPlane(p DataPlane) OutputOption {
	return func(m *MapOutput) { m.plane = p }
}

// MapOutput is one map task's output on the daemon. Its batches are
// written in the order of the Write calls, so the methods of one MapOutput
// are meant for one goroutine at a time; many MapOutputs of one Client may
// be used concurrently.
//
// A failed write leaves the map output aborted on the daemon (a write
// cancelled by its context may or may not have been applied), so every
// later Write and Commit returns that first error; Abort is always
// allowed.
type MapOutput struct {
	c      *Client
	req    protocol.OpenMapOutput
	handle uint64
	plane  DataPlane

	mu struct {
		sync.Mutex
		err      error // the first write error
		finished bool  // committed or aborted
		aborted  bool
		marked   bool // MarkLast: the next write is the last
		lastDone bool // the last write went out: no other may follow
	}
}

// MarkLast says that the next write is the map output's last batch. The
// client sends it with the LAST flag (docs/protocol.md, Batch) when the
// daemon announced feature last-batch, so that a map output of several
// runs starts merging them while that batch is compressed instead of at
// Commit; it changes no byte of the output. Once that write has gone out,
// further writes return ErrAfterLast without sending anything; Commit and
// Abort work as before.
func (m *MapOutput) MarkLast() {
	m.mu.Lock()
	m.mu.marked = true
	m.mu.Unlock()
}

// Open starts a map output. If ctx ends after the request went out, the
// daemon's late answer is aborted in the background.
func (c *Client) Open(ctx context.Context, req protocol.OpenMapOutput, opts ...OutputOption) (*MapOutput, error) {
	m := &MapOutput{c: c, req: req, plane: c.opts.plane}
	for _, opt := range opts {
		opt(m)
	}
	switch m.plane {
	case PlaneInline:
	case PlaneMemfd:
		if c.hello.Features&protocol.FeatureMemfd == 0 {
			m.plane = PlaneInline
		}
	default:
		return nil, fmt.Errorf("client: unknown data plane %d", uint8(m.plane))
	}
	if req.Kind == protocol.KindColumnar && c.hello.Features&protocol.FeatureColumnar == 0 {
		return nil, fmt.Errorf("%w: columnar map outputs", ErrUnsupported)
	}
	if req.Flags&protocol.OpenEncrypt != 0 && c.hello.Features&protocol.FeatureIOEncryption == 0 {
		return nil, fmt.Errorf("%w: IO encryption (the daemon does not announce it)", ErrUnsupported)
	}
	resp, err := c.roundTrip(ctx, &req, -1, protocol.TypeOpened, c.abortLate)
	if err != nil {
		return nil, fmt.Errorf("client: open map output %d/%d: %w", req.ShuffleID, req.MapID, err)
	}
	m.handle = resp.(*protocol.Opened).Handle
	return m, nil
}

// abortLate aborts a map output whose Open the caller gave up on.
func (c *Client) abortLate(f protocol.Frame) {
	var o protocol.Opened
	if f.Type != protocol.TypeOpened || o.Unmarshal(f.Payload) != nil {
		return
	}
	c.roundTrip(context.Background(), &protocol.Abort{Handle: o.Handle}, -1, protocol.TypeAborted, nil)
}

// Handle returns the daemon's handle of the map output.
func (m *MapOutput) Handle() uint64 { return m.handle }

// Plane returns the data plane the map output's Write calls use.
func (m *MapOutput) Plane() DataPlane { return m.plane }

func (m *MapOutput) String() string {
	return fmt.Sprintf("map output %d/%d", m.req.ShuffleID, m.req.MapID)
}

// WriteOpaque writes one batch of already serialized partitions:
// partition p is data[partitionOffsets[p]:partitionOffsets[p+1]], with
// NumPartitions+1 offsets, the first 0 and the last len(data). It returns
// once the daemon no longer needs data.
func (m *MapOutput) WriteOpaque(ctx context.Context, data []byte, partitionOffsets []int64) error {
	b := &protocol.Batch{Kind: protocol.KindOpaque, Opaque: protocol.OpaqueLayout{PartitionOffsets: partitionOffsets}}
	return m.writeBytes(ctx, b, data)
}

// WriteColumnar writes one columnar batch: payload holds the column
// buffers that layout locates. It returns once the daemon no longer needs
// payload.
func (m *MapOutput) WriteColumnar(ctx context.Context, payload []byte, layout protocol.ColumnarLayout) error {
	b := &protocol.Batch{Kind: protocol.KindColumnar, Columnar: layout}
	return m.writeBytes(ctx, b, payload)
}

// WriteOpaqueMemfd is WriteOpaque with the payload in f (all of it),
// passed without a copy. f is sealed first if it is not yet.
func (m *MapOutput) WriteOpaqueMemfd(ctx context.Context, f *Memfd, partitionOffsets []int64) error {
	b := &protocol.Batch{Kind: protocol.KindOpaque, Opaque: protocol.OpaqueLayout{PartitionOffsets: partitionOffsets}}
	return m.writeMemfd(ctx, b, f)
}

// WriteColumnarMemfd is WriteColumnar with the payload in f (all of it),
// passed without a copy. f is sealed first if it is not yet.
func (m *MapOutput) WriteColumnarMemfd(ctx context.Context, f *Memfd, layout protocol.ColumnarLayout) error {
	b := &protocol.Batch{Kind: protocol.KindColumnar, Columnar: layout}
	return m.writeMemfd(ctx, b, f)
}

func (m *MapOutput) writeBytes(ctx context.Context, b *protocol.Batch, data []byte) error {
	if m.plane == PlaneInline {
		if len(data) > int(m.c.hello.MaxInline) {
			return fmt.Errorf("%w: %v: inline batch of %d bytes exceeds max_inline %d", ErrTooLarge, m, len(data), m.c.hello.MaxInline)
		}
		b.Plane = protocol.PlaneInline
		b.Inline = data
		if err := m.check(b); err != nil {
			return err
		}
		return m.send(ctx, b, -1)
	}
	b.Plane = protocol.PlaneMemfd
	b.Region = protocol.Region{Length: int64(len(data))}
	if err := m.check(b); err != nil {
		return err // before paying for the memfd
	}
	fd, err := sealedCopy(data)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return m.send(ctx, b, fd)
}

func (m *MapOutput) writeMemfd(ctx context.Context, b *protocol.Batch, f *Memfd) error {
	if m.c.hello.Features&protocol.FeatureMemfd == 0 {
		return fmt.Errorf("%w: memfd batches", ErrUnsupported)
	}
	if err := f.Seal(); err != nil {
		return err
	}
	b.Plane = protocol.PlaneMemfd
	b.Region = protocol.Region{Length: int64(f.size)}
	if err := m.check(b); err != nil {
		return err
	}
	return m.send(ctx, b, f.fd)
}

// check refuses, without sending anything, a batch that is malformed or
// does not fit the map output.
func (m *MapOutput) check(b *protocol.Batch) error {
	b.Handle = m.handle
	if b.Kind != m.req.Kind {
		return fmt.Errorf("client: %v: %v batch for a %v map output", m, b.Kind, m.req.Kind)
	}
	n := len(b.Opaque.PartitionOffsets)
	if b.Kind == protocol.KindColumnar {
		n = len(b.Columnar.PartitionRows)
	}
	if n != int(m.req.NumPartitions)+1 {
		return fmt.Errorf("client: %v: %d partition offsets, want %d (partitions+1)", m, n, m.req.NumPartitions+1)
	}
	if err := b.Validate(); err != nil {
		return fmt.Errorf("client: %v: %w", m, err)
	}
	if err := m.state(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.lastDone {
		return fmt.Errorf("%w: %v", ErrAfterLast, m)
	}
	if m.mu.marked && m.c.hello.Features&protocol.FeatureLastBatch != 0 {
		b.Flags |= protocol.BatchLast
	}
	return nil
}

func (m *MapOutput) state() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.finished {
		return fmt.Errorf("%w: %v", ErrFinished, m)
	}
	if m.mu.err != nil {
		return fmt.Errorf("client: %v: an earlier write failed: %w", m, m.mu.err)
	}
	return nil
}

// send sends a batch that check passed.
func (m *MapOutput) send(ctx context.Context, b *protocol.Batch, fd int) error {
	_, err := m.c.roundTrip(ctx, b, fd, protocol.TypeBatchAccepted, nil)
	if !errors.Is(err, errNotSent) {
		m.mu.Lock()
		m.mu.lastDone = m.mu.marked
		m.mu.Unlock()
	}
	if err != nil {
		if errors.Is(err, errNotSent) {
			return fmt.Errorf("client: %v: %w", m, err)
		}
		m.mu.Lock()
		if m.mu.err == nil {
			m.mu.err = err
		}
		m.mu.Unlock()
		return fmt.Errorf("client: %v: write batch: %w", m, err)
	}
	return nil
}

// Commit finishes the map output: the daemon waits for its batches,
// merges its runs and commits Spark's files. A daemon error comes back as
// a *protocol.Error; either way the map output is finished.
func (m *MapOutput) Commit(ctx context.Context) (protocol.CommitResult, error) {
	if err := m.state(); err != nil {
		return protocol.CommitResult{}, err
	}
	resp, err := m.c.roundTrip(ctx, &protocol.Commit{Handle: m.handle}, -1, protocol.TypeCommitResult, nil)
	if err == nil || errors.As(err, new(*protocol.Error)) {
		m.mu.Lock()
		m.mu.finished = true
		m.mu.Unlock()
	}
	if err != nil {
		return protocol.CommitResult{}, fmt.Errorf("client: commit %v: %w", m, err)
	}
	return *resp.(*protocol.CommitResult), nil
}

// Abort discards the map output. Aborting one that the daemon already
// dropped (after an error, or an earlier Abort) succeeds; aborting one
// after Commit returns ErrFinished.
func (m *MapOutput) Abort(ctx context.Context) error {
	m.mu.Lock()
	finished, aborted := m.mu.finished, m.mu.aborted
	m.mu.Unlock()
	if aborted {
		return nil
	}
	if finished {
		return fmt.Errorf("%w: %v", ErrFinished, m)
	}
	_, err := m.c.roundTrip(ctx, &protocol.Abort{Handle: m.handle}, -1, protocol.TypeAborted, nil)
	switch protocol.CodeOf(err) {
	case protocol.CodeOK, protocol.CodeNotFound, protocol.CodeAborted:
		if err == nil || errors.As(err, new(*protocol.Error)) {
			m.mu.Lock()
			m.mu.finished, m.mu.aborted = true, true
			m.mu.Unlock()
			return nil
		}
	}
	return fmt.Errorf("client: abort %v: %w", m, err)
}
