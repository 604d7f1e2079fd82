package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// registry is what the daemon knows of applications and executors: who
// owns each application, which Spark local dirs each registered, and which
// dirs were swept of a crash's temp files. It has its own lock, apart from
// the server's (sessions, open outputs), and no file I/O happens under it.
type registry struct {
	mu        sync.Mutex
	apps      map[string]*application
	localDirs map[string]string        // registered Spark local dir -> its application
	sweeps    map[string]chan struct{} // local dir -> closed once its first sweep ended
}

// application is what the daemon knows of one application id.
type application struct {
	uid      uint32    // the peer uid that registered it first; it owns the outputs
	sessions int       // connections registered for it now
	lastSeen time.Time // when its last connection ended
	// local are the distinct sets of Spark local dirs registered for it
	// (resolved paths), with the sub-dir count.
	local []shufflefile.SparkHashed
}

func newRegistry() *registry {
	return &registry{
		apps:      make(map[string]*application),
		localDirs: make(map[string]string),
		sweeps:    make(map[string]chan struct{}),
	}
}

// claim records a registration of app by uid with the Spark local dirs l
// (nil for the daemon's root). It refuses an application of another uid
// and a local dir of another application. It returns the dirs whose sweep
// this registration must run (their channels, to close when done) and
// those whose sweep another registration runs (to wait for).
func (r *registry) claim(uid uint32, app string, l *shufflefile.SparkHashed) (c claimed, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.apps[app]
	if a != nil && a.uid != uid {
		return c, fmt.Errorf("%w: application %q belongs to uid %d, not %d", errPermission, app, a.uid, uid)
	}
	if l != nil {
		for _, d := range l.LocalDirs {
			if other, ok := r.localDirs[d]; ok && other != app {
				return c, fmt.Errorf("%w: local dir %q is registered by application %q", errPermission, d, other)
			}
		}
	}
	if a == nil {
		a = &application{uid: uid}
		r.apps[app] = a
	}
	a.sessions++
	c.apps = len(r.apps)
	if l == nil {
		return c, nil
	}
	for _, d := range l.LocalDirs {
		r.localDirs[d] = app
	}
	if !slices.ContainsFunc(a.local, func(h shufflefile.SparkHashed) bool { return slices.Equal(h.LocalDirs, l.LocalDirs) }) {
		a.local = append(a.local, *l)
		c.changed = true
	}
	c.mine, c.others = map[string]chan struct{}{}, map[string]chan struct{}{}
	for _, d := range l.LocalDirs {
		if ch, ok := r.sweeps[d]; ok {
			c.others[d] = ch
			continue
		}
		ch := make(chan struct{})
		r.sweeps[d] = ch
		c.mine[d] = ch
	}
	return c, nil
}

// claimed is what claim decided.
type claimed struct {
	// mine are the local dirs whose sweep this registration runs (close
	// each channel when done); others those whose sweep another runs.
	mine, others map[string]chan struct{}
	apps         int  // applications known
	changed      bool // a new set of local dirs: persist
}

// swept marks dirs as swept (at start, before any session).
func (r *registry) swept(dirs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range dirs {
		if _, ok := r.sweeps[d]; !ok {
			ch := make(chan struct{})
			close(ch)
			r.sweeps[d] = ch
		}
	}
}

// all returns every application's local dir sets and owner.
func (r *registry) all() map[string][]shufflefile.SparkHashed {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]shufflefile.SparkHashed, len(r.apps))
	for name, a := range r.apps {
		out[name] = slices.Clone(a.local)
	}
	return out
}

// ended records that a session of app ended.
func (r *registry) ended(app string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[app]; a != nil {
		a.sessions--
		a.lastSeen = time.Now()
	}
}

// owner returns the uid that registered app, and whether it is known.
func (r *registry) owner(app string) (uint32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[app]; a != nil {
		return a.uid, true
	}
	return 0, false
}

// local returns the Spark local dir sets and the owner of app.
func (r *registry) local(app string) ([]shufflefile.SparkHashed, uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[app]; a != nil {
		return slices.Clone(a.local), a.uid
	}
	return nil, 0
}

// forget drops app unless it has connections, and returns the number of
// applications known and whether app was dropped.
func (r *registry) forget(app string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.apps[app]
	if a == nil || a.sessions > 0 {
		return len(r.apps), false
	}
	delete(r.apps, app)
	for _, l := range a.local {
		for _, d := range l.LocalDirs {
			delete(r.localDirs, d)
		}
	}
	return len(r.apps), true
}

// idle returns the applications without a connection since before cut,
// and every application known.
func (r *registry) idle(cut time.Time) (idle []string, known map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	known = make(map[string]bool, len(r.apps))
	for name, a := range r.apps {
		known[name] = true
		if a.sessions == 0 && a.lastSeen.Before(cut) {
			idle = append(idle, name)
		}
	}
	return idle, known
}

// connected reports whether app has a connection now.
func (r *registry) connected(app string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.apps[app]
	return a != nil && a.sessions > 0
}

// sessionsOf returns the connections registered for app now.
func (r *registry) sessionsOf(app string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[app]; a != nil {
		return a.sessions
	}
	return 0
}

// registryFile is the registry's persistent part, in the daemon's root
// (disks.RegistryPath): the applications that registered Spark local dirs,
// with their owner and those dirs, so that after a restart removal,
// listing, retention and the start-up sweep cover every dir the daemon
// ever wrote into. Applications of the daemon's root alone are found by
// listing the root.
type registryFile struct {
	Version int             `json:"version"`
	Apps    []registeredApp `json:"apps"`
}

type registeredApp struct {
	App   string          `json:"app"`
	UID   uint32          `json:"uid"`
	Local []registeredSet `json:"local,omitempty"`
}

// registeredSet is one registration's Spark local dirs, resolved.
type registeredSet struct {
	Dirs    []string `json:"dirs"`
	SubDirs int      `json:"sub_dirs"`
}

// registryVersion is the registry file's format version.
const registryVersion = 1

// maxRegistryFile bounds the registry file read at start.
const maxRegistryFile = 64 << 20

// persistence writes the registry file; writes run one at a time, each of
// a snapshot taken under its lock, so the last write holds the last state.
type persistence struct {
	mu   sync.Mutex
	fs   vfs.FS
	path string
	sync bool
}

// snapshot returns the persistent part of the registry.
func (r *registry) snapshot() registryFile {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := registryFile{Version: registryVersion}
	for name, a := range r.apps {
		if len(a.local) == 0 {
			continue // its outputs are in the daemon's root, found by listing it
		}
		ra := registeredApp{App: name, UID: a.uid}
		for _, l := range a.local {
			ra.Local = append(ra.Local, registeredSet{Dirs: l.LocalDirs, SubDirs: l.SubDirs})
		}
		f.Apps = append(f.Apps, ra)
	}
	slices.SortFunc(f.Apps, func(a, b registeredApp) int { return strings.Compare(a.App, b.App) })
	return f
}

// save writes r's persistent part (ReplaceFile: temp, rename, and fsyncs
// with --sync), or removes the file when no application is known.
func (p *persistence) save(r *registry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	snap := r.snapshot()
	if len(snap.Apps) == 0 {
		// Nothing to remember: no file, so a root whose applications are
		// all removed is empty.
		if err := p.fs.Remove(p.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	return shufflefile.ReplaceFile(p.fs, p.path, append(b, '\n'), 0o600, p.sync)
}

// load reads the registry file into r (a missing file is an empty registry)
// and removes temp files a crash left beside it. The applications it names
// have no connection; their retention counts from now.
func (p *persistence) load(r *registry, now time.Time) error {
	dir, name := filepath.Split(p.path)
	if ents, err := p.fs.ReadDir(filepath.Clean(dir)); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), name+".") && shufflefile.IsTempName(e.Name()) {
				_ = p.fs.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	f, err := p.fs.Open(p.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRegistryFile+1))
	if err != nil {
		return err
	}
	if len(b) > maxRegistryFile {
		return fmt.Errorf("registry file %s is larger than %d bytes", p.path, maxRegistryFile)
	}
	var rf registryFile
	if err := json.Unmarshal(b, &rf); err != nil {
		return fmt.Errorf("registry file %s: %w", p.path, err)
	}
	if rf.Version != registryVersion {
		return fmt.Errorf("registry file %s: version %d, this daemon reads %d", p.path, rf.Version, registryVersion)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, ra := range rf.Apps {
		if err := disks.ValidateApp(ra.App); err != nil {
			return fmt.Errorf("registry file %s: apps[%d]: %w", p.path, i, err)
		}
		a := &application{uid: ra.UID, lastSeen: now}
		for j, set := range ra.Local {
			l := shufflefile.SparkHashed{LocalDirs: set.Dirs, SubDirs: set.SubDirs}
			if err := l.Validate(); err != nil {
				return fmt.Errorf("registry file %s: apps[%d].local[%d]: %w", p.path, i, j, err)
			}
			for _, d := range l.LocalDirs {
				if !filepath.IsAbs(d) || filepath.Clean(d) != d {
					return fmt.Errorf("registry file %s: apps[%d].local[%d]: %q is not an absolute clean path", p.path, i, j, d)
				}
				r.localDirs[d] = ra.App
			}
			a.local = append(a.local, l)
		}
		r.apps[ra.App] = a
	}
	return nil
}
