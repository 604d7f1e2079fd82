package server

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
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
	uid      uint32    // the peer uid that registered it first; it owns the outputs
	sessions int       // connections registered for it now
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

// claim records a registration of app by uid with the Spark local dirs l
// (nil for the daemon's root). It refuses an application of another uid
// (registered, or removed less than tombstoneTTL ago), one with outputs in
// the daemon's root and no recorded owner unless uid is root or the
// daemon's, a local dir named twice or registered by another application,
// and a registration past the registry's bounds. It returns the dirs whose
// sweep this registration must run (their channels, to close when done)
// and those whose sweep another registration runs (to wait for).
func (r *registry) claim(uid uint32, app string, l *shufflefile.SparkHashed) (c claimed, err error) {
	if l != nil {
		if err := distinctDirs(l.LocalDirs); err != nil {
			return c, err
		}
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.lookupLocked(app, now)
	if a != nil && a.uid != uid {
		return c, ownerError(app, a, uid)
	}
	if a == nil && r.orphans[app] && !r.privileged(uid) {
		return c, r.orphanError(app, uid)
	}
	if l != nil {
		for _, d := range l.LocalDirs {
			if other, ok := r.localDirs[d]; ok && other != app {
				return c, fmt.Errorf("%w: local dir %q is registered by application %q", errdefs.ErrPermissionDenied, d, other)
			}
		}
	}
	// What the registration adds to the registry file, and its bounds.
	fresh := a == nil || a.tombstone()
	grow := 0
	if fresh {
		grow = appCost(app)
	}
	newSet := l != nil && (a == nil || !slices.ContainsFunc(a.local, func(h shufflefile.SparkHashed) bool { return sameSet(h, *l) }))
	if newSet {
		if a != nil && len(a.local) >= r.maxSets {
			return c, fmt.Errorf("%w: application %q has %d sets of local dirs registered, the most one application may have (%d); "+
				"a set is new when its dirs, their order or sub_dirs differ", errdefs.ErrResourceExhausted, app, len(a.local), r.maxSets)
		}
		grow += setCost(*l)
	}
	if grow > 0 && r.bytes+grow > r.maxBytes {
		return c, fmt.Errorf("%w: the registry holds %d bytes of applications; registering application %q would add %d, past its limit of %d bytes",
			errdefs.ErrResourceExhausted, r.bytes, app, grow, r.maxBytes)
	}
	if share := r.maxBytes / uidRegistryShare; grow > 0 && r.uidBytes[uid]+grow > share {
		return c, fmt.Errorf("%w: uid %d's applications hold %d bytes of the registry; registering application %q would add %d, past the 1/%d of its %d bytes one uid may hold",
			errdefs.ErrResourceExhausted, uid, r.uidBytes[uid], app, grow, uidRegistryShare, r.maxBytes)
	}
	switch {
	case a == nil:
		r.dropLocked(app) // an expired tombstone
		a = &application{uid: uid}
		r.apps[app] = a
		delete(r.orphans, app)
		c.changed = true
	case a.tombstone():
		r.reviveLocked(a, now)
		c.changed = true
	}
	a.cost += grow
	r.charge(uid, grow)
	a.sessions++
	c.apps = len(r.apps) - r.tombs
	if l == nil {
		if c.changed {
			r.logLocked(registryRecord{Op: opRegister, App: app, UID: uid})
		}
		return c, nil
	}
	for _, d := range l.LocalDirs {
		r.localDirs[d] = app
	}
	if newSet {
		a.local = append(a.local, *l)
		c.changed = true
	}
	if c.changed {
		r.logLocked(registryRecord{Op: opRegister, App: app, UID: uid, Local: recordSet(l, newSet)})
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

// distinctDirs refuses a registration that names one local dir twice (after
// resolving symlinks): Spark gives each executor distinct blockmgr-* dirs,
// and every order and repetition of the same dirs would otherwise be one
// more set to keep.
func distinctDirs(dirs []string) error {
	seen := make(map[string]int, len(dirs))
	for i, d := range dirs {
		if j, ok := seen[d]; ok {
			return fmt.Errorf("%w: RegisterExecutor.local_dirs[%d] %q is local_dirs[%d] again (resolved); each local dir may be named once",
				errdefs.ErrInvalidArgument, i, d, j)
		}
		seen[d] = i
	}
	return nil
}

// sameSet reports two registrations that place every file alike: the same
// dirs in the same order (Spark hashes a file to local_dirs[h % n]) and the
// same sub-dir count (0 is Spark's default). Removal takes each output's
// lock by the index path its set places, so a set that places files
// otherwise must be kept on its own.
func sameSet(a, b shufflefile.SparkHashed) bool {
	sub := func(n int) int {
		if n == 0 {
			return shufflefile.DefaultSubDirs
		}
		return n
	}
	return sub(a.SubDirs) == sub(b.SubDirs) && slices.Equal(a.LocalDirs, b.LocalDirs)
}

// ownerError refuses uid an application a of another uid.
func ownerError(app string, a *application, uid uint32) error {
	if a.tombstone() {
		return fmt.Errorf("%w: application %q belongs to uid %d, not %d (removed at %s; the id stays uid %d's until %s)",
			errdefs.ErrPermissionDenied, app, a.uid, uid, a.removed.UTC().Format(time.RFC3339), a.uid, a.removed.Add(tombstoneTTL).UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w: application %q belongs to uid %d, not %d", errdefs.ErrPermissionDenied, app, a.uid, uid)
}

// orphanError refuses uid an application found in the daemon's root at
// start with no recorded owner.
func (r *registry) orphanError(app string, uid uint32) error {
	return fmt.Errorf("%w: application %q has outputs in the daemon's root from before this start and no recorded owner; "+
		"only root or the daemon's user (uid %d) may register, list or remove it, not uid %d", errdefs.ErrPermissionDenied, app, r.self, uid)
}

// claimed is what claim decided.
type claimed struct {
	// mine are the local dirs whose sweep this registration runs (close
	// each channel when done); others those whose sweep another runs.
	mine, others map[string]chan struct{}
	apps         int  // applications registered
	changed      bool // a new application, owner or set of local dirs: persist
}

// access decides a lifecycle request (RemoveShuffle, RemoveApplication,
// ListShuffles) of uid on app. files is true when the request goes to the
// files: uid owns app (registered or removed), or uid is root or the
// daemon's and nobody else owns it. files is false, with no error, for an
// application nobody owns and nothing of which is on disk (never
// registered, removed past tombstoneTTL): the answer is empty without
// looking, so that a registration racing the request cannot make another
// uid's outputs visible to it. Another uid's application, and one found in
// the daemon's root at start with no recorded owner (for uids other than
// root and the daemon's), are refused.
func (r *registry) access(uid uint32, app string, now time.Time) (files bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.lookupLocked(app, now)
	switch {
	case a != nil && a.uid == uid:
		return true, nil
	case a != nil:
		return false, ownerError(app, a, uid)
	case r.privileged(uid):
		return true, nil
	case r.orphans[app]:
		return false, r.orphanError(app, uid)
	}
	return false, nil
}

// unowned records app as an application with outputs in the daemon's
// root and no recorded owner (as found does at start) when the registry
// has no entry of it and onDisk, called outside the lock, finds its
// directory there: one copied into the root while the daemon runs is
// root's and the daemon's only, as one found at start.
func (r *registry) unowned(app string, onDisk func() bool) {
	r.mu.Lock()
	known := r.lookupLocked(app, time.Now()) != nil || r.orphans[app]
	r.mu.Unlock()
	if known || !onDisk() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lookupLocked(app, time.Now()) == nil {
		r.orphans[app] = true
	}
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

// ended records that a session of app ended.
func (r *registry) ended(app string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apps[app]; a != nil {
		a.sessions--
		a.lastSeen = time.Now()
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

// forget records that app's outputs were removed; gone says that the
// removal found no error, so that nothing of app is left on disk. Unless
// app still has connections, a registered application then becomes a
// tombstone (its owner kept, its local dirs released) and one found in the
// root at start without an owner is no longer special; the oldest
// tombstones go when they take more than their bound. After a removal
// with errors, app stays as it was: its owner may remove it again. It
// returns the number of applications registered and whether the
// persistent part changed.
func (r *registry) forget(app string, gone bool, now time.Time) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !gone {
		return len(r.apps) - r.tombs, false
	}
	delete(r.orphans, app)
	a := r.apps[app]
	if a == nil || a.sessions > 0 || a.tombstone() {
		return len(r.apps) - r.tombs, false
	}
	for _, l := range a.local {
		for _, d := range l.LocalDirs {
			delete(r.localDirs, d)
		}
	}
	r.charge(a.uid, -a.cost)
	a.local, a.removed, a.cost = nil, now, appCost(app)
	r.tombs++
	r.tombBytes += a.cost
	r.logLocked(registryRecord{Op: opRemove, App: app, UID: a.uid, Removed: max(now.Unix(), 1)})
	r.evictLocked()
	return len(r.apps) - r.tombs, true
}

// reviveLocked makes the tombstone a a registered application again (its
// owner registers it, or its outputs are found on disk at start).
func (r *registry) reviveLocked(a *application, now time.Time) {
	r.tombs--
	r.tombBytes -= a.cost
	a.removed, a.cost, a.lastSeen = time.Time{}, 0, now
}

// dropLocked deletes the tombstone of app, if any.
func (r *registry) dropLocked(app string) {
	if a := r.apps[app]; a != nil && a.tombstone() {
		r.tombs--
		r.tombBytes -= a.cost
		delete(r.apps, app)
		r.logLocked(registryRecord{Op: opDrop, App: app})
	}
}

// logLocked numbers rec, the change just made, and keeps it for the next
// flush. r.mu is held.
func (r *registry) logLocked(rec registryRecord) {
	r.seq++
	rec.Seq = r.seq
	r.pending = append(r.pending, rec)
}

// evictLocked drops the oldest tombstones while they take more than
// maxTombBytes.
func (r *registry) evictLocked() {
	for r.tombBytes > r.maxTombBytes {
		oldest := ""
		for name, a := range r.apps {
			if a.tombstone() && (oldest == "" || a.removed.Before(r.apps[oldest].removed)) {
				oldest = name
			}
		}
		if oldest == "" {
			return
		}
		r.dropLocked(oldest)
	}
}

// prune drops the tombstones past tombstoneTTL at now and reports whether
// there were any.
func (r *registry) prune(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	pruned := false
	for name, a := range r.apps {
		if a.tombstone() && now.Sub(a.removed) > tombstoneTTL {
			r.dropLocked(name)
			pruned = true
		}
	}
	return pruned
}

// found records the applications with a directory in the daemon's root at
// start (before any session). One the registry file does not name has no
// recorded owner (written by a daemon that did not record the owners of
// the root's applications, or named by a registry file that could not be
// read): only root or the daemon's user may register, list or remove it.
// One it names with no local dirs counts its retention from its newest
// file, as one only on disk does; a tombstone with outputs on disk is
// registered again.
func (r *registry) found(apps []disks.AppUsage, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range apps {
		switch a := r.apps[u.App]; {
		case a == nil:
			r.orphans[u.App] = true
		case a.tombstone():
			r.reviveLocked(a, now)
			a.cost = appCost(u.App)
			r.charge(a.uid, a.cost)
		case len(a.local) == 0 && a.sessions == 0 && u.ModTime.Before(a.lastSeen):
			a.lastSeen = u.ModTime
		}
	}
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

// The registry's persistent part lives in two files in the daemon's root
// (disks.RegistryPath): a snapshot and a log of the changes since.
//
// The snapshot (registryFile, JSON) names every application the daemon
// registered, with its owner and the Spark local dirs it registered, so
// that after a restart removal, listing, retention and the start-up sweep
// cover every dir the daemon ever wrote into and no other uid takes an
// application over; and the tombstones of removed applications, so that
// their ids stay their owners' for tombstoneTTL. It is replaced atomically
// (shufflefile.ReplaceFile).
//
// The log (the snapshot's path + ".log") starts with a header line naming
// it (its random id, which the snapshot names too) and the last change the
// snapshot holds; each change after it appends one line (registryRecord),
// fsynced with --sync, before the request that made it is answered. So a
// change costs one line, not the whole file. When the log has grown past
// the snapshot's size (and past minCompactLog), the next change compacts:
// a new log (a temp file, then renamed), a snapshot naming it, and the new
// log renamed into place. A log whose id the snapshot does not name (a
// crash during a compaction, or a log without a snapshot) holds nothing
// the snapshot lacks, and is ignored. At start the records after the
// snapshot's last change are applied to it, in the order of their numbers;
// a last line without its newline (a crash mid-append; its request was
// never answered) is ignored.
type registryFile struct {
	Version int `json:"version"`
	// Seq is the number of the last change the snapshot holds; Log is the
	// id of the log that goes with it (version 2).
	Seq  uint64          `json:"seq,omitempty"`
	Log  string          `json:"log,omitempty"`
	Apps []registeredApp `json:"apps"`
}

type registeredApp struct {
	App   string          `json:"app"`
	UID   uint32          `json:"uid"`
	Local []registeredSet `json:"local,omitempty"`
	// Removed is when a tombstone's application was removed, in Unix
	// seconds; 0 for a registered application.
	Removed int64 `json:"removed,omitempty"`
}

// registeredSet is one registration's Spark local dirs, resolved.
type registeredSet struct {
	Dirs    []string `json:"dirs"`
	SubDirs int      `json:"sub_dirs"`
}

// registryLogHeader is the log's first line.
type registryLogHeader struct {
	Version int    `json:"version"`
	Log     string `json:"log"`  // the log's id, which its snapshot names
	Base    uint64 `json:"base"` // the snapshot's Seq when the log began
}

// registryRecord is one change, one line of the log.
type registryRecord struct {
	Seq uint64 `json:"seq"` // > the snapshot's Seq; the order changes apply in
	// Op: opRegister (App is UID's, registered; Local, when set, is one
	// more set of its local dirs), opRemove (App becomes UID's tombstone,
	// removed at Removed, Unix seconds), opDrop (App is forgotten).
	Op      string         `json:"op"`
	App     string         `json:"app"`
	UID     uint32         `json:"uid"` // 0 in a drop
	Local   *registeredSet `json:"local,omitempty"`
	Removed int64          `json:"removed,omitempty"`
}

// The log's operations.
const (
	opRegister = "register"
	opRemove   = "remove"
	opDrop     = "drop"
)

// recordSet is the set a register record adds: l when it is new.
func recordSet(l *shufflefile.SparkHashed, isNew bool) *registeredSet {
	if l == nil || !isNew {
		return nil
	}
	return &registeredSet{Dirs: l.LocalDirs, SubDirs: l.SubDirs}
}

// registryVersion is the format version of the snapshot and the log that
// this daemon writes. It reads version 1 too, a snapshot alone (from
// before the log; entries without local dirs and tombstones came later in
// version 1, and a daemon that predates them reads them as applications of
// their uid).
const registryVersion = 2

// maxRegistryFile bounds the snapshot, and the log, read at start.
const maxRegistryFile = 64 << 20

// minCompactLog: the log is compacted once it is past this many bytes and
// past the snapshot's size, so that what is written stays within about
// twice what the changes take.
const minCompactLog = 1 << 20

// appCost bounds what the entry of app takes in the registry file, its
// local dir sets aside (setCost): its longest form, a tombstone's, with
// the separators of its list and of an empty set list.
func appCost(app string) int {
	b, _ := json.Marshal(registeredApp{App: app, UID: math.MaxUint32, Removed: math.MaxInt64})
	return len(b) + len(`,"local":[]`) + 1
}

// setCost bounds what one set of local dirs takes in its application's
// entry in the registry file, with its separator.
func setCost(l shufflefile.SparkHashed) int {
	b, _ := json.Marshal(registeredSet{Dirs: l.LocalDirs, SubDirs: l.SubDirs})
	return len(b) + 1
}

// persistence writes the registry's files (see registryFile); writes run
// one at a time, under its lock.
type persistence struct {
	mu   sync.Mutex
	fs   vfs.FS
	path string // the snapshot's; the log's is path + ".log"
	sync bool
	// kept is why the files could not be read at start: they are then kept
	// as they are, never replaced nor removed, so that the owners and dirs
	// they hold are not lost for good; an operator repairs or moves them
	// and restarts the daemon.
	kept error
	// log is the open log (nil: none yet, or a write failed: the next
	// flush compacts), logBytes its size, snapBytes the snapshot's.
	log                 vfs.File
	logBytes, snapBytes int64
}

// logPath is the log's path.
func (p *persistence) logPath() string { return logPathOf(p.path) }

// logPathOf is the path of the log of the snapshot at path
// (disks.RegistryLogName beside disks.RegistryName).
func logPathOf(path string) string { return path + ".log" }

// snapshot returns the persistent part of the registry, and drops the
// pending log records: the snapshot holds them.
func (r *registry) snapshot() registryFile {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := registryFile{Version: registryVersion, Seq: r.seq, Apps: make([]registeredApp, 0, len(r.apps))}
	r.pending = nil
	for name, a := range r.apps {
		ra := registeredApp{App: name, UID: a.uid}
		if a.tombstone() {
			ra.Removed = max(a.removed.Unix(), 1)
		}
		for _, l := range a.local {
			ra.Local = append(ra.Local, registeredSet{Dirs: l.LocalDirs, SubDirs: l.SubDirs})
		}
		f.Apps = append(f.Apps, ra)
	}
	slices.SortFunc(f.Apps, func(a, b registeredApp) int { return strings.Compare(a.App, b.App) })
	return f
}

// takePending returns the log records not yet written, and drops them.
func (r *registry) takePending() []registryRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	recs := r.pending
	r.pending = nil
	return recs
}

// flush writes the changes of r not yet written: it appends their records
// to the log, or compacts (a new snapshot and log) when there is no log
// yet, the last write failed, or the log has outgrown the snapshot. A
// change is written once its flush returns, by this call or by an earlier
// one that took it (under p.mu, so that one has finished). It refuses to
// touch files that could not be read at start.
func (p *persistence) flush(r *registry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept != nil {
		return fmt.Errorf("not replacing registry file %s, which could not be read at start (%v); "+
			"what registered since is not persisted: repair the file or move it away, and restart the daemon", p.path, p.kept)
	}
	if p.log == nil || p.logBytes > max(minCompactLog, p.snapBytes) {
		return p.compactLocked(r)
	}
	recs := r.takePending()
	if len(recs) == 0 {
		return nil
	}
	var b []byte
	for _, rec := range recs {
		line, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	_, err := p.log.Write(b)
	if err == nil && p.sync {
		err = p.log.Sync()
	}
	if err != nil {
		// What the log holds now is unknown: the next flush writes it all
		// anew. The records are in r, which that snapshot holds.
		p.closeLog()
		return fmt.Errorf("appending to %s: %w", p.logPath(), err)
	}
	p.logBytes += int64(len(b))
	return nil
}

// compact writes r whole: a new, empty log, a snapshot that names it, then
// the log renamed into place; with nothing to name, it removes both files.
func (p *persistence) compact(r *registry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept != nil {
		return fmt.Errorf("not replacing registry file %s, which could not be read at start: %v", p.path, p.kept)
	}
	return p.compactLocked(r)
}

func (p *persistence) compactLocked(r *registry) error {
	p.closeLog()
	snap := r.snapshot()
	if len(snap.Apps) == 0 {
		// Nothing to remember: no files, so a root whose applications are
		// all removed, and their tombstones expired, is empty. The
		// snapshot goes first: a log without one is ignored.
		for _, path := range []string{p.path, p.logPath()} {
			if err := p.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	snap.Log = hex.EncodeToString(id[:])
	head, err := json.Marshal(registryLogHeader{Version: registryVersion, Log: snap.Log, Base: snap.Seq})
	if err != nil {
		return err
	}
	head = append(head, '\n')
	tmp := shufflefile.TempName(p.logPath())
	f, err := p.fs.Create(tmp, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			_ = p.fs.Remove(tmp)
		}
	}()
	if _, err := f.Write(head); err != nil {
		return err
	}
	if p.sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := shufflefile.ReplaceFile(p.fs, p.path, b, 0o600, p.sync); err != nil {
		return err
	}
	if err := p.fs.Rename(tmp, p.logPath()); err != nil {
		return err
	}
	if p.sync {
		if err := p.fs.SyncDir(filepath.Dir(p.path)); err != nil {
			return err
		}
	}
	ok = true
	p.log, p.logBytes, p.snapBytes = f, int64(len(head)), int64(len(b))
	return nil
}

// closeLog closes the open log, if any: the next flush compacts.
func (p *persistence) closeLog() {
	if p.log != nil {
		p.log.Close()
		p.log = nil
	}
}

// close closes the log (the daemon stops).
func (p *persistence) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLog()
}

// load reads the registry's files into r (no snapshot is an empty
// registry) and removes temp files a crash left beside them. The
// applications they name have no connection; their retention counts from
// now. Files that exist but cannot be read (an I/O error) or used
// (damagedRegistryError: too large, damaged, of another version, naming
// what no registration gives) are an error, r then holds none of them, and
// flush leaves them as they are: a write would replace what they name,
// owners included, with what registers from now on.
func (p *persistence) load(r *registry, now time.Time) error {
	dir, name := filepath.Split(p.path)
	if ents, err := p.fs.ReadDir(filepath.Clean(dir)); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), name+".") && shufflefile.IsTempName(e.Name()) {
				_ = p.fs.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	rf, err := readRegistryFiles(p.fs, p.path)
	if err == nil {
		if err = r.restore(rf, now); err != nil {
			err = &damagedRegistryError{err}
		}
	}
	if err != nil {
		p.kept = err
		return fmt.Errorf("registry file %s: %w (the file is kept as it is, never replaced: repair it or move it away, then restart the daemon)", p.path, err)
	}
	return nil
}

// readRegistryFiles reads the snapshot at path and applies the log that it
// names; no snapshot is an empty registry.
func readRegistryFiles(fsys vfs.FS, path string) (registryFile, error) {
	var rf registryFile
	b, err := readBounded(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return registryFile{Version: registryVersion}, nil
	}
	if err != nil {
		return rf, err
	}
	if err := json.Unmarshal(b, &rf); err != nil {
		return rf, &damagedRegistryError{err}
	}
	switch {
	case rf.Version == 1:
		return rf, nil // a snapshot alone
	case rf.Version != registryVersion:
		return rf, &damagedRegistryError{fmt.Errorf("version %d, this daemon reads 1 and %d", rf.Version, registryVersion)}
	case rf.Log == "":
		return rf, nil
	}
	logPath := logPathOf(path)
	b, err = readBounded(fsys, logPath)
	if errors.Is(err, fs.ErrNotExist) {
		return rf, nil // a crash after the snapshot named a log not yet in place
	}
	if err != nil {
		return rf, fmt.Errorf("%s: %w", logPath, err)
	}
	head, rest, _ := bytes.Cut(b, []byte("\n"))
	var h registryLogHeader
	if err := json.Unmarshal(head, &h); err != nil || h.Version != registryVersion {
		return rf, &damagedRegistryError{fmt.Errorf("%s: header %.100q: not a version %d log header (%v)", logPath, head, registryVersion, err)}
	}
	if h.Log != rf.Log {
		return rf, nil // an older log, from before the snapshot
	}
	var recs []registryRecord
	for n := 2; len(rest) > 0; n++ {
		line, more, complete := bytes.Cut(rest, []byte("\n"))
		rest = more
		if !complete {
			break // a crash mid-append: that change was never answered
		}
		var rec registryRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return rf, &damagedRegistryError{fmt.Errorf("%s: line %d: %w", logPath, n, err)}
		}
		recs = append(recs, rec)
	}
	slices.SortStableFunc(recs, func(a, b registryRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	apps := make(map[string]*registeredApp, len(rf.Apps))
	for i := range rf.Apps {
		apps[rf.Apps[i].App] = &rf.Apps[i]
	}
	for _, rec := range recs {
		if rec.Seq <= rf.Seq {
			continue // the snapshot holds it
		}
		rf.Seq = rec.Seq
		switch rec.Op {
		case opRegister:
			ra := apps[rec.App]
			if ra == nil || ra.Removed != 0 || ra.UID != rec.UID {
				ra = &registeredApp{App: rec.App, UID: rec.UID}
				apps[rec.App] = ra
			}
			if rec.Local != nil {
				ra.Local = append(ra.Local, *rec.Local)
			}
		case opRemove:
			apps[rec.App] = &registeredApp{App: rec.App, UID: rec.UID, Removed: rec.Removed}
		case opDrop:
			delete(apps, rec.App)
		default:
			return rf, &damagedRegistryError{fmt.Errorf("%s: change %d: unknown op %q", logPath, rec.Seq, rec.Op)}
		}
	}
	rf.Apps = rf.Apps[:0:0]
	for _, ra := range apps {
		rf.Apps = append(rf.Apps, *ra)
	}
	slices.SortFunc(rf.Apps, func(a, b registeredApp) int { return strings.Compare(a.App, b.App) })
	return rf, nil
}

// readBounded reads the file at path, at most maxRegistryFile bytes (more
// is a damagedRegistryError).
func readBounded(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > maxRegistryFile {
		return nil, &damagedRegistryError{fmt.Errorf("%d bytes, larger than %d bytes", fi.Size(), maxRegistryFile)}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRegistryFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRegistryFile {
		return nil, &damagedRegistryError{fmt.Errorf("larger than %d bytes", maxRegistryFile)}
	}
	return b, nil
}

// damagedRegistryError is a registry file that was read whole but is not
// one this daemon writes: damaged, too large, of another version, or
// naming what no registration gives. Unlike an I/O error of a failing
// disk, it does not go away by itself; the daemon should not start on it
// (registryDamaged).
type damagedRegistryError struct{ err error }

func (e *damagedRegistryError) Error() string { return e.err.Error() }
func (e *damagedRegistryError) Unwrap() error { return e.err }

// registryDamaged reports an error of loadRegistry that is a registry file
// read but not usable (damagedRegistryError), rather than one that could
// not be read (an I/O error).
func registryDamaged(err error) bool {
	var d *damagedRegistryError
	return errors.As(err, &d)
}

// restore checks the decoded registry file rf whole and, when it is valid,
// puts what it names into r.
func (r *registry) restore(rf registryFile, now time.Time) error {
	apps := make(map[string]*application, len(rf.Apps))
	dirs := map[string]string{}
	for i, ra := range rf.Apps {
		if err := disks.ValidateApp(ra.App); err != nil {
			return fmt.Errorf("apps[%d]: %w", i, err)
		}
		if _, ok := apps[ra.App]; ok {
			return fmt.Errorf("apps[%d]: application %q is named twice", i, ra.App)
		}
		a := &application{uid: ra.UID, lastSeen: now, cost: appCost(ra.App)}
		if ra.Removed != 0 {
			if len(ra.Local) != 0 {
				return fmt.Errorf("apps[%d]: removed application %q has local dirs", i, ra.App)
			}
			a.removed = time.Unix(ra.Removed, 0)
		}
		for j, set := range ra.Local {
			l := shufflefile.SparkHashed{LocalDirs: set.Dirs, SubDirs: set.SubDirs}
			if err := l.Validate(); err != nil {
				return fmt.Errorf("apps[%d].local[%d]: %w", i, j, err)
			}
			for _, d := range l.LocalDirs {
				if !filepath.IsAbs(d) || filepath.Clean(d) != d {
					return fmt.Errorf("apps[%d].local[%d]: %q is not an absolute clean path", i, j, d)
				}
				dirs[d] = ra.App
			}
			if !slices.ContainsFunc(a.local, func(h shufflefile.SparkHashed) bool { return sameSet(h, l) }) {
				a.local = append(a.local, l)
				a.cost += setCost(l)
			}
		}
		apps[ra.App] = a
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq = max(r.seq, rf.Seq)
	maps.Copy(r.localDirs, dirs)
	for name, a := range apps {
		r.apps[name] = a
		if a.tombstone() {
			r.tombs++
			r.tombBytes += a.cost
		} else {
			r.charge(a.uid, a.cost)
		}
	}
	r.evictLocked()
	return nil
}
