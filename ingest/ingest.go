// Package ingest turns one Batch request into writer calls. It owns the
// data planes a batch's payload arrives on: inline in its frame, in a
// sealed memfd (with the mappings a connection passes again, cached), and
// in a client's device memory over CUDA IPC (the devices, their staging
// pools, the process's IPC mappings and the GPU compression, in a build
// with the cuda tag); and it reads a columnar payload as a partition.Batch
// (protocol/columnar) checked against the columns its map output declared.
//
// The daemon owns one Planes, each connection one Conn; the package holds
// no state of its own. The session above it keeps framing, dispatch,
// bounds and replies; below it are the writer and the floors it stands
// on. Its errors are of errdefs's classes, which the server maps onto
// wire codes.
package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/limiter"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"github.com/shuffled/shuffled/writer"
)

// Config configures the daemon's data planes.
type Config struct {
	// Log hears what concerns the daemon rather than one connection: a
	// device's kernels that do not load, the staging primed.
	Log *slog.Logger
	// Limiter admits the staging of device batches: the writer engine's.
	Limiter *limiter.Limiter
	// NoCUDACompress: device batches are serialized and compressed by the
	// CPU pool, never on the GPU.
	NoCUDACompress bool
	// CUDAStagingPrime: Prime opens every CUDA device and pins its staging.
	CUDAStagingPrime bool
	// MemfdIdleGrace is how long a connection with no map output open
	// keeps its cached memfd mappings; 0: DefaultMemfdIdleGrace.
	MemfdIdleGrace time.Duration
	// CUDACompressSlots: device batches each device compresses at once
	// (0: DefaultCompressSlots).
	CUDACompressSlots int
}

// DefaultCompressSlots is Config.CUDACompressSlots's default.
const DefaultCompressSlots = gpu.DefaultCompressSlots

// DefaultMemfdIdleGrace is how long, unless configured otherwise, a
// connection with no map output open keeps its cached memfd mappings for
// its next map output: long enough for an executor's next task, short
// enough that a client done with its memfds soon gets their pages back.
const DefaultMemfdIdleGrace = 2 * time.Second

// Planes are the daemon's data planes: what the connections share (the
// devices and their IPC mappings, the device-to-host totals).
type Planes struct {
	cfg      Config
	dev      devicePlanes
	resident residentPages // of the memfd batches being applied
}

// New returns the data planes of cfg. Nothing is opened: a device is at
// its first batch, or at Prime.
func New(cfg Config) *Planes {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MemfdIdleGrace <= 0 {
		cfg.MemfdIdleGrace = DefaultMemfdIdleGrace
	}
	p := &Planes{cfg: cfg}
	var limit int64
	if cfg.Limiter != nil {
		limit = cfg.Limiter.Limit()
	}
	p.resident.bound = residentBytes(limit)
	return p
}

// DeviceFeatures are the ServerHello features of the device data plane
// this build serves.
const DeviceFeatures = deviceFeatures

// Conn is one connection's share of the data planes: its cache of memfd
// mappings and the device allocations it names. Its batches are applied
// one at a time, by the connection's reader.
type Conn struct {
	p      *Planes
	ctx    context.Context
	memfds memfdCache
	dev    deviceConn
}

// NewConn returns the share of a connection whose context is ctx
// (cancelled when it ends) and whose peer uid's cached memfd mappings
// count against budget (nil: no bound).
func (p *Planes) NewConn(ctx context.Context, budget *MemfdBudget) *Conn {
	c := &Conn{p: p, ctx: ctx}
	c.memfds.budget = budget
	c.memfds.grace = p.cfg.MemfdIdleGrace
	return c
}

// Idle says the connection has no map output open, so nothing of it
// references the memfd mappings it caches: they are dropped once
// MemfdIdleGrace passes with no batch, or sooner when another connection
// of the peer uid needs their share of its budget. A batch still reading
// one unmaps it when done.
func (c *Conn) Idle() { c.memfds.idle() }

// Close lets go of what the connection holds, once its context is done:
// its memfd mappings, and its device mappings once the batch copying from
// them ends.
func (c *Conn) Close() {
	c.memfds.close()
	c.closeDevices()
}

// Output is the map output a batch goes to.
type Output struct {
	Writer *writer.MapWriter
	// Schema: the columns declared at Open (kudo map outputs); nil
	// otherwise.
	Schema []partition.Field
}

// checkColumns checks a columnar batch of out against the columns
// declared at Open (kudo map outputs only).
func (out *Output) checkColumns(b *partition.Batch) error {
	if out.Schema == nil {
		return nil
	}
	if err := partition.CheckSchema(b, out.Schema); err != nil {
		return fmt.Errorf("%w: %v", errdefs.ErrInvalidArgument, err)
	}
	return nil
}

// Held is what a Batch's frame brought that the batch may take: the
// descriptor passed with it, the frame an inline payload lies in. What a
// plane takes it owns; the caller gives back the rest.
type Held interface {
	// TakeFD hands the descriptor over, to be closed by the taker; -1 if
	// none.
	TakeFD() int
	// TakeInline hands the inline frame over: the function that recycles
	// it, to call once nothing reads the payload.
	TakeInline() (release func())
}

// Apply hands batch m, whose frame brought h, to out's writer from the
// plane it names, and returns the payload bytes taken in (0 on error). The
// caller has checked m against its map output (kind, partitions, bounds).
// log is the connection's.
//
// Apply returns (and the caller answers BatchAccepted) only once no record
// of the batch reads its payload any more: its memfd region is unmapped,
// its inline frame recycled, whatever the writer's queues still hold of
// other batches. So the daemon holds one batch's payload per connection
// at most, and the client may close or reuse its memory at
// BatchAccepted. The memfd pages the daemon keeps resident are bounded
// (residentPages), whatever the size of the batches. On error Apply
// returns at once: the map output is aborted, and what its records still
// read is let go when they end.
func (c *Conn) Apply(log *slog.Logger, out Output, m *protocol.Batch, h Held) (int64, error) {
	var payload []byte
	release := func() {}
	var hooks writer.BatchHooks
	switch m.Plane {
	case protocol.PlaneInline:
		payload, release = m.Inline, h.TakeInline()
	case protocol.PlaneMemfd:
		data, unmap, err := c.memfds.mapFD(h.TakeFD(), m.Region.Offset, m.Region.Length)
		if err != nil {
			return 0, err
		}
		payload = data
		d := c.p.resident.add(data, m)
		hooks.Validated, hooks.Read = d.validated, d.read
		// A cached mapping stays; its pages go, as an uncached one's do.
		release = func() {
			c.p.resident.remove(d)
			dropPages(data)
			unmap()
		}
	case protocol.PlaneCUDAIPC:
		return c.deviceBatch(log, &out, m, h.TakeFD())
	default:
		return 0, fmt.Errorf("%w: data plane %v is not supported by this build", errdefs.ErrUnsupported, m.Plane)
	}
	done := make(chan struct{})
	hooks.Done = func() {
		release()
		close(done)
	}
	var err error
	switch m.Kind {
	case protocol.KindOpaque:
		err = out.Writer.WriteOpaqueHooks(c.ctx, payload, m.Opaque.PartitionOffsets, hooks)
	case protocol.KindColumnar:
		b, cerr := columnar.View(&m.Columnar, payload)
		if cerr == nil {
			cerr = out.checkColumns(b)
		}
		if cerr != nil {
			hooks.Done()
			return 0, cerr
		}
		err = out.Writer.WriteBatchHooks(c.ctx, b, hooks)
	default:
		hooks.Done()
		return 0, fmt.Errorf("%w: Batch.kind %v", errdefs.ErrUnsupported, m.Kind)
	}
	if err != nil {
		return 0, err
	}
	c.awaitRecords(done)
	return int64(len(payload)), nil
}

// awaitRecords waits until done is closed (the batch's records no longer
// read its payload) or the connection ends: then the records still queued
// let go of the payload when they end, aborted with the connection's map
// outputs.
func (c *Conn) awaitRecords(done <-chan struct{}) {
	select {
	case <-done:
	case <-c.ctx.Done():
	}
}

// MemfdResidentBytes is the least bound on the memfd pages that the
// daemon keeps in its resident set beyond those that records are reading
// (residentPages): an eighth of the bytes-in-flight limit, and at least
// this much.
const MemfdResidentBytes = 32 << 20

// residentBytes returns the bound on the memfd pages the daemon keeps
// resident for a bytes-in-flight limit of limit (0: none configured).
func residentBytes(limit int64) int64 { return max(limit/8, MemfdResidentBytes) }

// residentPages is the daemon's account of the memfd pages of the batches
// being applied that it keeps resident, against a bound (residentBytes).
// A region is never mapped whole up front (no MAP_POPULATE): a batch of
// at most a quarter of the bound has its pages read in at once
// (MADV_POPULATE_READ: one call, not a fault per few pages while the
// records read) and counted whole; a larger one's pages are read in as its
// records read them, each record counted when done (its bytes, and the
// pages at the ends of its ranges). Once the count reaches the bound, the
// pages of every batch are let go (MADV_DONTNEED), to be read in again
// from the memfds as records need them; a batch's pages go when it ends.
type residentPages struct {
	mu      sync.Mutex // held while pages are dropped: a batch ends (unmaps) after
	bound   int64
	counted int64 // the sum of the batches' counted
	batches map[*pageDropper]struct{}
}

// A pageDropper is one memfd batch's share of residentPages.
type pageDropper struct {
	r    *residentPages
	data []byte
	// edges is what a record may read beyond its own bytes: a page at
	// either end of each buffer it reads.
	edges int64
	// counted is what the batch counts resident since its pages were
	// last let go; populated: all of them are (reads add nothing).
	counted   int64
	populated bool
}

// add counts data, the payload of memfd batch m, among the batches whose
// pages are let go, and reads it in whole if it is small.
func (r *residentPages) add(data []byte, m *protocol.Batch) *pageDropper {
	buffers := int64(1)
	if m.Kind == protocol.KindColumnar {
		buffers = 3 * int64(len(m.Columnar.Columns)) // validity, offsets, data
	}
	d := &pageDropper{r: r, data: data, edges: 2 * buffers * int64(os.Getpagesize())}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.batches == nil {
		r.batches = make(map[*pageDropper]struct{})
	}
	r.batches[d] = struct{}{}
	if n := int64(len(data)); n > 0 && n <= r.bound/4 {
		if r.counted+n > r.bound {
			r.dropAllLocked()
		}
		d.populated = populatePages(data)
		if d.populated {
			d.counted = n
			r.counted += n
		}
	}
	return d
}

// remove takes d out before its batch's region is unmapped (or its
// pages let go): no drop touches the region from then on.
func (r *residentPages) remove(d *pageDropper) {
	r.mu.Lock()
	delete(r.batches, d)
	r.counted -= d.counted
	r.mu.Unlock()
}

// validated lets go of what the checks of a batch that was not read in
// whole have read (its offsets and validity, for a columnar batch),
// before any record reads it.
func (d *pageDropper) validated() {
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if !d.populated {
		dropPages(d.data)
		r.counted -= d.counted
		d.counted = 0
	}
}

// read counts a record's n bytes read, unless its batch is counted whole,
// and lets go of the pages of every batch once the count reaches the
// bound.
func (d *pageDropper) read(n int64) {
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if d.populated {
		return
	}
	d.counted += n + d.edges
	r.counted += n + d.edges
	if r.counted >= r.bound {
		r.dropAllLocked()
	}
}

// dropAllLocked lets go of the pages of every batch. r.mu is held.
func (r *residentPages) dropAllLocked() {
	for b := range r.batches {
		dropPages(b.data)
		b.counted, b.populated = 0, false
	}
	r.counted = 0
}
