package disks

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
)

// ShuffleUsage is what one shuffle of an application holds on the disks.
type ShuffleUsage = shufflefile.ShuffleUsage

// AppUsage is what one application holds on the disks.
type AppUsage struct {
	App string
	// Bytes sums the sizes of the application's files on every disk.
	Bytes int64
	// DiskBytes are those sizes by disk directory (Disk.Dir).
	DiskBytes map[string]int64
	// ModTime is the newest modification time of the application's
	// directories and files on every disk: when it last wrote.
	ModTime time.Time
}

// appEntry describes app's entry in d's directory (Lstat), or nil when
// there is none. Trees are walked from entries described without
// following a symbolic link, which tells a directory from a symbolic link
// to one: nothing outside the disk is ever listed or removed. It reads the
// one entry, not the disk's directory: a request costs the same whatever
// else the root holds.
func (s *Set) appEntry(d *Disk, app string) (fs.FileInfo, error) {
	fi, err := s.opts.fs.Lstat(filepath.Join(d.dir, app))
	switch {
	case notExist(err):
		return nil, nil
	case err != nil:
		s.ReportError(d, err)
		return nil, err
	}
	return fi, nil
}

// HasApplication reports whether app has a directory (not a symbolic
// link) on any disk.
func (s *Set) HasApplication(app string) bool {
	if validateApp(app) != nil {
		return false
	}
	for _, d := range s.disks {
		if fi, err := s.opts.fs.Lstat(filepath.Join(d.dir, app)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// executorDirs lists <disk>/<app>/* directories on every disk, going on
// past errors.
func (s *Set) executorDirs(app string) (dirs []string, errs []error) {
	for _, d := range s.disks {
		e, err := s.appEntry(d, app)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e == nil || !e.IsDir() {
			continue
		}
		appDir := filepath.Join(d.dir, app)
		ents, err := s.opts.fs.ReadDir(appDir)
		if err != nil {
			if !notExist(err) {
				s.ReportError(d, err)
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(appDir, e.Name()))
			}
		}
	}
	return dirs, errs
}

// RemoveShuffle removes every file of shuffle of app on every disk and
// executor: committed map outputs (index first, then data and checksum)
// and temp files of outputs in flight. It returns the number of map
// outputs removed (counted by index files) and the bytes freed. Removing
// what is gone already is no error. Stop the shuffle's writers first: a
// file committed after the directories are listed stays.
func (s *Set) RemoveShuffle(app string, shuffle int32) (removedOutputs int, freedBytes int64, err error) {
	if err := validateApp(app); err != nil {
		return 0, 0, err
	}
	if err := (shufflefile.ID{Shuffle: shuffle}).Validate(); err != nil {
		return 0, 0, fmt.Errorf("disks: remove shuffle: %w", err)
	}
	dirs, errs := s.executorDirs(app)
	for _, dir := range dirs {
		n, b, err := shufflefile.RemoveShuffle(s.opts.fs, s.opts.locks, shufflefile.Flat(dir), shuffle)
		removedOutputs += n
		freedBytes += b
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removedOutputs, freedBytes, fmt.Errorf("disks: remove shuffle %d of application %q: %w", shuffle, app, err)
	}
	return removedOutputs, freedBytes, nil
}

// RemoveApplication removes the trees <disk>/<app> on every disk, index
// files of each directory first, and returns the number of map outputs
// removed (counted by index files) and the bytes freed. Removing an
// application that is gone already is no error. Stop its writers first.
func (s *Set) RemoveApplication(app string) (removedOutputs int, freedBytes int64, err error) {
	if err := validateApp(app); err != nil {
		return 0, 0, err
	}
	var errs []error
	for _, d := range s.disks {
		e, err := s.appEntry(d, app)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e == nil {
			continue
		}
		var n int
		var b int64
		var rerr error
		if e.IsDir() {
			n, b, rerr = shufflefile.RemoveAll(s.opts.fs, s.opts.locks, filepath.Join(d.dir, app))
		} else if err := s.opts.fs.Remove(filepath.Join(d.dir, app)); err != nil && !notExist(err) {
			rerr = err // a file or a symbolic link: itself only
		}
		removedOutputs += n
		freedBytes += b
		if rerr != nil {
			s.ReportError(d, rerr)
			errs = append(errs, rerr)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removedOutputs, freedBytes, fmt.Errorf("disks: remove application %q: %w", app, err)
	}
	return removedOutputs, freedBytes, nil
}

// ListShuffles returns the shuffles of app on every disk and executor,
// ascending by id. An application with nothing on disk has none.
func (s *Set) ListShuffles(app string) ([]ShuffleUsage, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	dirs, errs := s.executorDirs(app)
	byID := map[int32]*ShuffleUsage{}
	for _, dir := range dirs {
		usage, err := shufflefile.ListShuffles(s.opts.fs, shufflefile.Flat(dir))
		if err != nil {
			errs = append(errs, err)
		}
		for _, u := range usage {
			sum := byID[u.Shuffle]
			if sum == nil {
				sum = &ShuffleUsage{Shuffle: u.Shuffle}
				byID[u.Shuffle] = sum
			}
			sum.Outputs += u.Outputs
			sum.Bytes += u.Bytes
		}
	}
	out := make([]ShuffleUsage, 0, len(byID))
	for _, u := range byID {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b ShuffleUsage) int { return cmp.Compare(a.Shuffle, b.Shuffle) })
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("disks: list shuffles of application %q: %w", app, err)
	}
	return out, nil
}

// Applications returns every application with a directory on some disk,
// sorted by id, with its bytes and newest modification time over all
// disks. Entries of a disk that are not directories or not valid
// application ids are not applications. On error it returns what it
// could read.
func (s *Set) Applications() ([]AppUsage, error) {
	byApp := map[string]*AppUsage{}
	errs := s.appDirs(func(d *Disk, e fs.DirEntry) error {
		info, err := e.Info()
		if err != nil {
			if notExist(err) {
				return nil
			}
			return err
		}
		bytes, newest, err := treeUsage(s.opts.fs, filepath.Join(d.dir, e.Name()))
		u := byApp[e.Name()]
		if u == nil {
			u = &AppUsage{App: e.Name(), DiskBytes: map[string]int64{}}
			byApp[e.Name()] = u
		}
		u.Bytes += bytes
		u.DiskBytes[d.dir] += bytes
		for _, t := range []time.Time{info.ModTime(), newest} {
			if t.After(u.ModTime) {
				u.ModTime = t
			}
		}
		return err
	})
	out := make([]AppUsage, 0, len(byApp))
	for _, u := range byApp {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b AppUsage) int { return cmp.Compare(a.App, b.App) })
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("disks: list applications: %w", err)
	}
	return out, nil
}

// ApplicationNames returns the ids of the applications with a directory
// on some disk, sorted, each once: what Applications finds, without
// walking their trees (one read of each disk's directory). On error it
// returns what it could read.
func (s *Set) ApplicationNames() ([]string, error) {
	var names []string
	errs := s.appDirs(func(_ *Disk, e fs.DirEntry) error {
		names = append(names, e.Name())
		return nil
	})
	if len(s.disks) > 1 {
		slices.Sort(names)
		names = slices.Compact(names)
	}
	if err := errors.Join(errs...); err != nil {
		return names, fmt.Errorf("disks: list applications: %w", err)
	}
	return names, nil
}

// appDirs calls visit for each entry of each disk's directory that is a
// directory named by a valid application id, and returns the errors of
// reading the disks' directories (each reported) and those visit returned.
func (s *Set) appDirs(visit func(d *Disk, e fs.DirEntry) error) []error {
	var errs []error
	for _, d := range s.disks {
		ents, err := s.opts.fs.ReadDir(d.dir)
		if err != nil {
			s.ReportError(d, err)
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || shufflefile.ValidateName("application id", e.Name()) != nil {
				continue
			}
			if err := visit(d, e); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// SweepTemps removes the temp files (shufflefile.Sweep) of every executor
// directory on every disk and returns how many. Run it at startup, before
// any map output is written.
func (s *Set) SweepTemps() (removed int, err error) {
	var errs []error
	for _, d := range s.disks {
		apps, err := s.opts.fs.ReadDir(d.dir)
		if err != nil {
			s.ReportError(d, err)
			errs = append(errs, err)
			continue
		}
		for _, a := range apps {
			if !a.IsDir() {
				continue
			}
			appDir := filepath.Join(d.dir, a.Name())
			execs, err := s.opts.fs.ReadDir(appDir)
			if err != nil {
				if !notExist(err) {
					errs = append(errs, err)
				}
				continue
			}
			for _, e := range execs {
				if !e.IsDir() {
					continue
				}
				n, err := shufflefile.Sweep(s.opts.fs, filepath.Join(appDir, e.Name()))
				removed += n
				if err != nil && !notExist(err) {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("disks: sweep temp files: %w", err)
	}
	return removed, nil
}

// Locate returns the disk that holds a committed index file of the map
// output id of app's executor, or nil. Use it to read an output back, and
// before placing a new attempt of an output that may exist, since the
// first-commit-wins rule of shufflefile.Commit holds within one directory.
// Disks out of rotation are not searched; a disk that fails the look-up is
// reported (ReportError) and skipped, so one failing disk does not stop
// map outputs that can go elsewhere.
func (s *Set) Locate(app, executor string, id shufflefile.ID) (*Disk, error) {
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("disks: locate: %w", err)
	}
	for _, d := range s.disks {
		dir, err := d.ExecutorDir(app, executor)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		out := d.mu.out
		d.mu.Unlock()
		if out {
			continue
		}
		_, err = s.opts.fs.Stat(filepath.Join(dir, shufflefile.IndexName(id)))
		switch {
		case err == nil:
			return d, nil
		case !notExist(err):
			s.ReportError(d, err)
		}
	}
	return nil, nil
}
