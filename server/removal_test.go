package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
)

// TestRemovalEndsRegistrations removes, ten times, an application whose
// executor is still connected: each removal ends that registration (its
// next OpenMapOutput answers FailedPrecondition, and it may register
// again), leaves a tombstone, drops the application from the listing and
// releases its local dirs and its share of the registry, so that the
// uid's registrations go on past what ten kept entries would take; a
// restart agrees.
func TestRemovalEndsRegistrations(t *testing.T) {
	const removals = 10
	allowed := t.TempDir()
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2, AllowedRoots: []string{allowed}}
	d := startDaemonWith(t, cfg)
	local := func(i int) string {
		l := filepath.Join(allowed, fmt.Sprintf("blockmgr-%02d", i))
		if err := os.MkdirAll(l, 0o770); err != nil {
			t.Fatal(err)
		}
		return l
	}
	// One uid's share of the registry holds three applications of one set
	// of local dirs each: ten kept after their removal would not fit.
	cost := appCost("app-00") + setCost(shufflefile.SparkHashed{LocalDirs: []string{local(0)}, SubDirs: 64})
	d.s.apps.mu.Lock()
	d.s.apps.maxBytes = uidRegistryShare * 3 * cost
	d.s.apps.mu.Unlock()
	uid := uint32(os.Getuid())
	ctx := context.Background()
	admin := dial(t, d, "admin")
	var last *client.Client
	for i := range removals {
		app := fmt.Sprintf("app-%02d", i)
		c := registerLocal(t, d, app, local(i))
		if _, err := writeAndCommit(c, 1, 1, "bytes"); err != nil {
			t.Fatal(err)
		}
		if removed, err := admin.RemoveApplication(ctx, app); err != nil || removed.MapOutputs != 1 {
			t.Fatalf("RemoveApplication(%s) with its executor connected = %+v, %v; want its 1 map output", app, removed, err)
		}
		if _, err := writeAndCommit(c, 1, 2, "more"); protocol.CodeOf(err) != protocol.CodeFailedPrecondition {
			t.Errorf("%s: OpenMapOutput after the removal = %v, want FailedPrecondition (the registration ended)", app, err)
		}
		if n := d.s.apps.sessionsOf(app); n != 0 {
			t.Errorf("%s: %d registrations counted after the removal, want 0", app, n)
		}
		d.s.apps.mu.Lock()
		a := d.s.apps.apps[app]
		tomb := a != nil && a.tombstone()
		_, dirKept := d.s.apps.localDirs[local(i)]
		d.s.apps.mu.Unlock()
		if !tomb || dirKept {
			t.Errorf("%s after its removal: tombstone %v, local dir still registered %v; want a tombstone and the dir released", app, tomb, dirKept)
		}
		list, err := admin.ListApplications(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ai := range list {
			if ai.AppID == app {
				t.Errorf("%s listed after its removal: %+v", app, ai)
			}
		}
		last = c
	}
	// The uid registers on, and the connection whose registration ended
	// registers again and writes.
	registerLocal(t, d, "app-next", local(removals))
	if _, err := last.Register(ctx, protocol.RegisterExecutor{AppID: "app-again", ExecutorID: "1", LocalDirs: []string{local(removals + 1)}, SubDirs: 64}); err != nil {
		t.Fatalf("RegisterExecutor again on a connection whose registration a removal ended: %v", err)
	}
	if _, err := writeAndCommit(last, 1, 3, "again"); err != nil {
		t.Errorf("writing after registering again: %v", err)
	}
	d.s.apps.mu.Lock()
	held := d.s.apps.uidBytes[uid]
	d.s.apps.mu.Unlock()
	setOf := func(i int) int { return setCost(shufflefile.SparkHashed{LocalDirs: []string{local(i)}, SubDirs: 64}) }
	if want := appCost("admin") + appCost("app-next") + setOf(removals) + appCost("app-again") + setOf(removals+1); held != want {
		t.Errorf("uid %d holds %d bytes of the registry with 3 applications registered, want %d", uid, held, want)
	}

	d.stop(t)
	d = startDaemonWith(t, cfg)
	admin = dial(t, d, "admin")
	list, err := admin.ListApplications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ai := range list {
		names = append(names, ai.AppID)
	}
	if fmt.Sprint(names) != "[admin app-again app-next]" {
		t.Errorf("after a restart the daemon lists %v, want [admin app-again app-next]", names)
	}
	d.s.apps.mu.Lock()
	defer d.s.apps.mu.Unlock()
	for i := range removals {
		app := fmt.Sprintf("app-%02d", i)
		if a := d.s.apps.apps[app]; a == nil || !a.tombstone() {
			t.Errorf("%s after a restart: %+v, want its tombstone", app, a)
		}
		if got, ok := d.s.apps.localDirs[local(i)]; ok {
			t.Errorf("local dir %d still registered, to %s, after a restart", i, got)
		}
	}
}
