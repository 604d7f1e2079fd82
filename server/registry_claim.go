package server

import (
	"fmt"
	"slices"
	"time"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/shufflefile"
)

// claim records reg, a registration of app by uid with the Spark local
// dirs l (nil for the daemon's root). It refuses an application of another uid
// (registered, or removed less than tombstoneTTL ago), one with outputs in
// the daemon's root and no recorded owner unless uid is root or the
// daemon's, a local dir named twice or registered by another application,
// and a registration past the registry's bounds. It returns the dirs whose
// sweep this registration must run (their channels, to close when done)
// and those whose sweep another registration runs (to wait for).
func (r *registry) claim(uid uint32, app string, l *shufflefile.SparkHashed, reg *registration) (c claimed, err error) {
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
		a = &application{uid: uid, regs: map[*registration]struct{}{}}
		r.apps[app] = a
		delete(r.orphans, app)
		c.changed = true
	case a.tombstone():
		r.reviveLocked(a, now)
		c.changed = true
	}
	a.cost += grow
	r.charge(uid, grow)
	if a.regs == nil {
		a.regs = map[*registration]struct{}{}
	}
	a.regs[reg] = struct{}{}
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

// claimed is what claim decided.
type claimed struct {
	// mine are the local dirs whose sweep this registration runs (close
	// each channel when done); others those whose sweep another runs.
	mine, others map[string]chan struct{}
	apps         int  // applications registered
	changed      bool // a new application, owner or set of local dirs: persist
}
