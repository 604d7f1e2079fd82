//go:build cuda

package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"golang.org/x/sys/unix"
)

// deviceFeatures are the ServerHello features of the GPU data plane.
const deviceFeatures = protocol.FeatureCUDAIPC

// Staging of device batches: chunks of StagingChunk bytes, at most
// StagingChunks out at once across the daemon (128 MiB pinned), pinned on
// first use. 16 MiB chunks keep a copy's fixed cost (queueing it, hearing
// that it landed: tens of µs) small against its transfer (~300 µs) when
// compression holds the copies back to one at a time.
const (
	StagingChunk  = 16 << 20
	StagingChunks = 8
	// maxPeersPerConn bounds the IPC mappings one connection holds;
	// it lets go of the oldest to make room.
	maxPeersPerConn = 32
)

// devicePlanes is what the daemon's connections share of the GPU data
// plane.
type devicePlanes struct {
	// devices are the CUDA devices, opened at the first batch that names
	// each: a context costs about a tenth of a second, and a daemon that
	// never sees a device batch never pays for one, unless
	// Config.CUDAStagingPrime opens them all at startup.
	devices struct {
		mu sync.Mutex
		m  map[uint32]*deviceState
	}
	// mappings are the IPC mappings, shared by the connections that name
	// the same allocation: CUDA maps another process's allocation once
	// per context (opening a handle that is already open fails), and one
	// executor's tasks on several connections hand over the same
	// allocations. A mapping is closed when the last connection that
	// holds it lets go.
	mappings struct {
		mu sync.Mutex
		m  map[peerKey]*sharedPeer
	}
	// d2h counts the bytes the daemon copied device to host and the time
	// the copies of whole batches took, admission and hand-off included.
	d2h struct {
		bytes, nanos atomic.Int64
	}
	// compressed counts what the GPU compressed (gpuCompressed).
	compressed gpuCompressed
}

// deviceConn is a connection's share of the GPU data plane: the IPC
// mappings it uses, made at its first device batch.
type deviceConn struct {
	peers    *peerCache
	released chan struct{} // closed once the connection's mappings are let go
}

// deviceState is one device's context, staging pool, compressor and
// host readers, shared by every connection.
type deviceState struct {
	dev  *gpu.Device
	pool *gpu.Pool
	comp compressorOnce
	// readers are the host readers not in use (hostReader), at most
	// maxHostReaders; closed, with the device, once Planes.Close has
	// taken them.
	readers chan *gpu.HostReader
}

// deviceFor returns the device a batch names, opening it at the first
// batch that does.
func (p *Planes) deviceFor(ordinal uint32) (*deviceState, error) {
	ds, err := p.startDevice(ordinal)
	if errors.Is(err, gpu.ErrInvalid) {
		return nil, fmt.Errorf("%w: Batch.IPC.Device: %v", errdefs.ErrInvalidArgument, err)
	}
	return ds, err
}

// Pool returns device ordinal's staging pool, opening the device if no
// batch has (its figures, for tests and benchmarks).
func (p *Planes) Pool(ordinal uint32) (*gpu.Pool, error) {
	ds, err := p.deviceFor(ordinal)
	if err != nil {
		return nil, err
	}
	return ds.pool, nil
}

// startDevice returns device ordinal's context and staging pool, creating
// them the first time. The pool pins its chunks as they are first used;
// prime pins them all at once.
func (p *Planes) startDevice(ordinal uint32) (*deviceState, error) {
	devices := &p.dev.devices
	devices.mu.Lock()
	defer devices.mu.Unlock()
	if ds := devices.m[ordinal]; ds != nil {
		return ds, nil
	}
	dev, err := gpu.Open(int(ordinal))
	if err != nil {
		return nil, err
	}
	pool, err := gpu.NewPool(dev, gpu.WithChunkSize(StagingChunk), gpu.WithMaxChunks(StagingChunks))
	if err != nil {
		dev.Close()
		return nil, err
	}
	if devices.m == nil {
		devices.m = make(map[uint32]*deviceState)
	}
	ds := &deviceState{dev: dev, pool: pool, readers: make(chan *gpu.HostReader, maxHostReaders)}
	devices.m[ordinal] = ds
	return ds, nil
}

// Close closes the devices opened, their compressors and staging pools:
// the daemon has stopped, and every connection has let go of its
// mappings (Conn.Close).
func (p *Planes) Close() error {
	devices := &p.dev.devices
	devices.mu.Lock()
	defer devices.mu.Unlock()
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for ordinal, ds := range devices.m {
		if ds.comp.c != nil {
			keep(ds.comp.c.Close())
		}
		keep(ds.closeReaders())
		keep(ds.pool.Close())
		keep(ds.dev.Close())
		delete(devices.m, ordinal)
	}
	return first
}

// prime pins every chunk the staging pool may hand out, by taking them
// all and giving them back, so that no batch waits for pinning.
func (ds *deviceState) prime(ctx context.Context) error {
	held := make([]*gpu.Staged, 0, StagingChunks)
	defer func() {
		for _, s := range held {
			s.Release()
		}
	}()
	for range StagingChunks {
		s, err := ds.pool.Get(ctx, StagingChunk)
		if err != nil {
			return err
		}
		held = append(held, s)
	}
	return nil
}

// Prime, with Config.CUDAStagingPrime, opens every CUDA device of the
// process and pins its staging pool before the daemon serves: time to
// READY grows by a context and StagingChunks×StagingChunk bytes of pinning
// per device, which the first device batch then no longer pays.
func (p *Planes) Prime() error {
	if !p.cfg.CUDAStagingPrime {
		return nil
	}
	start := time.Now()
	var n uint32
	for ; ; n++ {
		ds, err := p.startDevice(n)
		if errors.Is(err, gpu.ErrInvalid) && n > 0 {
			break // past the last device
		}
		if err == nil {
			err = ds.prime(context.Background())
		}
		if err != nil {
			return fmt.Errorf("server: --cuda-staging-prime: device %d: %w", n, err)
		}
	}
	// StagingChunk×StagingChunks is whole MiB, written as the daemon's
	// flags write sizes.
	p.cfg.Log.Info("primed CUDA staging", "devices", n,
		"pinned_per_device", strconv.Itoa(StagingChunk*StagingChunks>>20)+"MiB", "took", time.Since(start))
	return nil
}

// peerCache holds the IPC mappings one connection uses: each allocation
// is looked up once, and the connection's references are dropped when it
// ends. mu is held through a batch's copies, so the connection's end waits
// for them.
type peerCache struct {
	planes *Planes
	mu     sync.Mutex
	closed bool
	peers  map[peerKey]*gpu.Peer
	order  []peerKey // oldest first
}

type peerKey struct {
	device uint32
	handle gpu.IPCHandle
}

type sharedPeer struct {
	peer *gpu.Peer
	refs int // connections holding it
}

// acquirePeer returns the mapping of k, opening it if no connection holds
// it, and counts one more holder.
func (p *Planes) acquirePeer(ds *deviceState, k peerKey) (*gpu.Peer, error) {
	mappings := &p.dev.mappings
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	if sp := mappings.m[k]; sp != nil {
		sp.refs++
		return sp.peer, nil
	}
	peer, err := ds.dev.OpenIPC(k.handle)
	if err != nil {
		return nil, fmt.Errorf("%w: Batch.IPC.Handle: %v", errdefs.ErrInvalidArgument, err)
	}
	if mappings.m == nil {
		mappings.m = make(map[peerKey]*sharedPeer)
	}
	mappings.m[k] = &sharedPeer{peer: peer, refs: 1}
	return peer, nil
}

// releasePeer counts one holder of k less and closes the mapping after
// the last.
func (p *Planes) releasePeer(k peerKey) {
	mappings := &p.dev.mappings
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	sp := mappings.m[k]
	if sp == nil {
		return
	}
	if sp.refs--; sp.refs == 0 {
		sp.peer.Close()
		delete(mappings.m, k)
	}
}

// peers returns the connection's mappings, made on its first device
// batch. When the connection's context ends they are let go (once the
// batch copying from them ends), and log hears the daemon's device totals.
func (c *Conn) peers(log *slog.Logger) *peerCache {
	if c.dev.peers != nil {
		return c.dev.peers
	}
	pc := &peerCache{planes: c.p, peers: make(map[peerKey]*gpu.Peer)}
	released := make(chan struct{})
	c.dev.peers, c.dev.released = pc, released
	context.AfterFunc(c.ctx, func() {
		defer close(released)
		c.p.logDeviceTotals(log)
		pc.mu.Lock()
		defer pc.mu.Unlock()
		pc.closed = true
		for _, k := range pc.order {
			c.p.releasePeer(k)
		}
		pc.peers, pc.order = nil, nil
	})
	return pc
}

// closeDevices waits for the connection's mappings to be let go (its
// context is done).
func (c *Conn) closeDevices() {
	if c.dev.released != nil {
		<-c.dev.released
	}
}

// open returns the mapping of an allocation, taking a reference the
// first time the connection names it; past maxPeersPerConn it drops
// its oldest. The caller holds pc.mu.
func (pc *peerCache) open(ds *deviceState, k peerKey) (*gpu.Peer, error) {
	if p := pc.peers[k]; p != nil {
		return p, nil
	}
	p, err := pc.planes.acquirePeer(ds, k)
	if err != nil {
		return nil, err
	}
	if len(pc.order) >= maxPeersPerConn {
		old := pc.order[0]
		pc.order = pc.order[1:]
		delete(pc.peers, old)
		pc.planes.releasePeer(old)
	}
	pc.peers[k] = p
	pc.order = append(pc.order, k)
	return p, nil
}

// deviceBatch applies a batch in the client's device memory: it maps the
// allocation (once per daemon, while connections name it), copies the
// payload into pinned staging buffers that the limiter admits while they
// land, and hands them to the writer. Opaque payloads go chunk by chunk,
// the next chunks landing while the ones before are compressed; a
// columnar payload lands whole, since its records read every column. It
// returns once nothing reads the device memory any more, so BatchAccepted
// tells the client it may reuse it.
func (c *Conn) deviceBatch(log *slog.Logger, out *Output, m *protocol.Batch, fd int) (int64, error) {
	if fd >= 0 {
		unix.Close(fd)
	}
	ds, err := c.p.deviceFor(m.IPC.Device)
	if err != nil {
		return 0, err
	}
	pc := c.peers(log)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return 0, fmt.Errorf("%w: the connection is closing", context.Canceled)
	}
	peer, err := pc.open(ds, peerKey{device: m.IPC.Device, handle: m.IPC.Handle})
	if err != nil {
		return 0, err
	}
	r := m.Region
	if r.Offset > peer.Size() || r.Length > peer.Size()-r.Offset {
		return 0, fmt.Errorf("%w: Batch.Region [%d, %d+%d) past the device allocation of %d bytes", errdefs.ErrInvalidArgument, r.Offset, r.Offset, r.Length, peer.Size())
	}
	src := peer.Ptr() + uintptr(r.Offset)
	lim := c.p.cfg.Limiter
	if c.gpuCompresses(out, m, ds) {
		return c.deviceCompressed(out, m, ds, src, lim)
	}
	start := time.Now()
	switch m.Kind {
	case protocol.KindOpaque:
		err = c.deviceOpaque(out, m, ds, src, lim)
	case protocol.KindColumnar:
		err = c.deviceColumnar(out, m, ds, src, lim)
	default:
		return 0, fmt.Errorf("%w: Batch.kind %v", errdefs.ErrUnsupported, m.Kind)
	}
	if err != nil {
		return 0, err
	}
	c.p.dev.d2h.bytes.Add(r.Length)
	c.p.dev.d2h.nanos.Add(int64(time.Since(start)))
	return r.Length, nil
}

// deviceOpaque streams an opaque payload chunk by chunk. Landed chunks go
// to the writer on a goroutine of their own, so that the next copies run
// while the writer waits for the limiter or its queues; the pool's chunk
// count bounds what waits between the two.
func (c *Conn) deviceOpaque(out *Output, m *protocol.Batch, ds *deviceState, src uintptr, lim gpu.Admitter) error {
	type landed struct {
		s    *gpu.Staged
		offs []int64
	}
	hand := make(chan landed, StagingChunks)
	var failed atomic.Pointer[error]
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range hand {
			if failed.Load() != nil {
				l.s.Release()
				continue
			}
			if err := out.Writer.WriteOpaque(c.ctx, l.s.Bytes(), l.offs, l.s.Release); err != nil {
				failed.Store(&err)
			}
		}
	}()
	offs := m.Opaque.PartitionOffsets
	err := ds.pool.Stream(c.ctx, src, m.Region.Length, lim, func(off int64, s *gpu.Staged) error {
		if p := failed.Load(); p != nil {
			s.Release()
			return *p
		}
		end := off + int64(len(s.Bytes()))
		chunk := make([]int64, len(offs))
		for p, v := range offs {
			chunk[p] = min(max(v, off), end) - off
		}
		select {
		case hand <- landed{s: s, offs: chunk}:
			return nil
		case <-c.ctx.Done():
			s.Release()
			return c.ctx.Err()
		}
	})
	close(hand)
	<-done
	if p := failed.Load(); p != nil {
		return *p
	}
	return err
}

func (c *Conn) deviceColumnar(out *Output, m *protocol.Batch, ds *deviceState, src uintptr, lim gpu.Admitter) error {
	if m.Region.Length == 0 {
		b, err := columnar.View(&m.Columnar, nil)
		if err == nil {
			err = out.checkColumns(b)
		}
		if err != nil {
			return err
		}
		return out.Writer.WriteBatch(c.ctx, b, nil)
	}
	s, err := ds.pool.CopyAll(c.ctx, src, m.Region.Length, lim)
	if err != nil {
		return err
	}
	b, err := columnar.View(&m.Columnar, s.Bytes())
	if err == nil {
		err = out.checkColumns(b)
	}
	if err != nil {
		s.Release()
		return err
	}
	// The staged copy is held, as a memfd's mapping is, only until the
	// batch's records no longer read it: one per connection at most.
	done := make(chan struct{})
	release := func() {
		s.Release()
		close(done)
	}
	if err := out.Writer.WriteBatch(c.ctx, b, release); err != nil {
		return err
	}
	c.awaitRecords(done)
	return nil
}
