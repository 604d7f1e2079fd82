package server

import (
	"fmt"
	"slices"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/protocol"
)

// owner is what ListApplications reports of a registered application.
type owner struct {
	uid      uint32
	sessions int
}

// owners returns the owner and connections of every registered
// application (removed ones aside).
func (r *registry) owners() map[string]owner {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]owner, len(r.apps))
	for name, a := range r.apps {
		if !a.tombstone() {
			out[name] = owner{a.uid, len(a.regs)}
		}
	}
	return out
}

func (sess *session) listApplications(id uint32) error {
	list, err := sess.s.applicationsFor(sess.cred.UID)
	if err != nil {
		return err
	}
	sess.send(id, &protocol.ApplicationList{Applications: list})
	return nil
}

// applicationsFor answers ListApplications of the peer uid: the registered
// applications and those in the daemon's root, ascending by id, with their
// figures as ListShuffles counts them. Root and the daemon's own uid see
// every one (removal stays the owner's); any other uid its own, and the
// root's directories are not read for it. What it reads is linear in what
// it lists: the root's directories once, then each application's own
// trees; more applications than an ApplicationList holds are refused
// before any application's figures are read.
func (s *Server) applicationsFor(uid uint32) ([]protocol.ApplicationInfo, error) {
	owned := s.apps.owners()
	privileged := s.apps.privileged(uid)
	names := make([]string, 0, len(owned))
	for name, o := range owned {
		if privileged || o.uid == uid {
			names = append(names, name)
		}
	}
	if privileged {
		inRoot, err := s.disks.ApplicationNames()
		if err != nil {
			return nil, err
		}
		for _, name := range inRoot {
			if _, ok := owned[name]; !ok {
				names = append(names, name)
			}
		}
	}
	if len(names) > protocol.MaxApplications {
		return nil, fmt.Errorf("%w: %d applications, more than an ApplicationList holds (%d)", errdefs.ErrResourceExhausted, len(names), protocol.MaxApplications)
	}
	slices.Sort(names)
	out := make([]protocol.ApplicationInfo, 0, len(names))
	for _, name := range names {
		o, ok := owned[name]
		as := uid // whose eyes the figures are read with (listShufflesFor's rules)
		if ok {
			as = o.uid
		}
		list, err := s.listShufflesFor(as, name)
		if err != nil {
			return nil, fmt.Errorf("application %q: %w", name, err)
		}
		info := protocol.ApplicationInfo{AppID: name, OwnerUID: -1, Shuffles: int32(len(list))}
		if ok {
			info.OwnerUID, info.Connections = int64(o.uid), int32(o.sessions)
		}
		for _, sh := range list {
			info.MapOutputs += sh.MapOutputs
			info.Bytes += sh.Bytes
		}
		out = append(out, info)
	}
	return out, nil
}
