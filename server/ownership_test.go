package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
)

// Two peer uids, neither root nor the daemon's (tests call the server as
// them: a connection's uid is its peer's, which a test cannot choose).
const (
	peerA uint32 = 4242
	peerB uint32 = 4343
)

// registerAs registers m as a connection of the peer uid would, and
// returns the end of that connection.
func registerAs(d *daemon, uid uint32, m protocol.RegisterExecutor) (end func(), err error) {
	reg, err := d.s.register(uid, &m)
	if err != nil {
		return nil, err
	}
	return func() {
		d.s.apps.ended(reg)
		if reg.root != nil {
			reg.root.Close()
		}
	}, nil
}

// plantOutput puts the index and data files of map output (shuffle, m) in
// dir, as a commit there leaves them.
func plantOutput(t *testing.T, dir string, shuffle int32, m int64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	id := shufflefile.ID{Shuffle: shuffle, Map: m}
	for _, name := range []string{shufflefile.DataName(id), shufflefile.IndexName(id)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("12345678"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func codeOfErr(err error) protocol.Code { return protocol.CodeOf(protocolError(err)) }

// TestRootAppOwnerSurvivesRestart registers an application whose outputs
// are in the daemon's root as one uid, restarts the daemon, and tries it
// as another uid: registering, listing and removing are refused, and the
// owner still lists it.
func TestRootAppOwnerSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	d := startDaemonWith(t, cfg)
	end, err := registerAs(d, peerA, protocol.RegisterExecutor{AppID: "victim", ExecutorID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	plantOutput(t, filepath.Join(cfg.Root, "victim", "1"), 1, 0)
	end()
	d.stop(t)

	d = startDaemonWith(t, cfg)
	if _, err := registerAs(d, peerB, protocol.RegisterExecutor{AppID: "victim", ExecutorID: "2"}); codeOfErr(err) != protocol.CodePermissionDenied ||
		!strings.Contains(err.Error(), strconv.Itoa(int(peerA))) {
		t.Errorf("uid %d registering uid %d's application after a restart = %v, want PermissionDenied naming its owner", peerB, peerA, err)
	}
	if _, err := d.s.listShufflesFor(peerB, "victim"); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d listing uid %d's application after a restart = %v, want PermissionDenied", peerB, peerA, err)
	}
	if _, err := d.s.removeShuffleFor(peerB, "victim", 1); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d removing a shuffle of uid %d's application = %v, want PermissionDenied", peerB, peerA, err)
	}
	if _, err := d.s.removeApplicationFor(peerB, "victim"); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d removing uid %d's application = %v, want PermissionDenied", peerB, peerA, err)
	}
	if n := len(indexes(t, filepath.Join(cfg.Root, "victim"))); n != 1 {
		t.Errorf("victim has %d outputs after another uid's calls, want its 1", n)
	}
	if list, err := d.s.listShufflesFor(peerA, "victim"); err != nil || len(list) != 1 || list[0].MapOutputs != 1 {
		t.Errorf("the owner lists its application after a restart = %+v, %v; want its shuffle", list, err)
	}
	end, err = registerAs(d, peerA, protocol.RegisterExecutor{AppID: "victim", ExecutorID: "1"})
	if err != nil {
		t.Errorf("the owner registers its application again after a restart: %v", err)
	} else {
		end()
	}
}

// TestRootAppWithoutRecordedOwner starts on a root that holds an
// application no registry file names (a daemon that did not record it, or
// a lost file): no uid but root and the daemon's may take it over, list or
// remove it.
func TestRootAppWithoutRecordedOwner(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	plantOutput(t, filepath.Join(cfg.Root, "legacy", "1"), 1, 0)
	d := startDaemonWith(t, cfg)
	checkUnowned(t, d, "legacy")
}

// TestRootAppCopiedIn copies an application's outputs into the daemon's
// root while it runs: no uid but root and the daemon's may take it over,
// list or remove it, as one found there at start.
func TestRootAppCopiedIn(t *testing.T) {
	d := startDaemon(t, nil)
	plantOutput(t, filepath.Join(d.root, "legacy", "1"), 1, 0)
	checkUnowned(t, d, "legacy")
}

// checkUnowned checks that the application app in d's root, with one map
// output and no recorded owner, is refused to uid peerB and served to the
// daemon's own uid, and that once removed its id is free.
func checkUnowned(t *testing.T, d *daemon, app string) {
	t.Helper()
	if _, err := registerAs(d, peerB, protocol.RegisterExecutor{AppID: app, ExecutorID: "1"}); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d registering an application on disk with no recorded owner = %v, want PermissionDenied", peerB, err)
	}
	if _, err := d.s.listShufflesFor(peerB, app); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d listing it = %v, want PermissionDenied", peerB, err)
	}
	if _, err := d.s.removeApplicationFor(peerB, app); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d removing it = %v, want PermissionDenied", peerB, err)
	}
	self := uint32(os.Getuid())
	if list, err := d.s.listShufflesFor(self, app); err != nil || len(list) != 1 {
		t.Errorf("the daemon's uid lists it = %+v, %v; want its shuffle", list, err)
	}
	if removed, err := d.s.removeApplicationFor(self, app); err != nil || removed.MapOutputs != 1 {
		t.Errorf("the daemon's uid removes it = %+v, %v; want its output", removed, err)
	}
	// Removed, nothing of it is left: its id is free.
	end, err := registerAs(d, peerB, protocol.RegisterExecutor{AppID: app, ExecutorID: "1"})
	if err != nil {
		t.Errorf("uid %d registering the id once its outputs are gone: %v", peerB, err)
	} else {
		end()
	}
}

// TestRegisterRefusesRepeatedLocalDir names one local dir twice in a
// registration: InvalidArgument naming the field and the dir.
func TestRegisterRefusesRepeatedLocalDir(t *testing.T) {
	d, local, _ := sparkDaemon(t, nil)
	other := filepath.Join(filepath.Dir(local), "blockmgr-b")
	if err := os.Mkdir(other, 0o770); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Register(ctx, protocol.RegisterExecutor{AppID: "app", ExecutorID: "1", LocalDirs: []string{local, other, local}, SubDirs: 64})
	if protocol.CodeOf(err) != protocol.CodeInvalidArgument || !strings.Contains(err.Error(), "RegisterExecutor.local_dirs[2]") || !strings.Contains(err.Error(), local) {
		t.Errorf("Register naming %s twice = %v, want InvalidArgument naming RegisterExecutor.local_dirs[2] and the dir", local, err)
	}
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "app", ExecutorID: "1", LocalDirs: []string{local, other}, SubDirs: 64}); err != nil {
		t.Errorf("Register after the refusal: %v", err)
	}
}

// TestLocalDirSetsBounded registers one application's dirs in every order
// and sub-dir count: an exact repetition is no new set, and past the bound
// a new one is refused with ResourceExhausted naming it.
func TestLocalDirSetsBounded(t *testing.T) {
	d, a, _ := sparkDaemon(t, nil)
	b := filepath.Join(filepath.Dir(a), "blockmgr-b")
	if err := os.Mkdir(b, 0o770); err != nil {
		t.Fatal(err)
	}
	d.s.apps.mu.Lock()
	d.s.apps.maxSets = 3
	d.s.apps.mu.Unlock()
	ctx := context.Background()
	for i, r := range []struct {
		dirs []string
		sub  int32
		ok   bool
	}{
		{[]string{a, b}, 64, true},
		{[]string{b, a}, 64, true},
		{[]string{a, b}, 64, true}, // the first again: no new set
		{[]string{a, b}, 32, true},
		{[]string{b, a}, 32, false},
	} {
		c, err := client.Dial(ctx, d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.Register(ctx, protocol.RegisterExecutor{AppID: "app", ExecutorID: strconv.Itoa(i), LocalDirs: r.dirs, SubDirs: r.sub})
		if r.ok && err != nil {
			t.Errorf("registration %d (%v, sub_dirs %d): %v", i, r.dirs, r.sub, err)
		}
		if !r.ok && (protocol.CodeOf(err) != protocol.CodeResourceExhausted || !strings.Contains(err.Error(), "(3)")) {
			t.Errorf("registration %d, a fourth set of local dirs = %v, want ResourceExhausted naming the bound 3", i, err)
		}
	}
	rf := readRegistry(t, d.s.persist.path)
	if len(rf.Apps) != 1 || len(rf.Apps[0].Local) != 3 {
		t.Errorf("registry file = %+v, want app with its 3 sets", rf)
	}
}

// TestRegistryBytesBounded registers applications until the registry's
// byte bound refuses one (ResourceExhausted naming it): the file written
// stays within what the registry counts, and an application registered
// already still takes connections.
func TestRegistryBytesBounded(t *testing.T) {
	d := startDaemon(t, nil)
	limit := 5*appCost("app-0") + 3
	d.s.apps.mu.Lock()
	d.s.apps.maxBytes = limit
	d.s.apps.mu.Unlock()
	// Each of its own uid: the bound on the whole registry, not one uid's share.
	n, refused := registerApps(d, 10, func(n int) uint32 { return peerA + uint32(n) })
	if n != 5 || codeOfErr(refused) != protocol.CodeResourceExhausted || !strings.Contains(refused.Error(), strconv.Itoa(limit)) {
		t.Errorf("after %d applications: %v, want the sixth refused ResourceExhausted naming the limit %d", n, refused, limit)
	}
	if end, err := registerAs(d, peerA, protocol.RegisterExecutor{AppID: "app-0", ExecutorID: "2"}); err != nil {
		t.Errorf("another executor of a registered application at the bound: %v", err)
	} else {
		end()
	}
	if err := d.s.persist.compact(d.s.apps); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d.s.persist.path)
	if err != nil || fi.Size() > int64(limit)+snapshotHeader {
		t.Errorf("registry file %v, %v: past the bound %d", fi, err, limit)
	}
}

// snapshotHeader is the longest a registry snapshot with no application
// takes: what the registry's counts leave out.
var snapshotHeader = int64(len(`{"version":2,"seq":18446744073709551615,"log":"0123456789abcdef","apps":[]}` + "\n"))

// registerApps registers applications app-0, app-1, ... (at most max), the
// n-th as uid(n), until one is refused; it returns how many were
// registered and the refusal.
func registerApps(d *daemon, max int, uid func(n int) uint32) (int, error) {
	for n := range max {
		end, err := registerAs(d, uid(n), protocol.RegisterExecutor{AppID: "app-" + strconv.Itoa(n), ExecutorID: "1"})
		if err != nil {
			return n, err
		}
		end()
	}
	return max, nil
}

// TestRegistryUIDShare: one uid's applications take at most a quarter of
// the registry's bound, so one uid cannot keep the others from
// registering; the refusal names the uid and its share.
func TestRegistryUIDShare(t *testing.T) {
	d := startDaemon(t, nil)
	cost := appCost("app-0")
	d.s.apps.mu.Lock()
	d.s.apps.maxBytes = 8*cost + 4 // a share of 2 applications
	d.s.apps.mu.Unlock()
	n, refused := registerApps(d, 5, func(int) uint32 { return peerA })
	if n != 2 || codeOfErr(refused) != protocol.CodeResourceExhausted || !strings.Contains(refused.Error(), fmt.Sprintf("uid %d", peerA)) {
		t.Errorf("uid %d after %d applications: %v, want the third refused ResourceExhausted naming the uid", peerA, n, refused)
	}
	end, err := registerAs(d, peerB, protocol.RegisterExecutor{AppID: "app-9", ExecutorID: "1"})
	if err != nil {
		t.Fatalf("another uid, with uid %d at its share: %v", peerA, err)
	}
	end()
}

// TestRegistryCostBoundsFile checks that what the registry counts bounds
// the file it writes, with local dir sets, tombstones and names that JSON
// escapes.
func TestRegistryCostBoundsFile(t *testing.T) {
	d, local, _ := sparkDaemon(t, nil)
	other := filepath.Join(filepath.Dir(local), "blockmgr-<&>\u2028")
	if err := os.Mkdir(other, 0o770); err != nil {
		t.Fatal(err)
	}
	c := registerLocal(t, d, "app-<local>", local, other)
	registerLocal(t, d, "app-<local>", other, local)
	for _, app := range []string{"a", "<<<&&&>>>", strings.Repeat("\u2029", 85)} {
		end, err := registerAs(d, peerA, protocol.RegisterExecutor{AppID: app, ExecutorID: "1"})
		if err != nil {
			t.Fatal(err)
		}
		end()
		if _, err := d.s.removeApplicationFor(peerA, app); err != nil {
			t.Fatal(err)
		}
	}
	c.Ping(context.Background())
	if err := d.s.persist.compact(d.s.apps); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d.s.persist.path)
	if err != nil {
		t.Fatal(err)
	}
	d.s.apps.mu.Lock()
	counted := d.s.apps.bytes + d.s.apps.tombBytes
	d.s.apps.mu.Unlock()
	if fi.Size() > int64(counted)+snapshotHeader {
		t.Errorf("registry file of %d bytes, the registry counts %d (+%d)", fi.Size(), counted, snapshotHeader)
	}
}

// TestRemovalIsIdempotent removes an application, again and again, as its
// owner: 0 map outputs and 0 bytes, and an empty list; its id stays its
// owner's (a tombstone, across a restart too), until the tombstone
// expires. An application nobody registered, with nothing in the daemon's
// root, answers empty to any uid and leaves nothing in the registry.
func TestRemovalIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	d := startDaemonWith(t, cfg)
	end, err := registerAs(d, peerA, protocol.RegisterExecutor{AppID: "app", ExecutorID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	plantOutput(t, filepath.Join(cfg.Root, "app", "1"), 1, 0)
	end()
	if removed, err := d.s.removeApplicationFor(peerA, "app"); err != nil || removed.MapOutputs != 1 {
		t.Fatalf("RemoveApplication = %+v, %v; want its output", removed, err)
	}
	check := func(when string) {
		t.Helper()
		if removed, err := d.s.removeApplicationFor(peerA, "app"); err != nil || removed != (protocol.Removed{}) {
			t.Errorf("%s: RemoveApplication by its owner = %+v, %v; want 0 and 0", when, removed, err)
		}
		if removed, err := d.s.removeShuffleFor(peerA, "app", 1); err != nil || removed != (protocol.Removed{}) {
			t.Errorf("%s: RemoveShuffle by its owner = %+v, %v; want 0 and 0", when, removed, err)
		}
		if list, err := d.s.listShufflesFor(peerA, "app"); err != nil || len(list) != 0 {
			t.Errorf("%s: ListShuffles by its owner = %+v, %v; want an empty list", when, list, err)
		}
		if _, err := registerAs(d, peerB, protocol.RegisterExecutor{AppID: "app", ExecutorID: "1"}); codeOfErr(err) != protocol.CodePermissionDenied {
			t.Errorf("%s: uid %d registering the removed application of uid %d = %v, want PermissionDenied", when, peerB, peerA, err)
		}
		if _, err := d.s.listShufflesFor(peerB, "app"); codeOfErr(err) != protocol.CodePermissionDenied {
			t.Errorf("%s: uid %d listing it = %v, want PermissionDenied", when, peerB, err)
		}
	}
	check("after the removal")
	d.stop(t)
	d = startDaemonWith(t, cfg)
	check("after a restart")

	// Never registered: empty, for anyone. With files planted behind the
	// daemon's back after it started: no recorded owner, so another uid
	// is refused (TestRootAppCopiedIn), and nothing is removed.
	plantOutput(t, filepath.Join(cfg.Root, "planted", "1"), 1, 0)
	if list, err := d.s.listShufflesFor(peerB, "never-seen"); err != nil || len(list) != 0 {
		t.Errorf("uid %d lists never-seen = %+v, %v; want an empty list", peerB, list, err)
	}
	if removed, err := d.s.removeApplicationFor(peerB, "never-seen"); err != nil || removed != (protocol.Removed{}) {
		t.Errorf("uid %d removes never-seen = %+v, %v; want 0 and 0", peerB, removed, err)
	}
	if removed, err := d.s.removeShuffleFor(peerB, "never-seen", 1); err != nil || removed != (protocol.Removed{}) {
		t.Errorf("uid %d removes a shuffle of never-seen = %+v, %v; want 0 and 0", peerB, removed, err)
	}
	if _, err := d.s.removeApplicationFor(peerB, "planted"); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d removes planted = %v, want PermissionDenied", peerB, err)
	}
	if n := len(indexes(t, filepath.Join(cfg.Root, "planted"))); n != 1 {
		t.Errorf("planted has %d outputs after another uid's calls, want 1", n)
	}
	for _, ra := range readRegistry(t, d.s.persist.path).Apps {
		if ra.App != "app" {
			t.Errorf("registry file names %q, want only app's tombstone", ra.App)
		}
	}

	// The tombstone expires: the id is free, and the file forgets it.
	d.s.apps.mu.Lock()
	d.s.apps.apps["app"].removed = time.Now().Add(-tombstoneTTL - time.Minute)
	d.s.apps.mu.Unlock()
	if list, err := d.s.listShufflesFor(peerB, "app"); err != nil || len(list) != 0 {
		t.Errorf("uid %d lists the application once its tombstone expired = %+v, %v; want an empty list", peerB, list, err)
	}
	if !d.s.apps.prune(time.Now()) {
		t.Errorf("prune dropped no expired tombstone")
	}
	d.s.saveRegistry()
	if _, err := os.Stat(d.s.persist.path); !os.IsNotExist(err) {
		t.Errorf("registry file with nothing left to name: %v, want none", err)
	}
	end, err = registerAs(d, peerB, protocol.RegisterExecutor{AppID: "app", ExecutorID: "1"})
	if err != nil {
		t.Fatalf("uid %d registering the id once its tombstone expired: %v", peerB, err)
	}
	end()
}

// TestTombstonesBounded removes more applications than the tombstones'
// bound holds: the oldest go, the registry stays within its bound.
func TestTombstonesBounded(t *testing.T) {
	d := startDaemon(t, nil)
	d.s.apps.mu.Lock()
	d.s.apps.maxTombBytes = 2 * appCost("app-0")
	d.s.apps.mu.Unlock()
	for i := range 4 {
		app := "app-" + strconv.Itoa(i)
		end, err := registerAs(d, peerA, protocol.RegisterExecutor{AppID: app, ExecutorID: "1"})
		if err != nil {
			t.Fatal(err)
		}
		end()
		if _, err := d.s.removeApplicationFor(peerA, app); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // each removal later than the one before
	}
	var names []string
	for _, ra := range readRegistry(t, d.s.persist.path).Apps {
		names = append(names, ra.App)
	}
	if strings.Join(names, ",") != "app-2,app-3" {
		t.Errorf("tombstones in the registry file: %v, want the 2 newest, app-2 and app-3", names)
	}
	if _, err := d.s.listShufflesFor(peerB, "app-0"); err != nil {
		t.Errorf("uid %d lists app-0, its tombstone pushed out: %v, want an empty list", peerB, err)
	}
	if _, err := d.s.listShufflesFor(peerB, "app-3"); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d lists app-3, removed last = %v, want PermissionDenied", peerB, err)
	}
}

// TestRestartRetentionFromNewestFile restarts on an application of the
// daemon's root alone that the registry file names: its retention counts
// from its newest file, as for one only on disk, not from the restart.
func TestRestartRetentionFromNewestFile(t *testing.T) {
	const retention = time.Hour
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2, Retention: retention}
	d := startDaemonWith(t, cfg)
	end, err := registerAs(d, peerA, protocol.RegisterExecutor{AppID: "old", ExecutorID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	appDir := filepath.Join(cfg.Root, "old")
	plantOutput(t, filepath.Join(appDir, "1"), 1, 0)
	end()
	d.stop(t)
	then := time.Now().Add(-2 * retention)
	filepath.WalkDir(appDir, func(path string, _ os.DirEntry, err error) error {
		if err == nil {
			err = os.Chtimes(path, then, then)
		}
		return err
	})
	d = startDaemonWith(t, cfg)
	d.s.expire(time.Now())
	if _, err := os.Stat(appDir); !os.IsNotExist(err) {
		t.Errorf("application whose newest file is %v old, after a restart with --retention %v: %v, want it removed", 2*retention, retention, err)
	}
	if _, err := registerAs(d, peerB, protocol.RegisterExecutor{AppID: "old", ExecutorID: "1"}); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d registering the expired application of uid %d = %v, want PermissionDenied (its tombstone)", peerB, peerA, err)
	}
}
