package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
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
	if _, err := os.Stat(filepath.Join(cfg.Root, disks.RegistryName)); !os.IsNotExist(err) {
		t.Errorf("registry file after its last application was removed: %v, want none", err)
	}
}

// TestRegistryFileDamaged starts on a registry file that does not parse:
// the daemon serves (it forgets only the local dirs of earlier runs), and
// its next save replaces the file with one that parses.
func TestRegistryFileDamaged(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, disks.RegistryName)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".0123456789abcdef"+shufflefile.TempSuffix, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	allowed := t.TempDir()
	local := filepath.Join(allowed, "blockmgr-a")
	if err := os.Mkdir(local, 0o770); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, Config{SocketPath: filepath.Join(dir, "s.sock"), Root: root, LimitBytes: 4 << 20, PoolSize: 2, AllowedRoots: []string{allowed}})
	c := registerLocal(t, d, "app", local)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rf registryFile
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &rf) != nil || len(rf.Apps) != 1 || rf.Apps[0].App != "app" {
		t.Errorf("registry file after a registration = %q, %v; want one that names app", b, err)
	}
	if m, _ := filepath.Glob(path + ".*"); len(m) != 0 {
		t.Errorf("temp files of the registry left: %v", m)
	}
	ctx := context.Background()
	c2, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Register(ctx, protocol.RegisterExecutor{AppID: disks.RegistryName, ExecutorID: "1"}); protocol.CodeOf(err) != protocol.CodeInvalidArgument {
		t.Errorf("Register of the reserved application id %q = %v, want InvalidArgument", disks.RegistryName, err)
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
