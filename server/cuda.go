//go:build cuda

package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/protocol"
	"golang.org/x/sys/unix"
)

// deviceFeatures are the ServerHello features of the GPU data plane.
const deviceFeatures = protocol.FeatureCUDAIPC

// Staging of device batches: chunks of stagingChunk bytes, at most
// stagingChunks out at once across the daemon (128 MiB pinned), pinned on
// first use. 16 MiB chunks keep a copy's fixed cost (queueing it, hearing
// that it landed: tens of µs) small against its transfer (~300 µs) when
// compression holds the copies back to one at a time.
const (
	stagingChunk  = 16 << 20
	stagingChunks = 8
	// maxPeersPerSession bounds the IPC mappings one connection holds;
	// it lets go of the oldest to make room.
	maxPeersPerSession = 32
)

// devices are the CUDA devices of the process, opened at the first batch
// that names each: a context costs about a tenth of a second, and a
// daemon that never sees a device batch never pays for one, unless
// Config.CUDAStagingPrime opens them all at startup.
var devices struct {
	mu sync.Mutex
	m  map[uint32]*deviceState
}

// deviceState is one device's context and staging pool, shared by every
// session of the process.
type deviceState struct {
	dev  *gpu.Device
	pool *gpu.Pool
}

// d2h counts the bytes the daemon copied device to host and the time the
// copies of whole batches took, admission and hand-off included.
var d2h struct {
	bytes, nanos atomic.Int64
}

// deviceFor returns the device a batch names, opening it at the first
// batch that does.
func deviceFor(ordinal uint32) (*deviceState, error) {
	ds, err := startDevice(ordinal)
	if errors.Is(err, gpu.ErrInvalid) {
		return nil, fmt.Errorf("%w: Batch.IPC.Device: %v", errdefs.ErrInvalidArgument, err)
	}
	return ds, err
}

// startDevice returns device ordinal's context and staging pool, creating
// them the first time. The pool pins its chunks as they are first used;
// prime pins them all at once.
func startDevice(ordinal uint32) (*deviceState, error) {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	if ds := devices.m[ordinal]; ds != nil {
		return ds, nil
	}
	dev, err := gpu.Open(int(ordinal))
	if err != nil {
		return nil, err
	}
	pool, err := gpu.NewPool(dev, gpu.WithChunkSize(stagingChunk), gpu.WithMaxChunks(stagingChunks))
	if err != nil {
		dev.Close()
		return nil, err
	}
	if devices.m == nil {
		devices.m = make(map[uint32]*deviceState)
	}
	ds := &deviceState{dev: dev, pool: pool}
	devices.m[ordinal] = ds
	return ds, nil
}

// prime pins every chunk the staging pool may hand out, by taking them
// all and giving them back, so that no batch waits for pinning.
func (ds *deviceState) prime(ctx context.Context) error {
	held := make([]*gpu.Staged, 0, stagingChunks)
	defer func() {
		for _, s := range held {
			s.Release()
		}
	}()
	for range stagingChunks {
		s, err := ds.pool.Get(ctx, stagingChunk)
		if err != nil {
			return err
		}
		held = append(held, s)
	}
	return nil
}

// primeDevices, with Config.CUDAStagingPrime, opens every CUDA device of
// the process and pins its staging pool before the daemon serves: time to
// READY grows by a context and stagingChunks×stagingChunk bytes of pinning
// per device, which the first device batch then no longer pays.
func (s *Server) primeDevices() error {
	if !s.cfg.CUDAStagingPrime {
		return nil
	}
	start := time.Now()
	var n uint32
	for ; ; n++ {
		ds, err := startDevice(n)
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
	s.log.Info("primed CUDA staging", "devices", n,
		"pinned_per_device", FormatSize(stagingChunk*stagingChunks), "took", time.Since(start))
	return nil
}

// peerCache holds the IPC mappings one session uses: each allocation is
// looked up once, and the session's references are dropped when it ends.
// mu is held through a batch's copies, so the session's end waits for
// them.
type peerCache struct {
	mu     sync.Mutex
	closed bool
	peers  map[peerKey]*gpu.Peer
	order  []peerKey // oldest first
}

type peerKey struct {
	device uint32
	handle gpu.IPCHandle
}

// mappings are the IPC mappings of the process, shared by the sessions
// that name the same allocation: CUDA maps another process's allocation
// once per context (opening a handle that is already open fails), and one
// executor's tasks on several connections hand over the same allocations.
// A mapping is closed when the last session that holds it lets go.
var mappings struct {
	mu sync.Mutex
	m  map[peerKey]*sharedPeer
}

type sharedPeer struct {
	peer *gpu.Peer
	refs int // sessions holding it
}

// acquirePeer returns the mapping of k, opening it if no session holds
// it, and counts one more holder.
func acquirePeer(ds *deviceState, k peerKey) (*gpu.Peer, error) {
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	if sp := mappings.m[k]; sp != nil {
		sp.refs++
		return sp.peer, nil
	}
	p, err := ds.dev.OpenIPC(k.handle)
	if err != nil {
		return nil, fmt.Errorf("%w: Batch.IPC.Handle: %v", errdefs.ErrInvalidArgument, err)
	}
	if mappings.m == nil {
		mappings.m = make(map[peerKey]*sharedPeer)
	}
	mappings.m[k] = &sharedPeer{peer: p, refs: 1}
	return p, nil
}

// releasePeer counts one holder of k less and closes the mapping after
// the last.
func releasePeer(k peerKey) {
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

var sessionPeers sync.Map // *session → *peerCache

// peers returns the session's mappings, made on its first device batch.
func (sess *session) peers() *peerCache {
	if pc, ok := sessionPeers.Load(sess); ok {
		return pc.(*peerCache)
	}
	pc := &peerCache{peers: make(map[peerKey]*gpu.Peer)}
	if got, loaded := sessionPeers.LoadOrStore(sess, pc); loaded {
		return got.(*peerCache)
	}
	context.AfterFunc(sess.ctx, func() {
		sess.logDeviceTotals()
		sessionPeers.Delete(sess)
		pc.mu.Lock()
		defer pc.mu.Unlock()
		pc.closed = true
		for _, k := range pc.order {
			releasePeer(k)
		}
		pc.peers, pc.order = nil, nil
	})
	return pc
}

// open returns the mapping of an allocation, taking a reference the
// first time the session names it; past maxPeersPerSession it drops its
// oldest. The caller holds pc.mu.
func (pc *peerCache) open(ds *deviceState, k peerKey) (*gpu.Peer, error) {
	if p := pc.peers[k]; p != nil {
		return p, nil
	}
	p, err := acquirePeer(ds, k)
	if err != nil {
		return nil, err
	}
	if len(pc.order) >= maxPeersPerSession {
		old := pc.order[0]
		pc.order = pc.order[1:]
		delete(pc.peers, old)
		releasePeer(old)
	}
	pc.peers[k] = p
	pc.order = append(pc.order, k)
	return p, nil
}

// deviceBatch applies a batch in the client's device memory: it maps the
// allocation (once per process, while sessions name it), copies the payload into pinned staging
// buffers that the limiter admits while they land, and hands them to the
// writer. Opaque payloads go chunk by chunk, the next chunks landing while
// the ones before are compressed; a columnar payload lands whole, since
// its records read every column. It returns once nothing reads the device
// memory any more, so BatchAccepted tells the client it may reuse it.
func (sess *session) deviceBatch(o *output, m *protocol.Batch, fd int) error {
	if fd >= 0 {
		unix.Close(fd)
	}
	ds, err := deviceFor(m.IPC.Device)
	if err != nil {
		return err
	}
	pc := sess.peers()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return fmt.Errorf("%w: the connection is closing", context.Canceled)
	}
	peer, err := pc.open(ds, peerKey{device: m.IPC.Device, handle: m.IPC.Handle})
	if err != nil {
		return err
	}
	r := m.Region
	if r.Offset > peer.Size() || r.Length > peer.Size()-r.Offset {
		return fmt.Errorf("%w: Batch.Region [%d, %d+%d) past the device allocation of %d bytes", errdefs.ErrInvalidArgument, r.Offset, r.Offset, r.Length, peer.Size())
	}
	src := peer.Ptr() + uintptr(r.Offset)
	lim := sess.s.eng.Limiter()
	if sess.gpuCompresses(o, m, ds) {
		return sess.deviceCompressed(o, m, ds, src, lim)
	}
	start := time.Now()
	switch m.Kind {
	case protocol.KindOpaque:
		err = sess.deviceOpaque(o, m, ds, src, lim)
	case protocol.KindColumnar:
		err = sess.deviceColumnar(o, m, ds, src, lim)
	default:
		return fmt.Errorf("%w: Batch.kind %v", errdefs.ErrUnsupported, m.Kind)
	}
	if err != nil {
		return err
	}
	d2h.bytes.Add(r.Length)
	d2h.nanos.Add(int64(time.Since(start)))
	sess.s.metrics.BytesIn.Add(float64(r.Length))
	return nil
}

// deviceOpaque streams an opaque payload chunk by chunk. Landed chunks go
// to the writer on a goroutine of their own, so that the next copies run
// while the writer waits for the limiter or its queues; the pool's chunk
// count bounds what waits between the two.
func (sess *session) deviceOpaque(o *output, m *protocol.Batch, ds *deviceState, src uintptr, lim gpu.Admitter) error {
	type landed struct {
		s    *gpu.Staged
		offs []int64
	}
	hand := make(chan landed, stagingChunks)
	var failed atomic.Pointer[error]
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range hand {
			if failed.Load() != nil {
				c.s.Release()
				continue
			}
			if err := o.w.WriteOpaque(sess.ctx, c.s.Bytes(), c.offs, c.s.Release); err != nil {
				failed.Store(&err)
			}
		}
	}()
	offs := m.Opaque.PartitionOffsets
	err := ds.pool.Stream(sess.ctx, src, m.Region.Length, lim, func(off int64, s *gpu.Staged) error {
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
		case <-sess.ctx.Done():
			s.Release()
			return sess.ctx.Err()
		}
	})
	close(hand)
	<-done
	if p := failed.Load(); p != nil {
		return *p
	}
	return err
}

func (sess *session) deviceColumnar(o *output, m *protocol.Batch, ds *deviceState, src uintptr, lim gpu.Admitter) error {
	if m.Region.Length == 0 {
		b, err := columnarBatch(&m.Columnar, nil)
		if err == nil {
			err = o.checkColumns(b)
		}
		if err != nil {
			return err
		}
		return o.w.WriteBatch(sess.ctx, b, nil)
	}
	s, err := ds.pool.CopyAll(sess.ctx, src, m.Region.Length, lim)
	if err != nil {
		return err
	}
	b, err := columnarBatch(&m.Columnar, s.Bytes())
	if err == nil {
		err = o.checkColumns(b)
	}
	if err != nil {
		s.Release()
		return err
	}
	return o.w.WriteBatch(sess.ctx, b, s.Release)
}
