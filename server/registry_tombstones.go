package server

import (
	"time"
)

// forget records that app's outputs were removed; gone says that the
// removal found no error, so that nothing of app is left on disk. A
// registered application then becomes a tombstone (its owner kept, its
// local dirs and its share of the registry released) and one found in the
// root at start without an owner is no longer special; the registrations
// of the connections still registered for it end (registration.ended:
// they may open nothing more, and may register again). The oldest
// tombstones go when they take more than their bound. After a removal
// with errors, app stays as it was, its registrations too: its owner may
// remove it again. It returns the number of applications registered and
// whether the persistent part changed.
func (r *registry) forget(app string, gone bool, now time.Time) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !gone {
		return len(r.apps) - r.tombs, false
	}
	delete(r.orphans, app)
	a := r.apps[app]
	if a == nil || a.tombstone() {
		return len(r.apps) - r.tombs, false
	}
	for reg := range a.regs {
		reg.ended.Store(true)
	}
	clear(a.regs)
	a.lastSeen = now
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
