package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// TestListShufflesCoversLocalDirs lists an application whose outputs are in
// its Spark local dirs.
func TestListShufflesCoversLocalDirs(t *testing.T) {
	d, local, _ := sparkDaemon(t, nil)
	c := registerLocal(t, d, "app", local)
	for m := range int64(2) {
		if _, err := writeAndCommit(c, 3, m, "bytes"); err != nil {
			t.Fatal(err)
		}
	}
	list, err := c.ListShuffles(context.Background(), "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ShuffleID != 3 || list[0].MapOutputs != 2 || list[0].Bytes <= 0 {
		t.Errorf("ListShuffles = %+v, want shuffle 3 with 2 map outputs and their bytes", list)
	}
}

// TestRestartKeepsLocalDirs restarts the daemon on the same root: the
// outputs it wrote into Spark local dirs before are listed and removed
// without a new registration, a temp file a crash left there is swept at
// start, and the application still belongs to the uid that registered it.
func TestRestartKeepsLocalDirs(t *testing.T) {
	allowed := t.TempDir()
	local := filepath.Join(allowed, "blockmgr-a")
	if err := os.Mkdir(local, 0o770); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2, AllowedRoots: []string{allowed}}
	d := startDaemonWith(t, cfg)
	c := registerLocal(t, d, "app", local)
	for m := range int64(2) {
		if _, err := writeAndCommit(c, 3, m, "bytes"); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	d.stop(t)
	l := shufflefile.SparkHashed{LocalDirs: []string{local}, SubDirs: 64}
	crashTemp := shufflefile.TempName(shufflefile.Path(l, shufflefile.DataName(shufflefile.ID{Shuffle: 3, Map: 9})))
	if err := os.MkdirAll(filepath.Dir(crashTemp), 0o770); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crashTemp, []byte("left by a crash"), 0o600); err != nil {
		t.Fatal(err)
	}

	d = startDaemonWith(t, cfg)
	if _, err := os.Stat(crashTemp); !os.IsNotExist(err) {
		t.Errorf("temp file in a Spark local dir after a restart: %v, want it swept at start", err)
	}
	c = dial(t, d, "other")
	ctx := context.Background()
	list, err := c.ListShuffles(ctx, "app")
	if err != nil || len(list) != 1 || list[0].MapOutputs != 2 {
		t.Errorf("ListShuffles after a restart = %+v, %v; want shuffle 3 with 2 map outputs", list, err)
	}
	removed, err := c.RemoveApplication(ctx, "app")
	if err != nil || removed.MapOutputs != 2 {
		t.Errorf("RemoveApplication after a restart = %+v, %v; want 2 map outputs removed", removed, err)
	}
	if got := indexes(t, local); len(got) != 0 {
		t.Errorf("index files left in the Spark local dir: %v", got)
	}
	if _, err := os.Stat(local); err != nil {
		t.Errorf("the Spark local dir itself: %v, want it kept (it is the executor's)", err)
	}
	rf := readRegistry(t, filepath.Join(cfg.Root, disks.RegistryName))
	if i := slices.IndexFunc(rf.Apps, func(ra registeredApp) bool { return ra.App == "app" }); i < 0 || rf.Apps[i].Removed == 0 || len(rf.Apps[i].Local) != 0 {
		t.Errorf("registry file after app was removed = %+v, want app's tombstone, without dirs", rf)
	}
}

func readRegistry(t *testing.T, path string) registryFile {
	t.Helper()
	rf, err := readRegistryFiles(vfs.Default, path)
	if err != nil {
		t.Fatalf("registry file %s: %v", path, err)
	}
	return rf
}

// TestRegistryFileDamaged starts on a registry file that does not parse:
// the daemon refuses to start, naming the file, and keeps it as it is (what
// it names, every application's owner, is not lost to a save).
func TestRegistryFileDamaged(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	plantOutput(t, filepath.Join(root, "flat-app", "1"), 1, 0)
	path := filepath.Join(root, disks.RegistryName)
	damaged := []byte("{not json")
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	refusesRegistry(t, Config{SocketPath: filepath.Join(dir, "s.sock"), Root: root, LimitBytes: 4 << 20, PoolSize: 2}, path, "")
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, damaged) {
		t.Errorf("registry file = %q, %v; want the damaged file kept as it was, %q", b, err, damaged)
	}
}

// TestRegistryFileTooLarge starts on a registry file past the size the
// daemon reads: it refuses to start and keeps the file, never to replace it
// by a save that would forget every application it names.
func TestRegistryFileTooLarge(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, disks.RegistryName)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxRegistryFile + 1); err != nil { // sparse
		t.Fatal(err)
	}
	f.Close()
	refusesRegistry(t, Config{SocketPath: filepath.Join(dir, "s.sock"), Root: root, LimitBytes: 4 << 20, PoolSize: 2}, path, "larger than")
	if fi, err := os.Stat(path); err != nil || fi.Size() != maxRegistryFile+1 {
		t.Errorf("registry file: %v, %v; want it kept at %d bytes", fi, err, maxRegistryFile+1)
	}
}

// refusesRegistry starts a daemon on cfg, whose registry file at path is
// damaged: New must refuse, naming the file and saying want.
func refusesRegistry(t *testing.T, cfg Config, path, want string) {
	t.Helper()
	s, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		t.Fatalf("New on the damaged registry file %s started", path)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) || !registryDamaged(err) {
		t.Errorf("New on the damaged registry file = %v, want a damaged-registry error naming %s and saying %q", err, path, want)
	}
}

// TestResponseOverMaxFrame lists more shuffles than a ShuffleList of
// max_frame bytes holds: the answer is ResourceExhausted, never a frame
// past max_frame.
func TestResponseOverMaxFrame(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.MaxFrame = protocol.MinMaxFrame })
	dir := filepath.Join(d.root, "app", "1")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	n := protocol.MinMaxFrame/20 + 1 // 20 bytes per shuffle_info
	for s := range n {
		if err := os.WriteFile(filepath.Join(dir, shufflefile.IndexName(shufflefile.ID{Shuffle: int32(s)})), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := dial(t, d, "app")
	if _, err := c.ListShuffles(context.Background(), "app"); protocol.CodeOf(err) != protocol.CodeResourceExhausted {
		t.Errorf("ListShuffles of %d shuffles with max_frame %d = %v, want ResourceExhausted", n, protocol.MinMaxFrame, err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Errorf("Ping after: %v", err)
	}
}

// TestRegistryLogReplay registers, removes and registers again without a
// stop (as a crash leaves the files), then reads the files back as a start
// would: the snapshot and the log together name every change; a torn last
// line is ignored; a log the snapshot does not name (a compaction cut
// short) is ignored; a damaged line before the last is a damaged registry.
func TestRegistryLogReplay(t *testing.T) {
	d := startDaemon(t, nil)
	for i, step := range []struct {
		app    string
		remove bool
	}{{"a", false}, {"b", false}, {"a", true}, {"c", false}} {
		if step.remove {
			if _, err := d.s.removeApplicationFor(peerA, step.app); err != nil {
				t.Fatal(err)
			}
			continue
		}
		end, err := registerAs(d, peerA, protocol.RegisterExecutor{AppID: step.app, ExecutorID: strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		end()
	}
	path := d.s.persist.path
	want := "a:removed b c"
	names := func(rf registryFile) string {
		var out []string
		for _, ra := range rf.Apps {
			n := ra.App
			if ra.Removed != 0 {
				n += ":removed"
			}
			if ra.UID != peerA {
				n += ":uid" + strconv.Itoa(int(ra.UID))
			}
			out = append(out, n)
		}
		return strings.Join(out, " ")
	}
	if got := names(readRegistry(t, path)); got != want {
		t.Errorf("registry files name %q, want %q", got, want)
	}
	// The snapshot alone holds only what was there when the log began.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var snap registryFile
	if err := json.Unmarshal(b, &snap); err != nil || len(snap.Apps) != 1 || snap.Log == "" {
		t.Errorf("snapshot = %s (%v), want application a alone and a log's id", b, err)
	}

	logPath := logPathOf(path)
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, log, want, damaged string
	}{
		{"torn-last-line", string(log) + `{"seq":99,"op":"drop","app":"b"`, want, ""},
		{"other-log", strings.Replace(string(log), snap.Log, "0000000000000000", 1), "a", ""},
		{"damaged-line", strings.Replace(string(log), `"op":"remove"`, `"op":`, 1), "", "line 3"},
		{"unknown-op", strings.Replace(string(log), `"op":"remove"`, `"op":"rename"`, 1), "", "unknown op"},
	} {
		if err := os.WriteFile(logPath, []byte(tc.log), 0o600); err != nil {
			t.Fatal(err)
		}
		rf, err := readRegistryFiles(vfs.Default, path)
		switch {
		case tc.damaged != "":
			if !registryDamaged(err) || !strings.Contains(err.Error(), tc.damaged) {
				t.Errorf("%s: %v, want a damaged registry naming %q", tc.name, err, tc.damaged)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case names(rf) != tc.want:
			t.Errorf("%s: registry files name %q, want %q", tc.name, names(rf), tc.want)
		}
	}
	if err := os.WriteFile(logPath, log, 0o600); err != nil {
		t.Fatal(err)
	}

	// A start on the files knows every owner, and compacts on its first
	// change.
	d.stop(t)
	d2 := startDaemonWith(t, Config{SocketPath: d.socket + "2", Root: d.root, LimitBytes: 4 << 20, PoolSize: 2})
	if _, err := registerAs(d2, peerB, protocol.RegisterExecutor{AppID: "c", ExecutorID: "9"}); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d registers c after a restart = %v, want PermissionDenied", peerB, err)
	}
	if _, err := registerAs(d2, peerB, protocol.RegisterExecutor{AppID: "a", ExecutorID: "9"}); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d registers a (removed) after a restart = %v, want PermissionDenied", peerB, err)
	}
	end, err := registerAs(d2, peerB, protocol.RegisterExecutor{AppID: "d", ExecutorID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	end()
	if got := names(readRegistry(t, path)); got != want+" d:uid"+strconv.Itoa(int(peerB)) {
		t.Errorf("registry files after the restart name %q", got)
	}
}
