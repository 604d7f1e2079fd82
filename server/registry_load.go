package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

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
		var legacy []string
		if legacy, err = r.restore(rf, now); err != nil {
			err = &damagedRegistryError{err}
		}
		p.legacy = legacy
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
// puts what it names into r. An application whose id starts with
// shufflefile.DaemonPrefix (registered before such ids were refused; no
// client may name it now) is left out and forgotten (a drop record), and
// returned in legacy for the log.
func (r *registry) restore(rf registryFile, now time.Time) (legacy []string, err error) {
	apps := make(map[string]*application, len(rf.Apps))
	dirs := map[string]string{}
	for i, ra := range rf.Apps {
		if legacyApp(ra.App) {
			legacy = append(legacy, ra.App)
			continue
		}
		if err := disks.ValidateApp(ra.App); err != nil {
			return nil, fmt.Errorf("apps[%d]: %w", i, err)
		}
		if _, ok := apps[ra.App]; ok {
			return nil, fmt.Errorf("apps[%d]: application %q is named twice", i, ra.App)
		}
		a := &application{uid: ra.UID, lastSeen: now, cost: appCost(ra.App)}
		if ra.Removed != 0 {
			if len(ra.Local) != 0 {
				return nil, fmt.Errorf("apps[%d]: removed application %q has local dirs", i, ra.App)
			}
			a.removed = time.Unix(ra.Removed, 0)
		}
		for j, set := range ra.Local {
			l := shufflefile.SparkHashed{LocalDirs: set.Dirs, SubDirs: set.SubDirs}
			if err := l.Validate(); err != nil {
				return nil, fmt.Errorf("apps[%d].local[%d]: %w", i, j, err)
			}
			for _, d := range l.LocalDirs {
				if !filepath.IsAbs(d) || filepath.Clean(d) != d {
					return nil, fmt.Errorf("apps[%d].local[%d]: %q is not an absolute clean path", i, j, d)
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
	for _, name := range legacy {
		r.logLocked(registryRecord{Op: opDrop, App: name})
	}
	r.evictLocked()
	return legacy, nil
}

// legacyApp reports an application id that an earlier version accepted
// and this one refuses because it starts with shufflefile.DaemonPrefix.
func legacyApp(app string) bool {
	rest, ok := strings.CutPrefix(app, shufflefile.DaemonPrefix)
	return ok && app != "." && app != ".." && shufflefile.ValidateName("application id", "x"+rest) == nil
}
