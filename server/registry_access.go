package server

import (
	"fmt"
	"time"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/errdefs"
)

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
		case len(a.local) == 0 && len(a.regs) == 0 && u.ModTime.Before(a.lastSeen):
			a.lastSeen = u.ModTime
		}
	}
}
