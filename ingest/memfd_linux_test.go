package ingest

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/errdefs"
	"golang.org/x/sys/unix"
)

// sealedTestMemfd returns a sealed memfd holding data at offset at (the
// bytes before it a hole).
func sealedTestMemfd(t *testing.T, data []byte, at int64) int {
	t.Helper()
	fd, err := unix.MemfdCreate("cache", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
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
