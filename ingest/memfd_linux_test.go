package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/protocol"
	"golang.org/x/sys/unix"
)

// sealedTestMemfd returns a sealed memfd holding data at offset at (the
// bytes before it a hole).
func sealedTestMemfd(t *testing.T, data []byte, at int64) int {
	t.Helper()
	return namedTestMemfd(t, "cache", data, at)
}

// namedTestMemfd is sealedTestMemfd of a memfd named name (in
// /proc/self/maps, "/memfd:name").
func namedTestMemfd(t *testing.T, name string, data []byte, at int64) int {
	t.Helper()
	fd, err := unix.MemfdCreate(name, unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.Pwrite(fd, data, at); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	return fd
}

func dupFD(t *testing.T, fd int) int {
	t.Helper()
	d, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestMemfdCache checks that a connection's memfd cache maps a sealed memfd
// it sees again once and serves later batches from that mapping, that a
// memfd seen once is not kept, that a region outside the cached one is
// checked like a new memfd (holes, bounds), and that closing the cache
// unmaps what no batch reads, and the rest once it is released.
func TestMemfdCache(t *testing.T) {
	const size = 3 << 16
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	fd := sealedTestMemfd(t, data, size) // bytes [0, size) are a hole
	var c memfdCache
	var releases []func()
	get := func(off, length int64) []byte {
		t.Helper()
		b, release, err := c.mapFD(dupFD(t, fd), off, length)
		if err != nil {
			t.Fatalf("mapFD(%d, %d): %v", off, length, err)
		}
		if want := data[off-size : off-size+length]; !bytes.Equal(b, want) {
			t.Fatalf("mapFD(%d, %d) read other bytes than the memfd holds", off, length)
		}
		releases = append(releases, release)
		return b
	}
	get(size, size)
	if n, _ := c.len(); n != 0 {
		t.Errorf("after one batch of a memfd the cache holds %d mappings, want 0", n)
	}
	first := get(size, size)
	if n, b := c.len(); n != 1 || b != size {
		t.Errorf("after two batches of a memfd the cache holds %d mappings of %d bytes, want 1 of %d", n, b, size)
	}
	sub := get(size+100, 5000) // inside the cached region: served from it
	if &sub[0] != &first[100] {
		t.Error("a region inside the cached mapping was mapped again")
	}
	if n, _ := c.len(); n != 1 {
		t.Errorf("the cache holds %d mappings, want 1", n)
	}
	// Outside the cached region: checked as any region is.
	if _, _, err := c.mapFD(dupFD(t, fd), 0, size); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "hole") {
		t.Errorf("mapFD of the memfd's hole = %v, want an invalid-argument error about a hole", err)
	}
	if _, _, err := c.mapFD(dupFD(t, fd), size, size+1); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("mapFD past the memfd's end = %v, want an invalid-argument error", err)
	}
	for _, r := range releases[1:] {
		r()
	}
	c.close()
	if n, b := c.len(); n != 0 || b != 0 {
		t.Errorf("a closed cache holds %d mappings of %d bytes", n, b)
	}
	if _, release, err := c.mapFD(dupFD(t, fd), size, size); err != nil {
		t.Errorf("mapFD after close: %v", err)
	} else {
		release()
	}
	if n, _ := c.len(); n != 0 {
		t.Errorf("a closed cache took a mapping: %d", n)
	}
	releases[0]()
}

// TestMemfdCacheRefusesUnsealed checks that the cache maps no memfd that
// lacks the seals, however often it comes.
func TestMemfdCacheRefusesUnsealed(t *testing.T) {
	fd, err := unix.MemfdCreate("unsealed", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Pwrite(fd, make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	var c memfdCache
	defer c.close()
	for i := range 3 {
		if _, _, err := c.mapFD(dupFD(t, fd), 0, 4096); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "seals") {
			t.Errorf("batch %d: mapFD of an unsealed memfd = %v, want an invalid-argument error about seals", i, err)
		}
	}
}

// TestMemfdCacheBounds checks that the cache keeps at most
// memfdCacheEntries mappings, dropping the least recently used, and that
// a dropped mapping a batch still reads stays readable until released.
func TestMemfdCacheBounds(t *testing.T) {
	var c memfdCache
	defer c.close()
	var held []func()
	var firstBytes []byte
	for i := range memfdCacheEntries + 4 {
		data := bytes.Repeat([]byte{byte(i + 1)}, 4096)
		fd := sealedTestMemfd(t, data, 0)
		for j := range 2 {
			b, release, err := c.mapFD(dupFD(t, fd), 0, 4096)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 && j == 1 {
				firstBytes = b
				held = append(held, release)
			} else {
				release()
			}
		}
		if n, b := c.len(); n > memfdCacheEntries || b > memfdCacheBytes {
			t.Fatalf("the cache holds %d mappings of %d bytes, over its bounds", n, b)
		}
	}
	if n, _ := c.len(); n != memfdCacheEntries {
		t.Errorf("the cache holds %d mappings, want %d", n, memfdCacheEntries)
	}
	if !bytes.Equal(firstBytes, bytes.Repeat([]byte{1}, 4096)) { // dropped, still held
		t.Error("a dropped mapping a batch still holds changed")
	}
	for _, r := range held {
		r()
	}
}

// TestMemfdUIDBudget has two connections of one uid cache a memfd each,
// past the uid's budget: the second is served but not cached while the
// first holds the budget, and cached once the first connection's cache is
// dropped (no map output open: idle).
func TestMemfdUIDBudget(t *testing.T) {
	const size = 3 << 16
	budget := &MemfdBudget{limit: size + size/2}
	a, b := memfdCache{budget: budget}, memfdCache{budget: budget}
	defer a.close()
	defer b.close()
	data := bytes.Repeat([]byte("memfd budget "), size/13+1)[:size]
	fa, fb := sealedTestMemfd(t, data, 0), sealedTestMemfd(t, data, 0)
	twice := func(c *memfdCache, fd int) {
		t.Helper()
		for range 2 {
			mem, release, err := c.mapFD(dupFD(t, fd), 0, size)
			if err != nil || !bytes.Equal(mem, data) {
				t.Fatalf("mapFD: %v", err)
			}
			release()
		}
	}
	twice(&a, fa)
	if n, held := a.len(); n != 1 || budget.held() != held {
		t.Fatalf("first connection caches %d mappings of %d bytes, the budget holds %d; want 1, all of them", n, held, budget.held())
	}
	twice(&b, fb)
	if n, _ := b.len(); n != 0 {
		t.Errorf("second connection caches %d mappings past the uid's budget of %d bytes, want 0", n, budget.limit)
	}
	a.idle()
	if n, _ := a.len(); n != 0 || budget.held() != 0 {
		t.Errorf("an idle connection's cache holds %d mappings, the budget %d bytes; want none", n, budget.held())
	}
	twice(&b, fb)
	if n, _ := b.len(); n != 1 {
		t.Errorf("second connection caches %d mappings once the budget is free, want 1", n)
	}
}

// TestSparseMemfd refuses a memfd whose region was never written: reading
// its holes would allocate memory outside the limiter.
func TestSparseMemfd(t *testing.T) {
	fd, err := unix.MemfdCreate("sparse", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	_, _, err = mapMemfd(fd, 0, 1<<20) // takes fd
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "holes") {
		t.Errorf("mapMemfd of a sparse memfd = %v, want an invalid-argument error about holes", err)
	}
}

// TestMemfdRegionWithHoles refuses a memfd region that is a hole although
// the memfd has as many bytes written elsewhere: the rule is on the
// region's own pages (SEEK_HOLE), not on the memfd's total.
func TestMemfdRegionWithHoles(t *testing.T) {
	fd, err := unix.MemfdCreate("holes", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	const half = 1 << 20
	if _, err := unix.Pwrite(fd, make([]byte, half), half); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := mapMemfd(dup, 0, half); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "hole") {
		t.Errorf("mapMemfd of the unwritten first half = %v, want an invalid-argument error about a hole", err)
	}
	data, unmap, err := mapMemfd(fd, half, half)
	if err != nil || len(data) != half {
		t.Fatalf("mapMemfd of the written second half = %d bytes, %v", len(data), err)
	}
	unmap()
}

// mapsNamedMemfd reports how many mappings of this process are of the
// memfd named name.
func mapsNamedMemfd(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "/memfd:"+name+" ")
}

// idleClock stands in for the cache's timer: it keeps the expiries the
// cache schedules, for the test to run.
type idleClock struct {
	graces   []time.Duration
	expiries []func()
}

func (k *idleClock) afterFunc(d time.Duration, f func()) *time.Timer {
	k.graces = append(k.graces, d)
	k.expiries = append(k.expiries, f)
	return time.AfterFunc(time.Hour, func() {}) // stopped by the cache, never run
}

// cacheTwice maps bytes [0, len(data)) of fd through c twice (the second
// time cached), checks what it reads and releases both; it returns the
// address of the bytes the second batch read.
func cacheTwice(t *testing.T, c *memfdCache, fd int, data []byte) *byte {
	t.Helper()
	var p *byte
	for range 2 {
		mem, release, err := c.mapFD(dupFD(t, fd), 0, int64(len(data)))
		if err != nil {
			t.Fatalf("mapFD: %v", err)
		}
		if !bytes.Equal(mem, data) {
			t.Fatal("mapFD read other bytes than the memfd holds")
		}
		p = &mem[0]
		release()
	}
	return p
}

// TestMemfdCacheIdleGrace checks that a connection with no map output open
// keeps its mappings for the grace period: the next map output's batches
// are served from them (and end the idle period, whose expiry then does
// nothing), and the expiry of an idle period that ran its course unmaps
// them and gives the uid's budget back.
func TestMemfdCacheIdleGrace(t *testing.T) {
	const size = 3 << 16
	const name = "idle-grace"
	data := bytes.Repeat([]byte("idle grace "), size/11+1)[:size]
	fd := namedTestMemfd(t, name, data, 0)
	budget := &MemfdBudget{}
	var clock idleClock
	c := memfdCache{budget: budget, grace: 5 * time.Second, afterFunc: clock.afterFunc}
	defer c.close()
	first := cacheTwice(t, &c, fd, data)

	c.idle() // the map output committed
	if len(clock.expiries) != 1 || clock.graces[0] != 5*time.Second {
		t.Fatalf("idle scheduled expiries after %v, want one after 5s", clock.graces)
	}
	if n, b := c.len(); n != 1 || b != size || budget.held() != size {
		t.Fatalf("an idle cache in its grace period holds %d mappings of %d bytes, the budget %d; want 1 of %d, all of them", n, b, budget.held(), size)
	}
	mem, release, err := c.mapFD(dupFD(t, fd), 0, size) // the next map output's batch
	if err != nil {
		t.Fatal(err)
	}
	if &mem[0] != first {
		t.Error("the next map output's batch mapped the memfd again instead of using the kept mapping")
	}
	release()
	clock.expiries[0]() // too late: the connection is busy again
	if n, _ := c.len(); n != 1 || mapsNamedMemfd(t, name) != 1 {
		t.Errorf("the expiry of an idle period a batch ended dropped the cache: %d mappings, %d in /proc/self/maps; want 1 and 1", n, mapsNamedMemfd(t, name))
	}

	c.idle()
	c.idle() // again: the first deadline stands
	if len(clock.expiries) != 2 {
		t.Fatalf("two idle calls in one idle period scheduled %d expiries in all, want 2", len(clock.expiries))
	}
	clock.expiries[1]()
	if n, b := c.len(); n != 0 || b != 0 || budget.held() != 0 {
		t.Errorf("after its grace period an idle cache holds %d mappings of %d bytes, the budget %d; want none", n, b, budget.held())
	}
	if n := mapsNamedMemfd(t, name); n != 0 {
		t.Errorf("after the grace period the memfd is still mapped %d times, want 0", n)
	}
	if second := cacheTwice(t, &c, fd, data); c.len1() != 1 || second == nil {
		t.Errorf("after an expired idle period the memfd is not cached again at its next batch")
	}
}

// len1 reports how many mappings c caches.
func (c *memfdCache) len1() int {
	n, _ := c.len()
	return n
}

// TestMemfdCacheIdleClose checks that an idle cache's mappings go at once
// when its connection ends, grace period or not, and that the expiry
// scheduled before does nothing then.
func TestMemfdCacheIdleClose(t *testing.T) {
	const name = "idle-close"
	data := bytes.Repeat([]byte{7}, 8192)
	fd := namedTestMemfd(t, name, data, 0)
	budget := &MemfdBudget{}
	var clock idleClock
	c := memfdCache{budget: budget, grace: time.Minute, afterFunc: clock.afterFunc}
	cacheTwice(t, &c, fd, data)
	c.idle()
	c.close()
	if n, b := c.len(); n != 0 || b != 0 || budget.held() != 0 || mapsNamedMemfd(t, name) != 0 {
		t.Errorf("a closed idle cache holds %d mappings of %d bytes, the budget %d, the process maps the memfd %d times; want none", n, b, budget.held(), mapsNamedMemfd(t, name))
	}
	budget.mu.Lock()
	idle := len(budget.idle)
	budget.mu.Unlock()
	if idle != 0 {
		t.Errorf("the budget lists %d idle caches after the only one closed, want 0", idle)
	}
	clock.expiries[0]()
	if n, _ := c.len(); n != 0 {
		t.Errorf("the expiry after close left %d mappings", n)
	}
}

// TestMemfdCacheIdleGivesWay has one connection of a uid keep a mapping
// while idle and another need the uid's budget: the idle one's mapping goes
// and the busy one's is cached, the budget never holding more than its
// limit; a busy connection's mappings are never taken that way.
func TestMemfdCacheIdleGivesWay(t *testing.T) {
	const size = 3 << 16
	budget := &MemfdBudget{limit: size + size/2}
	var clock idleClock
	a := memfdCache{budget: budget, grace: time.Minute, afterFunc: clock.afterFunc}
	b := memfdCache{budget: budget, grace: time.Minute, afterFunc: clock.afterFunc}
	defer a.close()
	defer b.close()
	da := bytes.Repeat([]byte("a"), size)
	db := bytes.Repeat([]byte("b"), size)
	fa, fb := namedTestMemfd(t, "gives-way-a", da, 0), namedTestMemfd(t, "gives-way-b", db, 0)

	cacheTwice(t, &a, fa, da)
	cacheTwice(t, &b, fb, db) // a is busy: b's mapping is not cached
	if a.len1() != 1 || b.len1() != 0 || budget.held() != size {
		t.Fatalf("with a busy: a caches %d, b %d, the budget holds %d; want 1, 0, %d", a.len1(), b.len1(), budget.held(), size)
	}
	a.idle()
	cacheTwice(t, &b, fb, db)
	if a.len1() != 0 || b.len1() != 1 || budget.held() != size {
		t.Errorf("with a idle: a caches %d, b %d, the budget holds %d; want 0, 1, %d", a.len1(), b.len1(), budget.held(), size)
	}
	if n := mapsNamedMemfd(t, "gives-way-a"); n != 0 {
		t.Errorf("the idle connection's mapping that gave way is still mapped %d times", n)
	}
	if len(clock.expiries) != 1 {
		t.Fatalf("%d expiries scheduled, want 1", len(clock.expiries))
	}
	clock.expiries[0]() // a's idle period already ended
	if b.len1() != 1 || budget.held() != size {
		t.Errorf("a's stale expiry changed b's cache (%d) or the budget (%d)", b.len1(), budget.held())
	}
}

// TestMemfdCacheIdleReplacedMemfd has a client close a memfd whose mapping
// an idle connection keeps and send a new one with other bytes: the new
// memfd is another file (the kept mapping holds the old one's inode), so
// its batches read its own bytes, never the kept mapping's.
func TestMemfdCacheIdleReplacedMemfd(t *testing.T) {
	const size = 1 << 16
	var clock idleClock
	c := memfdCache{budget: &MemfdBudget{}, grace: time.Minute, afterFunc: clock.afterFunc}
	defer c.close()
	for i := range 4 {
		data := bytes.Repeat([]byte{byte('0' + i)}, size)
		fd, err := unix.MemfdCreate(fmt.Sprint("replaced-", i), unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Pwrite(fd, data, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, requiredSeals); err != nil {
			t.Fatal(err)
		}
		cacheTwice(t, &c, fd, data) // checks the bytes read
		unix.Close(fd)              // the client is done with it
		c.idle()
		if n, _ := c.len(); n != i+1 {
			t.Errorf("after memfd %d the cache holds %d mappings, want %d", i, n, i+1)
		}
	}
}

// rssShmem returns this process's RssShmem in bytes.
func rssShmem(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssShmem:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				t.Fatalf("RssShmem %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssShmem in /proc/self/status")
	return 0
}

// mapsName reports whether /proc/self/maps has a mapping of name.
func mapsName(t *testing.T, name string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte(name))
}

// TestApplyMemfdHoldsOnlyWhatIsRead checks a memfd batch larger than
// MemfdResidentBytes: while its records wait for the worker, none of its
// pages is resident in the process (the region is not populated, and what
// the writer's checks read is let go); Apply returns only once no record
// reads it, with the region unmapped (the client may close the memfd and
// get its pages back at BatchAccepted).
func TestApplyMemfdHoldsOnlyWhatIsRead(t *testing.T) {
	data := make([]byte, MemfdResidentBytes+16<<20)
	for i := range data {
		data[i] = byte(i / 512)
	}
	const name = "apply-held"
	fd := namedTestMemfd(t, name, data, 0)
	m := opaqueBatch(protocol.PlaneMemfd, data, 64)
	m.Region = protocol.Region{Offset: 0, Length: int64(len(data))}
	base := rssShmem(t)
	h := &testHeld{fd: dupFD(t, fd)}
	n, err, unmapped := applyHeld(t, m, h, func() bool { return !mapsName(t, "memfd:"+name) }, func() {
		if !mapsName(t, "memfd:"+name) {
			t.Error("the batch's region is not mapped while its records wait")
		}
		if got := rssShmem(t) - base; got > 1<<20 {
			t.Errorf("%d KiB of the batch resident while its records wait for a worker, want none (at most 1 MiB)", got>>10)
		}
	})
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Apply = %d, %v; want %d, nil", n, err, len(data))
	}
	if !unmapped {
		t.Error("Apply returned with the batch's region still mapped")
	}
}

// mapFD is mapShared without the shared mapping, as most tests want it.
func (c *memfdCache) mapFD(fd int, off, length int64) ([]byte, func(), error) {
	data, _, release, err := c.mapShared(fd, off, length)
	return data, release, err
}

// mapNamed maps the whole of a new sealed memfd named name holding data
// through c, and returns its bytes, its shared mapping and the function
// that lets go of them.
func mapNamed(t *testing.T, c *memfdCache, name string, data []byte) ([]byte, *sharedMapping, func()) {
	t.Helper()
	b, sm, release, err := c.mapShared(dupFD(t, namedTestMemfd(t, name, data, 0)), 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return b, sm, release
}

// TestResidentPagesBound checks the account of resident memfd pages: a
// small batch is read in whole as it is added, and stays resident while
// a large one's pages come in as records read them and go each time their
// count reaches a quarter of the bound, so that reading a batch four
// times the bound keeps at most the small batch, a quarter of the bound
// and a record resident; a small batch past what is left of the bound is
// not read in whole; a small batch's pages stay kept, and counted, once it
// ends, until their mapping is unmapped.
func TestResidentPagesBound(t *testing.T) {
	const bound = 8 << 20
	r := &residentPages{bound: bound}
	c := &memfdCache{shared: &sharedMaps{resident: r}}
	defer c.close()
	small := make([]byte, 1<<20)
	large := make([]byte, 4*bound)
	for i := range large {
		large[i] = byte(i / 4096)
	}
	smallData, smallMap, smallRelease := mapNamed(t, c, "resident-small", small)
	largeData, largeMap, largeRelease := mapNamed(t, c, "resident-large", large)
	base := rssShmem(t)
	opaque := &protocol.Batch{Kind: protocol.KindOpaque}
	ds := r.add(smallData, smallMap, opaque)
	if got := rssShmem(t) - base; !ds.whole || got < int64(len(small)) {
		t.Errorf("a batch of an eighth of the bound: read in whole %v, %d KiB resident after add, want all %d KiB", ds.whole, got>>10, len(small)>>10)
	}
	dl := r.add(largeData, largeMap, opaque)
	if dl.whole {
		t.Error("a batch of four times the bound was read in whole")
	}
	const rec = 1 << 20
	var peak int64
	sum := 0
	for off := 0; off < len(largeData); off += rec {
		for i := off; i < off+rec; i += 4096 {
			sum += int(largeData[i]) // a record reads its bytes
		}
		dl.read(rec)
		peak = max(peak, rssShmem(t)-base)
	}
	if want := int64(len(small) + bound/4 + 2*rec); peak > want {
		t.Errorf("reading a batch of %d MiB kept %d KiB resident at most, want at most the small batch's, a quarter of the bound and a record's, %d KiB", len(large)>>20, peak>>10, want>>10)
	}
	if got := rssShmem(t) - base; got < int64(len(small)) {
		t.Errorf("after the large batch's reads, %d KiB resident: the small batch's pages (%d KiB) were let go", got>>10, len(small)>>10)
	}
	r.end(dl)
	largeRelease()
	// Batches of the same region share its count; regions of other
	// memfds are read in whole up to the bound; the next one is not.
	same := r.add(smallData, smallMap, opaque)
	if same.kept != ds.kept || r.whole != int64(len(small)) {
		t.Errorf("a second batch of the region: its kept region shared %v, %d bytes counted whole; want shared, %d", same.kept == ds.kept, r.whole, len(small))
	}
	var fill []*pageDropper
	for i := 0; r.whole+int64(len(small)) <= bound; i++ {
		data, sm, release := mapNamed(t, c, fmt.Sprintf("resident-fill-%d", i), small)
		defer release()
		fill = append(fill, r.add(data, sm, opaque))
		if !fill[len(fill)-1].whole {
			t.Fatalf("small batch %d not read in whole with %d of %d bytes counted", len(fill), r.whole, bound)
		}
	}
	pastData, pastMap, pastRelease := mapNamed(t, c, "resident-past", small)
	if past := r.add(pastData, pastMap, opaque); past.whole {
		t.Errorf("a small batch past the bound (%d of %d bytes counted) was read in whole", r.whole, bound)
	} else {
		r.end(past)
	}
	pastRelease()
	r.end(ds)
	r.end(same)
	for _, d := range fill {
		r.end(d)
	}
	if want := int64(len(fill)+1) * int64(len(small)); r.whole != want || r.idle.Len() != len(fill)+1 || r.read != 0 || len(r.reading) != 0 {
		t.Errorf("after every batch ended: %d bytes counted whole, %d idle kept regions, %d read, %d batches reading; want %d, %d, none", r.whole, r.idle.Len(), r.read, len(r.reading), want, len(fill)+1)
	}
	if got := rssShmem(t) - base; got < int64(len(small)) {
		t.Errorf("after the small batches ended, %d KiB resident: their kept pages (%d KiB) were let go", got>>10, len(small)>>10)
	}
	for _, d := range fill {
		r.forget(d.sm) // as if their mappings went
	}
	again := r.add(smallData, smallMap, opaque)
	if again.kept == nil || r.whole != int64(len(small)) || r.idle.Len() != 0 {
		t.Errorf("a batch of the kept region: kept %v, %d bytes counted whole, %d idle; want the region reused, %d bytes, none idle", again.kept != nil, r.whole, r.idle.Len(), len(small))
	}
	r.end(again)
	smallRelease() // the last reference: the mapping goes, and its kept region
	if r.whole != 0 || r.idle.Len() != 0 || smallMap.kept != nil {
		t.Errorf("after the mapping went: %d bytes counted whole, %d idle kept regions; want none", r.whole, r.idle.Len())
	}
	if sum < 0 {
		t.Fatal("unreachable: keeps the reads")
	}
}

// TestKeptRegionsMakeRoom checks that idle kept regions give their room,
// least recently used first, to a batch that needs it, their pages let go.
func TestKeptRegionsMakeRoom(t *testing.T) {
	const bound = 8 << 20
	r := &residentPages{bound: bound}
	c := &memfdCache{shared: &sharedMaps{resident: r}}
	defer c.close()
	opaque := &protocol.Batch{Kind: protocol.KindOpaque}
	region := make([]byte, bound/8)
	var maps []*sharedMapping
	for i := range 9 { // 9 regions of an eighth of the bound: one too many
		data, sm, release := mapNamed(t, c, fmt.Sprintf("kept-%d", i), region)
		defer release()
		d := r.add(data, sm, opaque)
		if !d.whole {
			t.Fatalf("region %d not read in whole with %d of %d bytes counted", i, r.whole, bound)
		}
		r.end(d)
		maps = append(maps, sm)
	}
	if maps[0].kept != nil || maps[1].kept == nil || maps[8].kept == nil {
		t.Errorf("kept after the ninth region: first %v, second %v, ninth %v; want the least recently used (the first) let go",
			maps[0].kept != nil, maps[1].kept != nil, maps[8].kept != nil)
	}
	if r.whole != bound {
		t.Errorf("%d bytes counted whole, want the bound's %d", r.whole, bound)
	}
}

// TestSharedMappings checks that two connections' caches reading the same
// memfd share one mapping, which goes when the last of them lets go.
func TestSharedMappings(t *testing.T) {
	shared := &sharedMaps{}
	a, b := &memfdCache{shared: shared}, &memfdCache{shared: shared}
	const name = "shared-mapping"
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	fd := namedTestMemfd(t, name, data, 0)
	da, sa, ra, err := a.mapShared(dupFD(t, fd), 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	db, sb, rb, err := b.mapShared(dupFD(t, fd), 4096, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if sa != sb || !bytes.Equal(db, data[4096:4096+8192]) || !bytes.Equal(da, data) {
		t.Fatalf("the second connection's read: shared %v, bytes right %v", sa == sb, bytes.Equal(db, data[4096:4096+8192]))
	}
	ra()
	if !mapsName(t, "memfd:"+name) {
		t.Error("the mapping went while the second connection's batch read it")
	}
	rb()
	if mapsName(t, "memfd:"+name) {
		t.Error("the mapping stayed after both batches let go")
	}
	a.close()
	b.close()
}
