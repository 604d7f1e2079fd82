package server

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/vfs"
)

// TestApplicationsFor: a uid sees its own applications only; root and the
// daemon's uid see every one, those with no recorded owner included (-1).
func TestApplicationsFor(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	// An application in the root from before the registry file: no owner.
	plantOutput(t, filepath.Join(cfg.Root, "legacy", "1"), 0, 0)
	d := startDaemonWith(t, cfg)
	for _, r := range []struct {
		uid uint32
		app string
	}{{peerA, "app-a"}, {peerB, "app-b"}} {
		end, err := registerAs(d, r.uid, protocol.RegisterExecutor{AppID: r.app, ExecutorID: "1"})
		if err != nil {
			t.Fatal(err)
		}
		defer end()
	}
	plantOutput(t, filepath.Join(cfg.Root, "app-a", "1"), 2, 0)
	plantOutput(t, filepath.Join(cfg.Root, "app-a", "1"), 2, 1)
	plantOutput(t, filepath.Join(cfg.Root, "app-a", "1"), 5, 0)

	ids := func(list []protocol.ApplicationInfo) []string {
		var out []string
		for _, a := range list {
			out = append(out, a.AppID)
		}
		return out
	}
	got, err := d.s.applicationsFor(peerA)
	if err != nil || len(got) != 1 {
		t.Fatalf("applicationsFor(%d) = %v, %v; want app-a alone", peerA, ids(got), err)
	}
	want := protocol.ApplicationInfo{AppID: "app-a", OwnerUID: int64(peerA), Connections: 1, Shuffles: 2, MapOutputs: 3, Bytes: 6 * 8}
	if got[0] != want {
		t.Errorf("applicationsFor(%d) = %+v, want %+v", peerA, got[0], want)
	}
	if got, err := d.s.applicationsFor(peerB); err != nil || len(got) != 1 || got[0].AppID != "app-b" || got[0].MapOutputs != 0 {
		t.Errorf("applicationsFor(%d) = %+v, %v; want app-b alone, empty", peerB, got, err)
	}
	if got, err := d.s.applicationsFor(4444); err != nil || len(got) != 0 {
		t.Errorf("applicationsFor(a uid with none) = %+v, %v; want none", got, err)
	}
	self := uint32(os.Getuid())
	got, err = d.s.applicationsFor(self)
	if err != nil || len(got) != 3 || got[0].AppID != "app-a" || got[1].AppID != "app-b" || got[2].AppID != "legacy" {
		t.Fatalf("applicationsFor(the daemon's uid) = %v, %v; want app-a, app-b, legacy", ids(got), err)
	}
	if got[0] != want {
		t.Errorf("the daemon's uid sees %+v, want %+v (the owner's figures)", got[0], want)
	}
	if got[2].OwnerUID != -1 || got[2].MapOutputs != 1 {
		t.Errorf("legacy = %+v, want no owner (-1) and 1 map output", got[2])
	}
	if err := (&protocol.ApplicationList{Applications: got}).Validate(); err != nil {
		t.Errorf("the list does not validate: %v", err)
	}
}

// countingFS counts the directory entries its ReadDir calls return and its
// Lstat calls: what a request reads.
type countingFS struct {
	vfs.FS
	entries, lstats atomic.Int64
}

func (c *countingFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	ents, err := c.FS.ReadDir(dir)
	c.entries.Add(int64(len(ents)))
	return ents, err
}

func (c *countingFS) Lstat(name string) (fs.FileInfo, error) {
	c.lstats.Add(1)
	return c.FS.Lstat(name)
}

// plainDirs makes n empty directories in root, named d0000000 on.
func plainDirs(t *testing.T, root string, n int) {
	t.Helper()
	if err := os.MkdirAll(root, 0o750); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("d%07d", i)), 0o750); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListApplicationsLinear: ListApplications reads each of the root's
// entries a bounded number of times, whatever their number (it read the
// root's whole directory once per application); past what one
// ApplicationList holds it answers ResourceExhausted, at 100,000
// directories, without reading their trees.
func TestListApplicationsLinear(t *testing.T) {
	const n = 3000
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	cfs := &countingFS{FS: vfs.Default}
	d := startDaemonWith(t, cfg, WithFS(cfs))
	plainDirs(t, cfg.Root, n) // copied in while it runs: its start does not walk them
	self := uint32(os.Getuid())
	e0, l0 := cfs.entries.Load(), cfs.lstats.Load()
	got, err := d.s.applicationsFor(self)
	if err != nil || len(got) != n {
		t.Fatalf("applicationsFor(the daemon's uid) = %d applications, %v; want %d", len(got), err, n)
	}
	if entries, lstats := cfs.entries.Load()-e0, cfs.lstats.Load()-l0; entries > 2*n || lstats > 4*n {
		t.Errorf("listing %d applications read %d directory entries and %d Lstats, want at most %d and %d: linear in the root", n, entries, lstats, 2*n, 4*n)
	}

	const many = 100_000
	dir = memDir(t)
	cfg = Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	d = startDaemonWith(t, cfg)
	plainDirs(t, cfg.Root, many)
	r := dialRaw(t, d)
	if _, m := r.call(1, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "raw"}); m.Type() != protocol.TypeServerHello {
		t.Fatalf("Hello answered %v", m)
	}
	start := time.Now()
	id, m := r.call(2, &protocol.ListApplications{})
	if e, ok := m.(*protocol.Error); id != 2 || !ok || e.Code != protocol.CodeResourceExhausted || !strings.Contains(e.Message, fmt.Sprint(protocol.MaxApplications)) {
		t.Errorf("ListApplications of %d applications answered %d %v, want ResourceExhausted naming %d", many, id, m, protocol.MaxApplications)
	}
	t.Logf("ListApplications of %d directories answered in %v", many, time.Since(start))
}

// memDir is a fresh directory in memory (tmpfs) where the system has one,
// else t.TempDir(): a hundred thousand directories are made and removed
// in a second there.
func memDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "shuffled-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}
