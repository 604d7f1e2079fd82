package server

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
)

// rawRequest frames m without validating it, as a hostile client may.
func rawRequest(id uint32, m protocol.Message) []byte {
	payload := m.Append(nil)
	return append(protocol.Header{Type: m.Type(), ID: id, Length: uint32(len(payload))}.Append(nil), payload...)
}

// TestDaemonNamesOutOfReach: every name the daemon keeps in its root (the
// lock file, the registry's snapshot and log, their temp files) starts
// with shufflefile.DaemonPrefix, and no client may register, list or
// remove an application of that name: RemoveApplication never deletes one
// of them, and a second daemon on the root is still refused.
func TestDaemonNamesOutOfReach(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	lock, err := LockRoots(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	d := startDaemonWith(t, cfg)
	c := dial(t, d, "app")
	if _, err := writeAndCommit(c, 1, 1, "bytes"); err != nil {
		t.Fatal(err)
	}
	// A temp file of the registry, as a compaction cut short leaves it.
	regTemp := shufflefile.TempName(filepath.Join(cfg.Root, disks.RegistryName))
	if err := os.WriteFile(regTemp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(cfg.Root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() == "app" {
			continue
		}
		if !strings.HasPrefix(e.Name(), shufflefile.DaemonPrefix) {
			t.Errorf("the daemon keeps %q in its root, which does not start with %q: an application id may name it", e.Name(), shufflefile.DaemonPrefix)
		}
		names = append(names, e.Name())
	}
	for _, want := range []string{LockName, disks.RegistryName, disks.RegistryLogName, filepath.Base(regTemp)} {
		if !slices.Contains(names, want) {
			t.Errorf("root holds %v, want %q among them", names, want)
		}
	}
	names = append(names, shufflefile.DaemonPrefix+"anything-later")
	r := dialRaw(t, d)
	r.handshake("other")
	id := uint32(10)
	for _, name := range names {
		for _, m := range []protocol.Message{
			&protocol.RegisterExecutor{AppID: name, ExecutorID: "1"},
			&protocol.RemoveApplication{AppID: name},
			&protocol.RemoveShuffle{AppID: name, ShuffleID: 1},
			&protocol.ListShuffles{AppID: name},
		} {
			id++
			if _, err := r.uc.Write(rawRequest(id, m)); err != nil {
				t.Fatal(err)
			}
			if got, resp := r.read(); got != id || codeOfMsg(resp) != protocol.CodeInvalidArgument {
				t.Errorf("%v of application %q answered %d %v, want InvalidArgument", m.Type(), name, got, resp)
			}
		}
	}
	for _, name := range []string{LockName, disks.RegistryName, disks.RegistryLogName} {
		if _, err := os.Stat(filepath.Join(cfg.Root, name)); err != nil {
			t.Errorf("after the requests: %v", err)
		}
	}
	if l, err := LockRoots(cfg); !errors.Is(err, ErrRootLocked) {
		if l != nil {
			l.Close()
		}
		t.Errorf("a second daemon's LockRoots on the root = %v, want ErrRootLocked", err)
	}
}

// TestRegistryLegacyDotApp: a registry file written before ids starting
// with shufflefile.DaemonPrefix were refused still loads; such an
// application is forgotten (it could be neither listed nor removed), and
// the others are kept.
func TestRegistryLegacyDotApp(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	if err := os.MkdirAll(cfg.Root, 0o750); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(registryFile{Version: 1, Apps: []registeredApp{{App: ".shuffled.lock", UID: 4242}, {App: "good", UID: 4242}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.Root, disks.RegistryName)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, cfg)
	if _, uid := d.s.apps.local("good"); uid != 4242 {
		t.Errorf("good's owner after the start = %d, want 4242", uid)
	}
	d.s.apps.mu.Lock()
	_, legacy := d.s.apps.apps[".shuffled.lock"]
	d.s.apps.mu.Unlock()
	if legacy {
		t.Errorf("the legacy application .shuffled.lock is still in the registry")
	}
	dial(t, d, "next") // a change: the registry is written again
	d.stop(t)
	rf := readRegistry(t, path)
	var got []string
	for _, ra := range rf.Apps {
		got = append(got, ra.App)
	}
	if want := []string{"good", "next"}; !slices.Equal(got, want) {
		t.Errorf("registry after a change names %v, want %v", got, want)
	}
}
