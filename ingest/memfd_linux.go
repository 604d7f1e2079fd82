package ingest

import (
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/shuffled/shuffled/errdefs"
	"golang.org/x/sys/unix"
)

// requiredSeals are the seals a memfd must carry before the daemon maps it:
// with them the client can neither change nor resize the pages the daemon
// reads while the client runs on.
const requiredSeals = unix.F_SEAL_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW

// mapMemfd maps bytes [off, off+length) of a sealed memfd read-only. It
// takes ownership of fd (closed before it returns, on every path) and
// returns the bytes and the function that unmaps them.
func mapMemfd(fd int, off, length int64) ([]byte, func(), error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, fmt.Errorf("memfd: fstat: %w", err)
	}
	mem, err := mapRegion(fd, &st, off, length)
	if err != nil || mem == nil {
		return nil, func() {}, err
	}
	page := off &^ (int64(os.Getpagesize()) - 1)
	return mem[off-page:], func() { _ = unix.Munmap(mem) }, nil
}

// mapRegion checks fd's seals, the region's bounds and holes, and maps the
// region's pages read-only; mem starts at the page of off. A region of no
// bytes maps nothing (nil, nil).
func mapRegion(fd int, st *unix.Stat_t, off, length int64) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: memfd: F_GET_SEALS: %v (is it a memfd created with MFD_ALLOW_SEALING?)", errdefs.ErrInvalidArgument, err)
	}
	if seals&requiredSeals != requiredSeals {
		return nil, fmt.Errorf("%w: memfd seals %#x lack F_SEAL_WRITE|F_SEAL_SHRINK|F_SEAL_GROW (%#x)", errdefs.ErrInvalidArgument, seals, requiredSeals)
	}
	if off < 0 || length < 0 || off > st.Size || length > st.Size-off {
		return nil, fmt.Errorf("%w: memfd region [%d, %d+%d) past its size %d", errdefs.ErrInvalidArgument, off, off, length, st.Size)
	}
	if length == 0 {
		return nil, nil
	}
	// Reading a hole of a memfd allocates it, charged to the daemon and
	// outside the bytes-in-flight limit; a batch the client really wrote
	// has no holes. The rule is on the region's own pages: the first hole
	// at or after off must lie at or past its end.
	hole, err := unix.Seek(fd, off, unix.SEEK_HOLE)
	if err != nil {
		return nil, fmt.Errorf("memfd: lseek SEEK_HOLE at %d: %w", off, err)
	}
	if hole < off+length {
		return nil, fmt.Errorf("%w: memfd region [%d, %d) has holes (the first at byte %d): write every byte of a batch before sending it", errdefs.ErrInvalidArgument, off, off+length, hole)
	}
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	// No MAP_POPULATE: the pages are read in by the batch's account of
	// them (residentPages), whole for a small batch, else as records read
	// them.
	mem, err := unix.Mmap(fd, start, int(off-start+length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("memfd: mmap %d bytes at %d: %w", off-start+length, start, err)
	}
	return mem, nil
}

// Bounds of a connection's memfd cache: the mappings it keeps, their bytes,
// and the memfds it remembers having seen once.
const (
	memfdCacheEntries = 16
	memfdCacheBytes   = 512 << 20
	memfdCacheSeen    = 256
)

// memfdKey names a memfd: while the cache maps it the memfd cannot be
// freed, so no other file takes its device and inode number.
type memfdKey struct{ dev, ino uint64 }

// A memfdMapping is a connection's cache entry: a read-only mapping of a
// sealed memfd's region, which it holds a reference to.
type memfdMapping struct {
	sm   *sharedMapping // its key, bytes and region
	refs int            // batches that read it
	dead bool           // out of the cache: its reference goes when refs reaches 0
}

// A sharedMapping is one read-only mapping of a sealed memfd's region,
// shared by every connection that reads the memfd while it is mapped: the
// caches' entries that hold it and the uncached batches that read it
// count its references, and the last one unmaps it. A memfd that several
// connections send (a client's pool of buffers, a task on each connection)
// is mapped once, not once a connection, so that its pages are in the
// daemon's resident set once (residentPages keeps them between batches).
// The connections share nothing else: each checks its own bounds and
// budget, and a connection reads only what its peer passed it the memfd
// of (the descriptor names the file).
type sharedMapping struct {
	key        memfdKey
	mem        []byte
	start, end int64       // the file bytes mem holds: [start, end), start page-aligned
	refs       int         // guarded by sharedMaps.mu
	kept       *keptRegion // guarded by residentPages.mu
}

// sharedMaps are the daemon's shared mappings, by memfd.
type sharedMaps struct {
	mu       sync.Mutex
	maps     map[memfdKey][]*sharedMapping
	resident *residentPages // forgets a mapping's kept pages before it is unmapped; nil: none
}

// acquire returns a reference to a mapping of [off, off+length) of the
// memfd fd (whose fstat is st and identity key): one that is mapped
// already and holds the range, or a new one of exactly the range, once
// its seals and holes are checked. A region of no bytes maps nothing
// (nil, nil).
func (s *sharedMaps) acquire(fd int, st *unix.Stat_t, key memfdKey, off, length int64) (*sharedMapping, error) {
	if length > 0 && off >= 0 {
		s.mu.Lock()
		for _, sm := range s.maps[key] {
			if off >= sm.start && length <= sm.end-off {
				sm.refs++
				s.mu.Unlock()
				return sm, nil
			}
		}
		s.mu.Unlock()
	}
	mem, err := mapRegion(fd, st, off, length)
	if err != nil || mem == nil {
		return nil, err
	}
	start := off &^ (int64(os.Getpagesize()) - 1)
	sm := &sharedMapping{key: key, mem: mem, start: start, end: start + int64(len(mem)), refs: 1}
	s.mu.Lock()
	if s.maps == nil {
		s.maps = make(map[memfdKey][]*sharedMapping)
	}
	s.maps[key] = append(s.maps[key], sm)
	s.mu.Unlock()
	return sm, nil
}

// release gives a reference back, and unmaps the mapping when it was the
// last, once residentPages has forgotten its kept pages.
func (s *sharedMaps) release(sm *sharedMapping) {
	s.mu.Lock()
	sm.refs--
	last := sm.refs == 0
	if last {
		list := s.maps[sm.key]
		for i, o := range list {
			if o == sm {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.maps, sm.key)
		} else {
			s.maps[sm.key] = list
		}
	}
	s.mu.Unlock()
	if last {
		if s.resident != nil {
			s.resident.forget(sm)
		}
		_ = unix.Munmap(sm.mem)
	}
}

// bytes returns the bytes of sm's mapping from file offset off on.
func (sm *sharedMapping) bytes(off, length int64) []byte {
	return sm.mem[off-sm.start : off-sm.start+length]
}

// memfdCache keeps, for one connection, the mappings of sealed memfds that
// its batches pass more than once (a producer that fills a memfd once and
// sends it with every batch), so a later batch of the same memfd costs an
// fstat instead of the seal and hole checks, an mmap and an munmap (its
// pages are let go of after each batch all the same, see residentPages,
// and read in again by the next). A sealed memfd cannot change, shrink or grow, and
// its seals cannot be removed, so what was checked once stays true. A
// memfd is cached at its second batch, not its first: a client that copies
// every batch into a new memfd pins none of them. The cache holds at most
// memfdCacheEntries mappings of memfdCacheBytes in all (least recently used
// out first); its mappings hold the client's pages alive, and go when the
// connection ends (a mapping batches still read goes once they let go).
//
// The mappings of every connection of one peer uid share that uid's
// budget (MemfdBudget, MemfdUIDBytes): a mapping the budget cannot hold,
// even once the uid's idle connections have let go of theirs and the
// connection's own least recently used ones are out, is not cached. A
// connection with no map output open is idle: nothing of it references the
// mappings then, and a client that closed its memfds must get their pages
// back. An idle cache keeps its mappings for a grace period only (the next
// map task of an executor sends the same memfds again a moment later), and
// drops them when it ends, when the connection's next batch comes (it is
// busy again), or before that when another connection of the uid needs the
// budget's room.
type memfdCache struct {
	// shared are the daemon's mappings, which a miss of the cache takes
	// a reference to; nil: the cache's own (tests).
	shared  *sharedMaps
	mu      sync.Mutex
	entries []*memfdMapping // most recently used last
	bytes   int64
	seen    map[memfdKey]struct{}
	closed  bool
	budget  *MemfdBudget // the peer uid's; nil: none (tests)

	// grace is how long an idle cache keeps its mappings; 0 drops them at
	// once.
	grace time.Duration
	// idleGen counts the cache's idle periods: the expiry of one that has
	// ended (a batch came, or the cache was emptied) does nothing.
	idleGen uint64
	idling  bool        // idle with mappings kept, in budget.idle
	timer   *time.Timer // the expiry of the idle period; nil: none
	// afterFunc schedules the expiry (time.AfterFunc; tests run it
	// themselves).
	afterFunc func(time.Duration, func()) *time.Timer
}

// MemfdUIDBytes bounds the bytes of the cached mappings of all the
// connections of one peer uid (a uid may hold many connections, each with
// up to memfdCacheBytes).
const MemfdUIDBytes = 1 << 30

// MemfdBudget is what the cached mappings of one peer uid's connections
// hold, against MemfdUIDBytes. The daemon keeps one per uid while the uid
// has connections.
type MemfdBudget struct {
	mu    sync.Mutex
	used  int64
	limit int64 // MemfdUIDBytes; 0 means it too (tests set less)
	// idle are the uid's connections that keep mappings while idle: what
	// a busy connection may take back when the budget is short.
	idle map[*memfdCache]struct{}
}

// take reserves n bytes, false when they do not fit.
func (b *MemfdBudget) take(n int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fitsLocked(n) {
		return false
	}
	b.used += n
	return true
}

// fitsLocked reports whether n more bytes fit the budget. b.mu is held.
func (b *MemfdBudget) fitsLocked(n int64) bool {
	limit := b.limit
	if limit == 0 {
		limit = MemfdUIDBytes
	}
	return b.used+n <= limit
}

// give returns n bytes that take reserved.
func (b *MemfdBudget) give(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// held returns the bytes reserved.
func (b *MemfdBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// setIdle adds c to the idle caches, or takes it out.
func (b *MemfdBudget) setIdle(c *memfdCache, idle bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !idle {
		delete(b.idle, c)
		return
	}
	if b.idle == nil {
		b.idle = make(map[*memfdCache]struct{})
	}
	b.idle[c] = struct{}{}
}

// reclaimIdle empties the idle caches of the uid's connections other than
// c, until n bytes fit or none is left. The caller holds no cache's lock.
func (b *MemfdBudget) reclaimIdle(c *memfdCache, n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	caches := make([]*memfdCache, 0, len(b.idle))
	for o := range b.idle {
		if o != c {
			caches = append(caches, o)
		}
	}
	b.mu.Unlock()
	for _, o := range caches {
		o.expire(0)
		b.mu.Lock()
		fits := b.fitsLocked(n)
		b.mu.Unlock()
		if fits {
			return
		}
	}
}

// mapShared is mapMemfd through the cache and the daemon's shared
// mappings: it returns the bytes, the shared mapping they lie in (nil for
// a region of no bytes) and the function that lets go of them.
func (c *memfdCache) mapShared(fd int, off, length int64) ([]byte, *sharedMapping, func(), error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, nil, fmt.Errorf("memfd: fstat: %w", err)
	}
	key := memfdKey{dev: uint64(st.Dev), ino: st.Ino}
	c.mu.Lock()
	c.busyLocked()
	if c.shared == nil {
		c.shared = &sharedMaps{}
	}
	shared := c.shared
	if length > 0 && off >= 0 {
		for i, e := range c.entries {
			if e.sm.key == key && off >= e.sm.start && length <= e.sm.end-off {
				e.refs++
				c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e)
				c.mu.Unlock()
				return e.sm.bytes(off, length), e.sm, c.releaser(e), nil
			}
		}
	}
	c.mu.Unlock()
	sm, err := shared.acquire(fd, &st, key, off, length)
	if err != nil || sm == nil {
		return nil, nil, func() {}, err
	}
	data := sm.bytes(off, length)
	uncached := func() ([]byte, *sharedMapping, func(), error) {
		var once sync.Once
		return data, sm, func() { once.Do(func() { shared.release(sm) }) }, nil
	}
	n := int64(len(sm.mem))
	c.mu.Lock()
	defer c.mu.Unlock()
	_, again := c.seen[key]
	if c.closed || !again || n > memfdCacheBytes {
		if !again && !c.closed {
			if c.seen == nil || len(c.seen) >= memfdCacheSeen {
				c.seen = make(map[memfdKey]struct{})
			}
			c.seen[key] = struct{}{}
		}
		return uncached()
	}
	for i := 0; i < len(c.entries); {
		if old := c.entries[i]; old.sm.key == key { // another region of the same memfd
			c.dropLocked(i)
			continue
		}
		i++
	}
	c.boundLocked(n)
	if !c.budget.take(n) {
		// The uid's idle connections let go first, with c.mu released:
		// each takes its own lock.
		c.mu.Unlock()
		c.budget.reclaimIdle(c, n)
		c.mu.Lock()
		if c.closed {
			return uncached()
		}
		c.boundLocked(n)
		for !c.budget.take(n) {
			if len(c.entries) == 0 { // the uid's busy connections hold its budget
				return uncached()
			}
			c.dropLocked(0)
		}
	}
	e := &memfdMapping{sm: sm, refs: 1}
	c.entries = append(c.entries, e)
	c.bytes += n
	return data, sm, c.releaser(e), nil
}

// boundLocked drops the least recently used mappings until one of n more
// bytes fits the connection's bounds. c.mu is held.
func (c *memfdCache) boundLocked(n int64) {
	for len(c.entries) > 0 && (len(c.entries) >= memfdCacheEntries || c.bytes+n > memfdCacheBytes) {
		c.dropLocked(0)
	}
}

// releaser returns the function a batch calls once it no longer reads e.
func (c *memfdCache) releaser(e *memfdMapping) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			e.refs--
			unmap := e.refs == 0 && e.dead
			c.mu.Unlock()
			if unmap {
				c.shared.release(e.sm)
			}
		})
	}
}

// dropLocked takes entry i out of the cache, unmapping it if no batch reads
// it. c.mu is held.
func (c *memfdCache) dropLocked(i int) {
	e := c.entries[i]
	c.entries = append(c.entries[:i], c.entries[i+1:]...)
	c.bytes -= int64(len(e.sm.mem))
	c.budget.give(int64(len(e.sm.mem)))
	e.dead = true
	if e.refs == 0 {
		c.shared.release(e.sm)
	}
}

// dropAllLocked empties the cache and ends its idle period. c.mu is held.
func (c *memfdCache) dropAllLocked() {
	c.busyLocked()
	for len(c.entries) > 0 {
		c.dropLocked(len(c.entries) - 1)
	}
}

// busyLocked ends the idle period, if any: its expiry does nothing. c.mu
// is held.
func (c *memfdCache) busyLocked() {
	if !c.idling {
		return
	}
	c.idling = false
	c.idleGen++
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.budget.setIdle(c, false)
}

// idle starts an idle period (the memfds seen once stay known): the
// connection has no map output open, so nothing of it references the
// mappings. They are dropped after the grace period unless a batch comes
// first; a batch still reading one unmaps it when done.
func (c *memfdCache) idle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.idling {
		return
	}
	if c.grace <= 0 {
		c.dropAllLocked()
		return
	}
	// Scheduled even with nothing cached: a batch being mapped as the
	// connection's last map output ends (aborted by a removal) may still
	// add a mapping.
	c.idling = true
	c.idleGen++
	gen := c.idleGen
	c.budget.setIdle(c, true)
	after := c.afterFunc
	if after == nil {
		after = time.AfterFunc
	}
	c.timer = after(c.grace, func() { c.expire(gen) })
}

// expire empties the cache if it is still in idle period gen (0: any).
func (c *memfdCache) expire(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.idling || (gen != 0 && gen != c.idleGen) {
		return
	}
	c.dropAllLocked()
}

// close empties the cache for good: the connection has ended.
func (c *memfdCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.dropAllLocked()
	c.seen = nil
}

// len reports the mappings cached and their bytes.
func (c *memfdCache) len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}

// dropPages lets go of the pages of data, a part of a read-only shared
// mapping of a memfd, from the process's resident set (MADV_DONTNEED):
// the memfd keeps them, and a later read maps them again. The pages at
// either end may hold bytes of data's neighbours: reading those maps
// them again too.
func dropPages(data []byte) {
	if len(data) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	start := p &^ (page - 1)
	end := (p + uintptr(len(data)) + page - 1) &^ (page - 1)
	// The range is inside data's mapping (mmap maps whole pages), which
	// its caller keeps mapped throughout.
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_DONTNEED)
}

// populatePages reads the pages of data, a part of a read-only shared
// mapping of a memfd, into the process's resident set in one call
// (MADV_POPULATE_READ, Linux 5.14), and reports whether it did: on an
// older kernel the records fault them in as they read.
func populatePages(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	start := p &^ (page - 1)
	end := (p + uintptr(len(data)) + page - 1) &^ (page - 1)
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_POPULATE_READ)
	return errno == 0
}
