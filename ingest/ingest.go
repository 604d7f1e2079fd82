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
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sync/semaphore"

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
	// EarlyAnswerBytes bounds the payloads answered BatchAccepted before
	// their records are all encoded (0: heldBatchBytes of the limit;
	// negative: none, every batch is answered once nothing reads it).
	EarlyAnswerBytes int64
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
	maps     sharedMaps    // the memfd mappings, shared by the connections
	// early holds the payloads of the batches answered before their
	// records were all encoded (heldBatchBytes): the client may free its
	// memory at BatchAccepted while the daemon still maps it.
	early *semaphore.Weighted
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
	p.maps.resident = &p.resident
	early := cfg.EarlyAnswerBytes
	if early == 0 {
		early = heldBatchBytes(limit)
	}
	p.early = semaphore.NewWeighted(max(early, 0))
	return p
}

// heldBatchBytes bounds the payloads of the batches (inline or memfd) that
// the daemon answers BatchAccepted before every record of them is encoded:
// an eighth of the bytes-in-flight limit. A batch that fits what is left
// of it is answered as soon as its records are admitted, so a connection's
// next batch arrives while this one is encoded; a larger one is answered
// once its records no longer read it. The memfd batches it holds fit the
// whole-read share of the resident account (residentBytes, a quarter of
// the limit) beside one batch per connection at the load generator's
// default concurrency, so that none of them is read in twice.
func heldBatchBytes(limit int64) int64 { return limit / 8 }

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
	c.memfds.shared = &p.maps
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
// Apply returns (and the caller answers BatchAccepted) once the batch's
// records are admitted when its payload fits in what is left of the
// daemon's early-answer budget (heldBatchBytes), held from then until no
// record reads it; otherwise only once no record of the batch reads its
// payload any more: its memfd region is unmapped, its inline frame
// recycled. So the payloads the daemon holds past their BatchAccepted
// never exceed that budget, and beyond it it holds one batch's payload
// per connection at most, which the client has not been told it may
// free. The memfd pages the daemon keeps resident are bounded
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
		data, sm, unmap, err := c.memfds.mapShared(h.TakeFD(), m.Region.Offset, m.Region.Length)
		if err != nil {
			return 0, err
		}
		payload = data
		if sm == nil { // no bytes
			release = unmap
			break
		}
		d := c.p.resident.add(data, sm, m)
		hooks.Validated, hooks.Read = d.validated, d.read
		release = func() {
			c.p.resident.end(d)
			unmap()
		}
	case protocol.PlaneCUDAIPC:
		return c.deviceBatch(log, &out, m, h.TakeFD())
	default:
		return 0, fmt.Errorf("%w: data plane %v is not supported by this build", errdefs.ErrUnsupported, m.Plane)
	}
	n := int64(len(payload))
	early := c.p.early.TryAcquire(n)
	done := make(chan struct{})
	hooks.Done = func() {
		release()
		if early {
			c.p.early.Release(n)
		}
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
	if !early {
		c.awaitRecords(done)
	}
	return n, nil
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

// MemfdResidentBytes is the least bound on the memfd pages of batches
// read in whole that the daemon keeps resident (residentPages): a quarter
// of the bytes-in-flight limit, and at least this much.
const MemfdResidentBytes = 32 << 20

// residentBytes returns the bound on the memfd pages of batches read in
// whole for a bytes-in-flight limit of limit (0: none configured).
func residentBytes(limit int64) int64 { return max(limit/4, MemfdResidentBytes) }

// residentPages is the daemon's account of the memfd pages of the batches
// being applied that it keeps resident. A region is never mapped whole up
// front (no MAP_POPULATE). It has two shares:
//
//   - whole: a batch of at most an eighth of the bound has its pages read
//     in at once (MADV_POPULATE_READ: one call, not a fault per few pages
//     while the records read) and counted whole, if it fits in what is
//     left of the bound. Its pages stay, counted once (kept), while
//     batches of the same memfd region read them and after the last one
//     ends, for the next (a client's pool of buffers sends them again and
//     again): those batches read them in no more. Kept pages go, least recently used first,
//     when a batch needs their room, and when their mapping is unmapped;
//     no other batch's reading lets go of the pages of a batch in use.
//   - read: any other batch's pages are read in as its records read them,
//     each record counted when done (its bytes, and the pages at the ends
//     of its ranges). Once that count reaches a quarter of the bound, the
//     pages of every batch of this share (and of it only) are let go
//     (MADV_DONTNEED), to be read in again from the memfds as records
//     need them; a batch's pages go when it ends.
//
// So the resident memfd pages stay within 5/4 of the bound plus what the
// records being encoded read. The shares are apart so that small batches,
// the common case, are never read in twice while they are in use: with
// one share, every larger batch's reading (or a burst of small batches
// past the bound) let go of every batch's pages, and the records read
// them in again.
type residentPages struct {
	mu    sync.Mutex // held while pages are dropped: a mapping is unmapped after
	bound int64
	whole int64 // the bytes of the batches read in whole, and of the kept regions
	read  int64 // the sum of the read share's counted
	// reading are the batches of the read share.
	reading map[*pageDropper]struct{}
	// idle are the kept regions no batch is using, least recently used
	// at the front.
	idle list.List
}

// A keptRegion is the pages of a region of a shared mapping, read in
// whole, that stay resident (and counted once) while batches read them
// and between those batches. A mapping keeps one region at most: the
// first read in whole while it keeps none.
type keptRegion struct {
	sm    *sharedMapping
	data  []byte
	users int           // batches reading it
	elem  *list.Element // in residentPages.idle while no batch uses it; else nil
}

// same reports whether data is k's region.
func (k *keptRegion) same(data []byte) bool {
	return len(data) == len(k.data) && unsafe.SliceData(data) == unsafe.SliceData(k.data)
}

// A pageDropper is one memfd batch's share of residentPages.
type pageDropper struct {
	r    *residentPages
	sm   *sharedMapping // the mapping data lies in
	data []byte
	// edges is what a record may read beyond its own bytes: a page at
	// either end of each buffer it reads.
	edges int64
	// whole: the batch was read in whole. kept: the region it reads is
	// its mapping's kept one, which counts len(data) in r.whole (once, for
	// all its batches); else a batch read in whole counts it itself (its
	// mapping keeps another region). Not whole: counted is what the batch
	// counts in r.read since its pages were last let go.
	kept    *keptRegion
	whole   bool
	counted int64
}

// add counts data, the payload of memfd batch m in mapping sm, in one of
// the shares, and reads it in whole if it is small and fits (or finds it
// kept).
func (r *residentPages) add(data []byte, sm *sharedMapping, m *protocol.Batch) *pageDropper {
	buffers := int64(1)
	if m.Kind == protocol.KindColumnar {
		buffers = 3 * int64(len(m.Columnar.Columns)) // validity, offsets, data
	}
	d := &pageDropper{r: r, sm: sm, data: data, edges: 2 * buffers * int64(os.Getpagesize())}
	n := int64(len(data))
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > 0 && n <= r.bound/8 {
		if k := sm.kept; k != nil && k.same(data) {
			k.users++
			r.unidleLocked(k)
			d.kept, d.whole = k, true
			return d
		}
		r.makeRoomLocked(n)
		if r.whole+n <= r.bound && populatePages(data) {
			d.whole = true
			r.whole += n
			if sm.kept == nil { // kept from now on, for the next batches too
				d.kept = &keptRegion{sm: sm, data: data, users: 1}
				sm.kept = d.kept
			}
			return d
		}
	}
	if r.reading == nil {
		r.reading = make(map[*pageDropper]struct{})
	}
	r.reading[d] = struct{}{}
	return d
}

// makeRoomLocked lets go of idle kept regions, least recently used first,
// until n more bytes fit the whole share or none is left. r.mu is held.
func (r *residentPages) makeRoomLocked(n int64) {
	for r.whole+n > r.bound && r.idle.Len() > 0 {
		r.dropKeptLocked(r.idle.Front().Value.(*keptRegion), true)
	}
}

// unidleLocked takes k out of the idle regions, if it is there. r.mu is
// held.
func (r *residentPages) unidleLocked(k *keptRegion) {
	if k.elem != nil {
		r.idle.Remove(k.elem)
		k.elem = nil
	}
}

// dropKeptLocked takes idle region k out of the account, its pages let go
// unless its mapping is about to be unmapped (pages says). r.mu is held.
func (r *residentPages) dropKeptLocked(k *keptRegion, pages bool) {
	r.unidleLocked(k)
	k.sm.kept = nil
	r.whole -= int64(len(k.data))
	if pages {
		dropPages(k.data)
	}
}

// end takes d out when its batch no longer reads it, before its mapping
// is let go of: a region read in whole stays kept (and counted) for the
// mapping's next batch, unless the mapping keeps another region already;
// a batch of the read share lets go of its pages.
func (r *residentPages) end(d *pageDropper) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case d.kept != nil:
		k := d.kept
		if k.users--; k.users == 0 {
			k.elem = r.idle.PushBack(k)
		}
	case d.whole:
		// Its mapping keeps another region: its count and pages go.
		r.whole -= int64(len(d.data))
		dropPages(d.data)
	default:
		delete(r.reading, d)
		r.read -= d.counted
		d.dropLocked()
	}
}

// forget takes the kept region of sm out of the account before sm is
// unmapped (no batch reads it then).
func (r *residentPages) forget(sm *sharedMapping) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := sm.kept; k != nil {
		r.dropKeptLocked(k, false)
	}
}

// validated lets go of what the checks of a batch that was not read in
// whole have read (its offsets and validity, for a columnar batch),
// before any record reads it.
func (d *pageDropper) validated() {
	if d.whole {
		return
	}
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	d.dropLocked()
	r.read -= d.counted
	d.counted = 0
}

// dropLocked lets go of the pages of d, a batch of the read share, unless
// they are its mapping's kept region (a batch read in whole reads them, or
// will). r.mu is held.
func (d *pageDropper) dropLocked() {
	if k := d.sm.kept; k != nil && k.same(d.data) {
		return
	}
	dropPages(d.data)
}

// read counts a record's n bytes read, unless its batch is read in whole,
// and lets go of the pages of the read share once its count reaches a
// quarter of the bound.
func (d *pageDropper) read(n int64) {
	if d.whole {
		return
	}
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	d.counted += n + d.edges
	r.read += n + d.edges
	if r.read >= r.bound/4 {
		for b := range r.reading {
			b.dropLocked()
			b.counted = 0
		}
		r.read = 0
	}
}
