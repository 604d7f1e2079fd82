package server

import (
	"os"
	"slices"
	"sync"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
)

// registry is what the daemon knows of applications and executors: who
// owns each application (removed ones too, for a while: tombstones),
// which Spark local dirs each registered, which applications found in the
// daemon's root at start have no recorded owner, and which dirs were swept
// of a crash's temp files. It has its own lock, apart from the server's
// (sessions, open outputs), and no file I/O happens under it.
type registry struct {
	mu        sync.Mutex
	apps      map[string]*application  // registered, and removed (tombstones)
	orphans   map[string]bool          // in the daemon's root at start, with no recorded owner
	localDirs map[string]string        // registered Spark local dir -> its application
	sweeps    map[string]chan struct{} // local dir -> closed once its first sweep ended
	self      uint32                   // the daemon's own uid

	// bytes bounds what the registered applications take in the registry
	// file, tombBytes what the tombstones take (appCost, setCost); tombs
	// counts the tombstones.
	bytes, tombBytes, tombs int
	uidBytes                map[uint32]int // bytes, by the applications' uid
	// seq numbers the changes of the persistent part; pending holds the
	// log records of those not yet written (persistence.flush).
	seq     uint64
	pending []registryRecord
	// The limits: maxSets distinct sets of local dirs per application,
	// maxBytes and maxTombBytes (maxLocalSets, maxRegistryBytes,
	// maxTombstoneBytes; tests lower them, under mu).
	maxSets, maxBytes, maxTombBytes int
}

// application is what the daemon knows of one application id.
type application struct {
	uid uint32 // the peer uid that registered it first; it owns the outputs
	// regs are the connections' registrations of it now. A removal ends
	// them (registration.ended) and empties it.
	regs     map[*registration]struct{}
	lastSeen time.Time // when its last connection ended
	// local are the distinct sets of Spark local dirs registered for it
	// (resolved paths, in the registration's order), with the sub-dir
	// count.
	local []shufflefile.SparkHashed
	// removed, when set, makes it a tombstone: its outputs were removed
	// then, with no connection left; nothing of it is on disk, and its id
	// stays uid's until tombstoneTTL has passed.
	removed time.Time
	cost    int // what its entry takes in the registry file, at most
}

// tombstone reports whether a is a removed application.
func (a *application) tombstone() bool { return !a.removed.IsZero() }

// The registry's bounds.
const (
	// maxLocalSets bounds the distinct sets of Spark local dirs one
	// application registers: one per executor of it on the node (each
	// has its own blockmgr-* dirs), and one more per executor that
	// registers its dirs in another order or with another sub_dirs.
	maxLocalSets = 4096
	// maxRegistryBytes bounds what registered applications take in the
	// registry file, and maxTombstoneBytes what removed ones take: both
	// together stay well under maxRegistryFile, so that the file this
	// daemon writes is always one the next start reads.
	maxRegistryBytes  = 32 << 20
	maxTombstoneBytes = 4 << 20
	// uidRegistryShare: one uid's registered applications take at most
	// 1/uidRegistryShare of maxRegistryBytes, so that one uid cannot keep
	// every other from registering.
	uidRegistryShare = 4
	// tombstoneTTL is how long the id of a removed application stays its
	// owner's: another uid may not register it, list or remove it until
	// then (or until tombstones of later removals push it out of
	// maxTombstoneBytes, oldest first).
	tombstoneTTL = 7 * 24 * time.Hour
)

func newRegistry() *registry {
	return &registry{
		apps:         make(map[string]*application),
		orphans:      make(map[string]bool),
		uidBytes:     make(map[uint32]int),
		localDirs:    make(map[string]string),
		sweeps:       make(map[string]chan struct{}),
		self:         uint32(os.Getuid()),
		maxSets:      maxLocalSets,
		maxBytes:     maxRegistryBytes,
		maxTombBytes: maxTombstoneBytes,
	}
}

// charge counts n more bytes (fewer, when negative) of uid's registered
// applications in the registry file. r.mu is held.
func (r *registry) charge(uid uint32, n int) {
	r.bytes += n
	if r.uidBytes[uid] += n; r.uidBytes[uid] <= 0 {
		delete(r.uidBytes, uid)
	}
}

// privileged reports root and the daemon's own uid.
func (r *registry) privileged(uid uint32) bool { return uid == 0 || uid == r.self }

// lookupLocked returns the entry of app, nil when there is none or it is a
// tombstone past tombstoneTTL at now.
func (r *registry) lookupLocked(app string, now time.Time) *application {
	a := r.apps[app]
	if a != nil && a.tombstone() && now.Sub(a.removed) > tombstoneTTL {
		return nil
	}
	return a
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

// all returns every registered application's local dir sets.
func (r *registry) all() map[string][]shufflefile.SparkHashed {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]shufflefile.SparkHashed, len(r.apps))
	for name, a := range r.apps {
		if !a.tombstone() {
			out[name] = slices.Clone(a.local)
		}
	}
	return out
}

// ended records that the session of reg ended, or that it let go of reg
// once a removal had ended it (then it counts no more already).
func (r *registry) ended(reg *registration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[reg.app]; a != nil {
		if _, ok := a.regs[reg]; ok {
			delete(a.regs, reg)
			a.lastSeen = time.Now()
		}
	}
}

// registered returns the number of applications registered (tombstones
// aside).
func (r *registry) registered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.apps) - r.tombs
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

// idle returns the registered applications without a connection since
// before cut, and every registered application.
func (r *registry) idle(cut time.Time) (idle []string, known map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	known = make(map[string]bool, len(r.apps))
	for name, a := range r.apps {
		if a.tombstone() {
			continue
		}
		known[name] = true
		if len(a.regs) == 0 && a.lastSeen.Before(cut) {
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
	return a != nil && len(a.regs) > 0
}

// sessionsOf returns the connections registered for app now.
func (r *registry) sessionsOf(app string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[app]; a != nil {
		return len(a.regs)
	}
	return 0
}
