package server

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/errdefs"
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
			return "", nil, fmt.Errorf("%w: %v", errdefs.ErrResourceExhausted, err)
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

// access checks that uid may remove or list app (registry.access): true
// when the request goes to the files, false when its answer is empty
// without looking (an application nobody owns, with nothing on disk).
func (s *Server) access(uid uint32, app string) (bool, error) {
	if err := disks.ValidateApp(app); err != nil {
		return false, err
	}
	s.apps.unowned(app, func() bool { return s.disks.HasApplication(app) })
	return s.apps.access(uid, app, time.Now())
}

// abortOutputs aborts the map outputs of app (of one shuffle when shuffle
// >= 0) open on any connection and waits for them: MapWriter.Abort waits for
// a Commit in progress, which either committed before (its files are the
// removal's to take) or ends Aborted, leaving nothing. Until end is called,
// a map output of the shuffle (or application) opens aborted, so nothing of
// it writes a file while the removal lists and removes them. Their later
// requests get Aborted.
func (s *Server) abortOutputs(app string, shuffle int32) (aborted int, end func()) {
	victims, end := s.beginRemoval(app, shuffle)
	for _, o := range victims {
		_ = o.w.Abort() // a commit that already finished keeps its files; the removal takes them
	}
	return len(victims), end
}

// removeShuffle removes every map output of a shuffle of app, in the
// daemon's root and in the app's registered Spark local dirs.
func (s *Server) removeShuffle(app string, shuffle int32) (protocol.Removed, error) {
	aborted, end := s.abortOutputs(app, shuffle)
	defer end()
	n, freed, err := s.disks.RemoveShuffle(app, shuffle)
	removed := protocol.Removed{MapOutputs: int64(n), Bytes: freed}
	lerr := s.eachLocalRoot(app, func(r *shufflefile.Root) error {
		n, freed, err := shufflefile.RemoveShuffle(r.FS(), s.locks, r, shuffle)
		removed.MapOutputs += int64(n)
		removed.Bytes += freed
		return err
	})
	err = errors.Join(err, lerr)
	s.metrics.Removals.WithLabelValues(metrics.RemovalShuffle).Inc()
	s.log.Info("shuffle removed", "app", app, "shuffle", shuffle, "outputs", removed.MapOutputs, "bytes", removed.Bytes, "aborted", aborted, "err", err)
	return removed, err
}

// removeApplication removes every map output of app and, when nothing of
// it is left and it has no connection, leaves a tombstone of it
// (registry.forget).
func (s *Server) removeApplication(app, kind string) (protocol.Removed, error) {
	s.keys.forget(app)
	s.forgetServing(app)
	aborted, end := s.abortOutputs(app, -1)
	defer end()
	n, freed, err := s.disks.RemoveApplication(app)
	removed := protocol.Removed{MapOutputs: int64(n), Bytes: freed}
	lerr := s.eachLocalRoot(app, func(r *shufflefile.Root) error {
		usage, err := shufflefile.ListShuffles(r.FS(), r)
		for _, u := range usage {
			n, freed, rerr := shufflefile.RemoveShuffle(r.FS(), s.locks, r, u.Shuffle)
			removed.MapOutputs += int64(n)
			removed.Bytes += freed
			err = errors.Join(err, rerr)
		}
		return err
	})
	err = errors.Join(err, lerr)
	napps, changed := s.apps.forget(app, err == nil, time.Now())
	s.metrics.Applications.Set(float64(napps))
	if changed {
		s.saveRegistry()
	}
	s.metrics.Removals.WithLabelValues(kind).Inc()
	s.log.Info("application removed", "app", app, "why", kind, "outputs", removed.MapOutputs, "bytes", removed.Bytes, "aborted", aborted, "err", err)
	return removed, err
}

// eachLocalRoot opens each set of Spark local dirs registered for app (as
// a Root, confined, sub-dirs owned by the registrant or the daemon) and
// runs f on it. A set that cannot be opened (removed since) is skipped
// when it is gone, reported otherwise.
func (s *Server) eachLocalRoot(app string, f func(*shufflefile.Root) error) error {
	sets, uid := s.apps.local(app)
	var errs []error
	for _, l := range sets {
		r, err := shufflefile.OpenRoot(s.fs, l, s.owners(uid))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, f(r))
		r.Close()
	}
	return errors.Join(errs...)
}

// saveRegistry writes the registry's changes (persistence.flush); a
// failure is logged (the outputs are safe; only a restart before the next
// successful write would miss what changed).
func (s *Server) saveRegistry() {
	if err := s.persist.flush(s.apps); err != nil {
		s.log.Error("saving the registry", "path", s.persist.path, "err", err)
	}
}

// loadRegistry reads the registry file, records the applications of the
// daemon's root (registry.found: no uid but root's and the daemon's may
// take one the file does not name), and sweeps the temp files a crash left
// in every Spark local dir the file names. Run it at start, before
// serving. A registry file that cannot be read is an error, and the file
// is kept as it is (persistence.load); the root's applications are
// recorded all the same, so none of them is left for any uid to take.
func (s *Server) loadRegistry() error {
	now := time.Now()
	lerr := s.persist.load(s.apps, now)
	for _, app := range s.persist.legacy {
		s.log.Warn("registry: forgetting an application whose id starts with "+shufflefile.DaemonPrefix+", which only the daemon's own files may now; "+
			"its outputs, if any, stay where they are", "app", app)
	}
	apps, err := s.disks.Applications()
	s.apps.found(apps, now)
	if err != nil {
		lerr = errors.Join(lerr, fmt.Errorf("listing the applications of the daemon's root: %w", err))
	}
	s.metrics.Applications.Set(float64(s.apps.registered()))
	for app, sets := range s.apps.all() {
		_, uid := s.apps.local(app)
		for _, l := range sets {
			s.apps.swept(l.LocalDirs)
			r, err := shufflefile.OpenRoot(s.fs, l, s.owners(uid))
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					s.log.Warn("opening registered local dirs", "app", app, "dirs", l.LocalDirs, "err", err)
				}
				continue
			}
			for _, d := range l.LocalDirs {
				if n, err := shufflefile.Sweep(r.FS(), d); err != nil && !errors.Is(err, fs.ErrNotExist) {
					s.log.Warn("sweeping local dir", "dir", d, "err", err)
				} else if n > 0 {
					s.log.Info("removed temp files left by an earlier run", "dir", d, "files", n)
				}
			}
			r.Close()
		}
	}
	return lerr
}

// owners are the uids a sub-dir of uid's local dirs may belong to: uid and
// the daemon's own.
func (s *Server) owners(uid uint32) []uint32 {
	if self := uint32(os.Getuid()); self != uid {
		return []uint32{uid, self}
	}
	return []uint32{uid}
}

func (sess *session) removeShuffle(id uint32, m *protocol.RemoveShuffle) error {
	removed, err := sess.s.removeShuffleFor(sess.cred.UID, m.AppID, m.ShuffleID)
	if err != nil {
		return err
	}
	sess.send(id, &protocol.ShuffleRemoved{Removed: removed})
	return nil
}

func (sess *session) removeApplication(id uint32, m *protocol.RemoveApplication) error {
	removed, err := sess.s.removeApplicationFor(sess.cred.UID, m.AppID)
	if err != nil {
		return err
	}
	sess.send(id, &protocol.ApplicationRemoved{Removed: removed})
	return nil
}

func (sess *session) listShuffles(id uint32, m *protocol.ListShuffles) error {
	list, err := sess.s.listShufflesFor(sess.cred.UID, m.AppID)
	if err != nil {
		return err
	}
	sl, err := shuffleList(m.AppID, list)
	if err != nil {
		return err
	}
	sess.send(id, sl)
	return nil
}

// shuffleList is the ShuffleList of app's shuffles, refused
// (ResourceExhausted) past the most one holds.
func shuffleList(app string, list []protocol.ShuffleInfo) (*protocol.ShuffleList, error) {
	if len(list) > protocol.MaxShuffles {
		return nil, fmt.Errorf("%w: application %q has %d shuffles, more than a ShuffleList holds (%d)", errdefs.ErrResourceExhausted, app, len(list), protocol.MaxShuffles)
	}
	return &protocol.ShuffleList{Shuffles: list}, nil
}

// removeShuffleFor answers RemoveShuffle of the peer uid: 0 removed for an
// application nobody owns and with nothing on disk.
func (s *Server) removeShuffleFor(uid uint32, app string, shuffle int32) (protocol.Removed, error) {
	files, err := s.access(uid, app)
	if err != nil || !files {
		return protocol.Removed{}, err
	}
	return s.removeShuffle(app, shuffle)
}

// removeApplicationFor answers RemoveApplication of the peer uid: 0
// removed for an application nobody owns and with nothing on disk, which
// leaves no trace in the registry.
func (s *Server) removeApplicationFor(uid uint32, app string) (protocol.Removed, error) {
	files, err := s.access(uid, app)
	if err != nil || !files {
		return protocol.Removed{}, err
	}
	return s.removeApplication(app, metrics.RemovalApplication)
}

// listShufflesFor answers ListShuffles of the peer uid: the shuffles of
// app in the daemon's root and in its registered Spark local dirs,
// ascending by id; none for an application nobody owns and with nothing on
// disk.
func (s *Server) listShufflesFor(uid uint32, app string) ([]protocol.ShuffleInfo, error) {
	files, err := s.access(uid, app)
	if err != nil {
		return nil, err
	}
	if !files {
		return []protocol.ShuffleInfo{}, nil
	}
	usage, err := s.disks.ListShuffles(app)
	if err != nil {
		return nil, err
	}
	byID := map[int32]*protocol.ShuffleInfo{}
	add := func(u shufflefile.ShuffleUsage) {
		si := byID[u.Shuffle]
		if si == nil {
			si = &protocol.ShuffleInfo{ShuffleID: u.Shuffle}
			byID[u.Shuffle] = si
		}
		si.MapOutputs += int64(u.Outputs)
		si.Bytes += u.Bytes
	}
	for _, u := range usage {
		add(u)
	}
	// Sets of local dirs may share dirs (the same dirs in another order or
	// with another sub_dirs): each file counts once, as a removal over
	// every set removes it once.
	var census shufflefile.Census
	if err := s.eachLocalRoot(app, func(r *shufflefile.Root) error {
		return census.Add(r.FS(), r)
	}); err != nil {
		return nil, err
	}
	for _, u := range census.Shuffles() {
		add(u)
	}
	list := make([]protocol.ShuffleInfo, 0, len(byID))
	for _, si := range byID {
		list = append(list, *si)
	}
	slices.SortFunc(list, func(a, b protocol.ShuffleInfo) int { return cmp.Compare(a.ShuffleID, b.ShuffleID) })
	return list, nil
}

// housekeepingInterval is how often disk figures are exported and
// retention is applied; each round lists the root's applications and
// shuffles.
const housekeepingInterval = 30 * time.Second

// housekeeping exports disk figures, removes applications idle for
// longer than the retention and drops tombstones past tombstoneTTL, until
// Shutdown.
func (s *Server) housekeeping() {
	defer s.loops.Done()
	t := time.NewTicker(housekeepingInterval)
	defer t.Stop()
	for {
		s.exportDisks()
		if s.cfg.Retention > 0 {
			s.expire(time.Now())
		}
		if s.apps.prune(time.Now()) {
			s.saveRegistry()
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
		s.metrics.DiskFreeBytes.WithLabelValues(st.Dir).Set(float64(st.Free))
		s.metrics.DiskSizeBytes.WithLabelValues(st.Dir).Set(float64(st.Total))
		if !st.InRotation {
			out++
		}
	}
	s.metrics.DisksOutOfRotation.Set(float64(out))
	apps, err := s.disks.Applications()
	// What could be read is exported even if a part could not.
	used := map[string]int64{}
	for _, d := range s.disks.Disks() {
		used[d.Dir()] = 0
	}
	shuffles := 0
	for _, a := range apps {
		for dir, n := range a.DiskBytes {
			used[dir] += n
		}
		if list, err := s.disks.ListShuffles(a.App); err == nil {
			shuffles += len(list)
		}
	}
	for dir, n := range used {
		s.metrics.DiskBytes.WithLabelValues(dir).Set(float64(n))
	}
	if err == nil {
		s.metrics.Shuffles.Set(float64(shuffles))
	}
}

// expire removes applications without a connection for longer than the
// retention: those registered since start from their last disconnect,
// those the registry file names from the start (those of the daemon's
// root alone from their newest file), and those only on disk from their
// newest file.
func (s *Server) expire(now time.Time) {
	cut := now.Add(-s.cfg.Retention)
	idle, known := s.apps.idle(cut)
	var expired []string
	for _, name := range idle {
		if s.openOutputs(name) == 0 {
			expired = append(expired, name)
		}
	}
	if usage, err := s.disks.Applications(); err == nil {
		for _, u := range usage {
			if !known[u.App] && u.ModTime.Before(cut) {
				expired = append(expired, u.App)
			}
		}
	}
	for _, app := range expired {
		if s.apps.connected(app) || s.openOutputs(app) > 0 { // it reconnected since the decision
			continue
		}
		if _, err := s.removeApplication(app, metrics.RemovalExpired); err != nil {
			s.log.Warn("removing expired application", "app", app, "err", err)
		}
	}
}

// openOutputs returns the map outputs of app open now.
func (s *Server) openOutputs(app string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.outputs[app])
}
