package disks

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shuffled/shuffled/testkit"
)

// fakeDisk is one disk of a fakeFS.
type fakeDisk struct {
	total, used uint64
	err         error
}

// fakeFS serves statfs figures for test directories: free is total less
// used, and writes add to used.
type fakeFS struct {
	mu    sync.Mutex
	disks map[string]*fakeDisk
	calls map[string]int
}

func newFakeFS() *fakeFS {
	return &fakeFS{disks: map[string]*fakeDisk{}, calls: map[string]int{}}
}

// add makes dir a disk of total bytes, used used, and returns dir resolved
// as New resolves it.
func (f *fakeFS) add(t testing.TB, dir string, total, used uint64) string {
	t.Helper()
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disks[resolved] = &fakeDisk{total: total, used: used}
	return resolved
}

func (f *fakeFS) statfs(dir string) (free, total uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[dir]++
	d := f.disks[dir]
	if d == nil {
		return 0, 0, &statfsError{dir}
	}
	if d.err != nil {
		return 0, 0, d.err
	}
	return d.total - min(d.used, d.total), d.total, nil
}

type statfsError struct{ dir string }

func (e *statfsError) Error() string { return "no fake disk " + e.dir }

// setUsed sets the bytes used on dir.
func (f *fakeFS) setUsed(dir string, used uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disks[dir].used = used
}

// write adds n bytes to the used bytes of dir.
func (f *fakeFS) write(dir string, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disks[dir].used += n
}

func (f *fakeFS) used(dir string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.disks[dir].used
}

func (f *fakeFS) setErr(dir string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disks[dir].err = err
}

func (f *fakeFS) callCount(dir string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[dir]
}

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeSet makes a Set of n fresh directories on fake disks of total bytes
// with used bytes used each, a fake clock, and a log buffer.
type fakeSet struct {
	*Set
	fs    *fakeFS
	clock *fakeClock
	dirs  []string
	log   *testkit.SyncBuffer
}

func newFakeSet(t testing.TB, n int, total, used uint64, opts ...Option) *fakeSet {
	t.Helper()
	f := &fakeSet{fs: newFakeFS(), clock: newFakeClock(), log: &testkit.SyncBuffer{}}
	for range n {
		f.dirs = append(f.dirs, f.fs.add(t, t.TempDir(), total, used))
	}
	all := append([]Option{
		WithStatfs(f.fs.statfs),
		WithClock(f.clock.Now),
		WithLogger(newTextLogger(f.log)),
	}, opts...)
	s, err := New(f.dirs, all...)
	if err != nil {
		t.Fatalf("New(%q) = %v", f.dirs, err)
	}
	f.Set = s
	return f
}

func newTextLogger(b *testkit.SyncBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
