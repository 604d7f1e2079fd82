package server

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
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
func (r *registry) claim(uid uint32, app string, l *shufflefile.SparkHashed) (mine, others map[string]chan struct{}, napps int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.apps[app]
	if a != nil && a.uid != uid {
		return nil, nil, 0, fmt.Errorf("%w: application %q belongs to uid %d, not %d", errPermission, app, a.uid, uid)
	}
	if l != nil {
		for _, d := range l.LocalDirs {
			if other, ok := r.localDirs[d]; ok && other != app {
				return nil, nil, 0, fmt.Errorf("%w: local dir %q is registered by application %q", errPermission, d, other)
			}
		}
	}
	if a == nil {
		a = &application{uid: uid}
		r.apps[app] = a
	}
	a.sessions++
	if l == nil {
		return nil, nil, len(r.apps), nil
	}
	for _, d := range l.LocalDirs {
		r.localDirs[d] = app
	}
	if !slices.ContainsFunc(a.local, func(h shufflefile.SparkHashed) bool { return slices.Equal(h.LocalDirs, l.LocalDirs) }) {
		a.local = append(a.local, *l)
	}
	mine, others = map[string]chan struct{}{}, map[string]chan struct{}{}
	for _, d := range l.LocalDirs {
		if ch, ok := r.sweeps[d]; ok {
			others[d] = ch
			continue
		}
		ch := make(chan struct{})
		r.sweeps[d] = ch
		mine[d] = ch
	}
	return mine, others, len(r.apps), nil
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
// applications known.
func (r *registry) forget(app string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[app]; a != nil && a.sessions == 0 {
		delete(r.apps, app)
		for _, l := range a.local {
			for _, d := range l.LocalDirs {
				delete(r.localDirs, d)
			}
		}
	}
	return len(r.apps)
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
