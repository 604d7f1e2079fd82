package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

func commitOne(t *testing.T, c *client.Client, shuffle int32, m int64) {
	t.Helper()
	ctx := context.Background()
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: shuffle, MapID: m, NumPartitions: 2, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatal(err)
	}
	if err := mo.WriteOpaque(ctx, []byte("some shuffle bytes"), []int64{0, 4, 18}); err != nil {
		t.Fatal(err)
	}
	if _, err := mo.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func indexes(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".index") {
			out = append(out, filepath.Base(path))
		}
		return nil
	})
	return out
}

// TestRemoveShuffle removes a shuffle while one of its map outputs is being
// written: committed outputs of it go, the open one is aborted, another
// shuffle and another application are untouched, and removing again frees
// nothing.
func TestRemoveShuffle(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	a, b := dial(t, d, "app-a"), dial(t, d, "app-b")
	for m := range int64(3) {
		commitOne(t, a, 1, m)
		commitOne(t, a, 2, m)
		commitOne(t, b, 1, m)
	}
	open, err := a.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 99, NumPartitions: 1, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatal(err)
	}
	if err := open.WriteOpaque(ctx, []byte("in flight"), []int64{0, 9}); err != nil {
		t.Fatal(err)
	}

	list, err := a.ListShuffles(ctx, "app-a")
	if err != nil || len(list) != 2 || list[0].ShuffleID != 1 || list[0].MapOutputs != 3 || list[0].Bytes <= 0 {
		t.Fatalf("ListShuffles(app-a) = %+v, %v; want shuffles 1 and 2 with 3 outputs each", list, err)
	}
	removed, err := a.RemoveShuffle(ctx, "app-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if removed.MapOutputs != 3 || removed.Bytes != list[0].Bytes {
		t.Errorf("RemoveShuffle = %+v, want 3 outputs and %d bytes", removed, list[0].Bytes)
	}
	if _, err := open.Commit(ctx); protocol.CodeOf(err) != protocol.CodeAborted {
		t.Errorf("Commit of an output of the removed shuffle = %v, want Aborted", err)
	}
	got := indexes(t, filepath.Join(d.root, "app-a"))
	for _, name := range got {
		if strings.HasPrefix(name, "shuffle_1_") {
			t.Errorf("%s of the removed shuffle is still there", name)
		}
	}
	if len(got) != 3 {
		t.Errorf("app-a has %d outputs left, want the 3 of shuffle 2: %v", len(got), got)
	}
	if n := len(indexes(t, filepath.Join(d.root, "app-b"))); n != 3 {
		t.Errorf("app-b has %d outputs, want its 3 untouched", n)
	}
	if again, err := a.RemoveShuffle(ctx, "app-a", 1); err != nil || again != (protocol.Removed{}) {
		t.Errorf("second RemoveShuffle = %+v, %v, want nothing freed", again, err)
	}

	removed, err = b.RemoveApplication(ctx, "app-b")
	if err != nil || removed.MapOutputs != 3 {
		t.Errorf("RemoveApplication(app-b) = %+v, %v, want 3 outputs", removed, err)
	}
	if _, err := os.Stat(filepath.Join(d.root, "app-b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("app-b's directory after RemoveApplication: %v, want gone", err)
	}
	// Only the registering uid may remove.
	if _, err := d.s.access(12345, "app-a"); protocol.CodeOf(protocolError(err)) != protocol.CodePermissionDenied {
		t.Errorf("access(12345, app-a) = %v, want PermissionDenied", err)
	}
}

func protocolError(err error) error {
	if err == nil {
		return nil
	}
	return protocol.Errorf(codeOf(err), "%v", err)
}

// TestDiskFull refuses new map outputs while the disk is below its low
// watermark, fails the in-flight one cleanly, and writes again once space
// is back above the high watermark.
func TestDiskFull(t *testing.T) {
	leakcheck.Check(t)
	var free atomic.Int64
	free.Store(100 << 20)
	statfs := func(string) (uint64, uint64, error) { return uint64(free.Load()), 1 << 30, nil }
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 1 << 20, PoolSize: 2,
		DiskLowWatermark: "10MiB", DiskHighWatermark: "20MiB"}
	d := startDaemonWith(t, cfg, WithDiskOptions(disks.WithStatfs(statfs), disks.WithRefresh(0)))
	ctx := context.Background()
	c := dial(t, d, "app")
	inflight, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatal(err)
	}
	free.Store(5 << 20) // the disk fills up under the open map output
	if err := inflight.WriteOpaque(ctx, make([]byte, 1<<20), []int64{0, 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := inflight.Commit(ctx); err == nil || !strings.Contains(err.Error(), "disk") {
		t.Errorf("Commit on a full disk = %v, want a disk full error", err)
	}
	_, err = c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 2, NumPartitions: 1, Kind: protocol.KindOpaque})
	if protocol.CodeOf(err) != protocol.CodeResourceExhausted || !strings.Contains(err.Error(), filepath.Join(dir, "root")) {
		t.Errorf("Open on a full disk = %v, want ResourceExhausted naming the disk", err)
	}
	free.Store(15 << 20) // between the watermarks: still full
	if _, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 3, NumPartitions: 1, Kind: protocol.KindOpaque}); protocol.CodeOf(err) != protocol.CodeResourceExhausted {
		t.Errorf("Open between the watermarks = %v, want ResourceExhausted", err)
	}
	free.Store(500 << 20)
	commitOne(t, c, 1, 4)
	if n := indexes(t, d.root); len(n) != 1 {
		t.Errorf("committed outputs %v, want only the one written after space came back", n)
	}
}

// TestFailingDisk takes a disk that fails with EIO out of rotation; map
// outputs go on on the other.
func TestFailingDisk(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	bad, good := filepath.Join(dir, "disk0"), filepath.Join(dir, "disk1")
	fsys := errorfs.New(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasPrefix(op.Path, bad+"/") && op.Kind != errorfs.OpRemove {
			return syscall.EIO
		}
		return nil
	}))
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: bad + "," + good, LimitBytes: 1 << 20, PoolSize: 2, DiskLowWatermark: "1MiB"}
	d := startDaemonWith(t, cfg, WithFS(fsys))
	ctx := context.Background()
	c := dial(t, d, "app")
	failed := 0
	for m := range int64(12) {
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: m, NumPartitions: 1, Kind: protocol.KindOpaque})
		if err == nil {
			if err = mo.WriteOpaque(ctx, []byte("x"), []int64{0, 1}); err == nil {
				_, err = mo.Commit(ctx)
			}
		}
		if err != nil {
			t.Logf("map output %d: %v", m, err)
			failed++
		}
	}
	if failed == 0 || failed > 3 {
		t.Errorf("%d of 12 map outputs failed, want between 1 and 3 (until the disk leaves rotation)", failed)
	}
	if n := len(indexes(t, good)); n != 12-failed {
		t.Errorf("%d outputs on the good disk, want %d", n, 12-failed)
	}
	var out bool
	for _, st := range d.s.disks.Stats() {
		if st.Dir == bad && !st.InRotation {
			out = true
		}
	}
	if !out {
		t.Errorf("the failing disk is still in rotation: %+v", d.s.disks.Stats())
	}
}

// TestRetention removes applications idle for longer than the retention:
// one registered since start whose connections are gone, and one left on
// disk by an earlier run; an application still connected stays.
func TestRetention(t *testing.T) {
	leakcheck.Check(t)
	const retention = time.Hour
	d := startDaemon(t, func(c *Config) { c.Retention = retention })
	ctx := context.Background()
	gone, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Register(ctx, protocol.RegisterExecutor{AppID: "gone", ExecutorID: "1"}); err != nil {
		t.Fatal(err)
	}
	commitOne(t, gone, 1, 1)
	gone.Close()
	stays := dial(t, d, "stays")
	commitOne(t, stays, 1, 1)
	old := filepath.Join(d.root, "from-before", "1")
	if err := os.MkdirAll(old, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "shuffle_1_1_0.data"), []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	// Wait for the server to see the disconnect.
	for deadline := time.Now().Add(5 * time.Second); ; {
		n := d.s.apps.sessionsOf("gone")
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not see the client leave")
		}
		time.Sleep(5 * time.Millisecond)
	}

	d.s.expire(time.Now()) // nothing is old enough yet
	for _, app := range []string{"gone", "stays", "from-before"} {
		if _, err := os.Stat(filepath.Join(d.root, app)); err != nil {
			t.Fatalf("%s removed before its retention: %v", app, err)
		}
	}
	d.s.expire(time.Now().Add(2 * retention))
	for app, want := range map[string]bool{"gone": false, "from-before": false, "stays": true} {
		_, err := os.Stat(filepath.Join(d.root, app))
		if exists := err == nil; exists != want {
			t.Errorf("%s exists = %v after the retention passed, want %v", app, exists, want)
		}
	}
}

// TestLifecycleMetrics checks the figures housekeeping exports, and that
// each commit's phases are observed.
func TestLifecycleMetrics(t *testing.T) {
	d := startDaemon(t, nil)
	c := dial(t, d, "app")
	commitOne(t, c, 1, 1)
	commitOne(t, c, 2, 1)
	d.s.exportDisks()
	body := scrape(t, d.s)
	for _, want := range []string{"shuffled_shuffles 2", "shuffled_applications 1", "shuffled_disks_out_of_rotation 0", `shuffled_disk_bytes{disk="` + d.root,
		`shuffled_commit_phase_duration_seconds_count{phase="encode_wait"} 2`, `shuffled_commit_phase_duration_seconds_count{phase="merge_tail"} 2`,
		`shuffled_commit_phase_duration_seconds_count{phase="files"} 2`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func scrape(t *testing.T, s *Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
