package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shuffled/shuffled/protocol"
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
