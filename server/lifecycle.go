package server

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
)

// place picks the disk of a new map output in the daemon's root and
// reserves space on it. An attempt of an output already committed on some
// disk goes to that disk, so the first commit wins across disks too.
func (s *Server) place(reg *registration, id shufflefile.ID) (string, *disks.Reservation, error) {
	if len(s.disks.Disks()) > 1 {
		d, err := s.disks.Locate(reg.app, reg.executor, id)
		if err != nil {
			return "", nil, err
		}
		if d != nil {
			dir, err := d.ExecutorDir(reg.app, reg.executor)
			return dir, nil, err
		}
	}
	res, err := s.disks.Reserve(reg.app, 0)
	if err != nil {
		if errors.Is(err, disks.ErrDiskFull) || errors.Is(err, disks.ErrDiskFailed) {
			s.metrics.DiskFullRefusals.Inc()
			return "", nil, fmt.Errorf("%w: %v", errExhausted, err)
		}
		return "", nil, err
	}
	dir, err := res.Disk().ExecutorDir(reg.app, reg.executor)
	if err != nil {
		res.Release()
		return "", nil, err
	}
	return dir, res, nil
}

// owns checks that uid may remove or list app: the uid that registered it,
// or, for an application not registered since the daemon started, root or
// the daemon's own uid.
func (s *Server) owns(uid uint32, app string) error {
	s.mu.Lock()
	a := s.mu.apps[app]
	s.mu.Unlock()
	switch {
	case a != nil && a.uid == uid:
		return nil
	case a != nil:
		return fmt.Errorf("%w: application %q belongs to uid %d, not %d", errPermission, app, a.uid, uid)
	case uid == 0 || uid == uint32(os.Getuid()):
		return nil
	}
	return fmt.Errorf("%w: application %q is not registered; only root or the daemon's user may remove it", errPermission, app)
}

// abortOutputs aborts the open map outputs of app (of one shuffle when
// shuffle >= 0) on every connection, so that nothing of them commits after
// the files are removed. Their later requests get Aborted.
func (s *Server) abortOutputs(app string, shuffle int32) int {
	s.mu.Lock()
	var victims []*output
	for o := range s.mu.outputs[app] {
		if shuffle < 0 || o.id.Shuffle == shuffle {
			victims = append(victims, o)
		}
	}
	s.mu.Unlock()
	for _, o := range victims {
		_ = o.w.Abort() // a commit that already finished keeps its files; the removal takes them
	}
	return len(victims)
}

// removeShuffle removes every map output of a shuffle of app, in the
// daemon's root and in the app's registered Spark local dirs.
func (s *Server) removeShuffle(app string, shuffle int32) (protocol.Removed, error) {
	aborted := s.abortOutputs(app, shuffle)
	n, freed, err := s.disks.RemoveShuffle(app, shuffle)
	removed := protocol.Removed{MapOutputs: int64(n), Bytes: freed}
	for _, l := range s.localLayouts(app) {
		n, freed, lerr := disks.RemoveShuffleIn(s.fs, l, shuffle)
		removed.MapOutputs += int64(n)
		removed.Bytes += freed
		err = errors.Join(err, lerr)
	}
	s.metrics.Removals.WithLabelValues(metrics.RemovalShuffle).Inc()
	s.log.Info("shuffle removed", "app", app, "shuffle", shuffle, "outputs", removed.MapOutputs, "bytes", removed.Bytes, "aborted", aborted, "err", err)
	return removed, err
}

// removeApplication removes every map output of app and forgets it unless
// it still has connections.
func (s *Server) removeApplication(app, kind string) (protocol.Removed, error) {
	aborted := s.abortOutputs(app, -1)
	n, freed, err := s.disks.RemoveApplication(app)
	removed := protocol.Removed{MapOutputs: int64(n), Bytes: freed}
	for _, l := range s.localLayouts(app) {
		for _, sh := range localShuffles(s, l) {
			n, freed, lerr := disks.RemoveShuffleIn(s.fs, l, sh)
			removed.MapOutputs += int64(n)
			removed.Bytes += freed
			err = errors.Join(err, lerr)
		}
	}
	s.mu.Lock()
	if a := s.mu.apps[app]; a != nil && a.sessions == 0 {
		delete(s.mu.apps, app)
		for _, l := range a.local {
			for _, d := range l.(shufflefile.SparkHashed).LocalDirs {
				delete(s.mu.localDirs, d)
			}
		}
	}
	s.metrics.Applications.Set(float64(len(s.mu.apps)))
	s.mu.Unlock()
	s.metrics.Removals.WithLabelValues(kind).Inc()
	s.log.Info("application removed", "app", app, "why", kind, "outputs", removed.MapOutputs, "bytes", removed.Bytes, "aborted", aborted, "err", err)
	return removed, err
}

// localShuffles lists the shuffle ids with files in a Spark layout; it is
// best effort (RemoveShuffleIn reports the errors that matter).
func localShuffles(s *Server, l shufflefile.Layout) []int32 {
	seen := map[int32]bool{}
	var ids []int32
	sh, ok := l.(shufflefile.SparkHashed)
	if !ok {
		return nil
	}
	for _, dir := range sh.LocalDirs {
		subs, _ := s.fs.ReadDir(dir)
		for _, sub := range subs {
			if !sub.IsDir() {
				continue
			}
			ents, _ := s.fs.ReadDir(dir + "/" + sub.Name())
			for _, e := range ents {
				var shuffle int32
				var m int64
				if _, err := fmt.Sscanf(e.Name(), "shuffle_%d_%d_0.index", &shuffle, &m); err == nil && !seen[shuffle] {
					seen[shuffle] = true
					ids = append(ids, shuffle)
				}
			}
		}
	}
	return ids
}

func (s *Server) localLayouts(app string) []shufflefile.Layout {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.mu.apps[app]; a != nil {
		return append([]shufflefile.Layout(nil), a.local...)
	}
	return nil
}

func (sess *session) removeShuffle(id uint32, m *protocol.RemoveShuffle) error {
	if err := sess.s.owns(sess.cred.UID, m.AppID); err != nil {
		return err
	}
	removed, err := sess.s.removeShuffle(m.AppID, m.ShuffleID)
	if err != nil {
		return err
	}
	sess.send(id, &protocol.ShuffleRemoved{Removed: removed})
	return nil
}

func (sess *session) removeApplication(id uint32, m *protocol.RemoveApplication) error {
	if err := sess.s.owns(sess.cred.UID, m.AppID); err != nil {
		return err
	}
	removed, err := sess.s.removeApplication(m.AppID, metrics.RemovalApplication)
	if err != nil {
		return err
	}
	sess.send(id, &protocol.ApplicationRemoved{Removed: removed})
	return nil
}

func (sess *session) listShuffles(id uint32, m *protocol.ListShuffles) error {
	if err := sess.s.owns(sess.cred.UID, m.AppID); err != nil {
		return err
	}
	usage, err := sess.s.disks.ListShuffles(m.AppID)
	if err != nil {
		return err
	}
	list := &protocol.ShuffleList{Shuffles: make([]protocol.ShuffleInfo, len(usage))}
	for i, u := range usage {
		list.Shuffles[i] = protocol.ShuffleInfo{ShuffleID: u.Shuffle, MapOutputs: int64(u.Outputs), Bytes: u.Bytes}
	}
	sess.send(id, list)
	return nil
}

// housekeepingInterval is how often disk figures are exported and
// retention is applied; each round lists the root's applications and
// shuffles.
const housekeepingInterval = 30 * time.Second

// housekeeping exports disk figures and removes applications idle for
// longer than the retention, until Shutdown.
func (s *Server) housekeeping() {
	defer s.loops.Done()
	t := time.NewTicker(housekeepingInterval)
	defer t.Stop()
	for {
		s.exportDisks()
		if s.cfg.Retention > 0 {
			s.expire(time.Now())
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

func (s *Server) exportDisks() {
	out := 0
	for _, st := range s.disks.Stats() {
		s.metrics.DiskBytes.WithLabelValues(st.Dir).Set(float64(st.Total - st.Free))
		if !st.InRotation {
			out++
		}
	}
	s.metrics.DisksOutOfRotation.Set(float64(out))
	if apps, err := s.disks.Applications(); err == nil {
		shuffles := 0
		for _, a := range apps {
			if list, err := s.disks.ListShuffles(a.App); err == nil {
				shuffles += len(list)
			}
		}
		s.metrics.Shuffles.Set(float64(shuffles))
	}
}

// expire removes applications without a connection for longer than the
// retention: those registered since start from their last disconnect, and
// those only on disk (from before a restart) from their newest file.
func (s *Server) expire(now time.Time) {
	cut := now.Add(-s.cfg.Retention)
	var expired []string
	s.mu.Lock()
	for name, a := range s.mu.apps {
		if a.sessions == 0 && a.lastSeen.Before(cut) && len(s.mu.outputs[name]) == 0 {
			expired = append(expired, name)
		}
	}
	known := make(map[string]bool, len(s.mu.apps))
	for name := range s.mu.apps {
		known[name] = true
	}
	s.mu.Unlock()
	if usage, err := s.disks.Applications(); err == nil {
		for _, u := range usage {
			if !known[u.App] && u.ModTime.Before(cut) {
				expired = append(expired, u.App)
			}
		}
	}
	for _, app := range expired {
		s.mu.Lock()
		a := s.mu.apps[app]
		back := a != nil && (a.sessions > 0 || len(s.mu.outputs[app]) > 0)
		s.mu.Unlock()
		if back { // it reconnected since the decision
			continue
		}
		if _, err := s.removeApplication(app, metrics.RemovalExpired); err != nil {
			s.log.Warn("removing expired application", "app", app, "err", err)
		}
	}
}
