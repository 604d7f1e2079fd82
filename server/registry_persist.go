package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// logLocked numbers rec, the change just made, and keeps it for the next
// flush. r.mu is held.
func (r *registry) logLocked(rec registryRecord) {
	r.seq++
	rec.Seq = r.seq
	r.pending = append(r.pending, rec)
}

// persistence writes the registry's files (see registryFile); writes run
// one at a time, under its lock.
type persistence struct {
	mu   sync.Mutex
	fs   vfs.FS
	path string // the snapshot's; the log's is logPathOf(path)
	sync bool
	// kept is why the files could not be read at start: they are then kept
	// as they are, never replaced nor removed, so that the owners and dirs
	// they hold are not lost for good; an operator repairs or moves them
	// and restarts the daemon.
	kept error
	// legacy are the applications the files named whose ids this version
	// refuses (legacyApp): load left them out.
	legacy []string
	// log is the open log (nil: none yet, or a write failed: the next
	// flush compacts), logBytes its size, snapBytes the snapshot's.
	log                 vfs.File
	logBytes, snapBytes int64
}

// logPath is the log's path.
func (p *persistence) logPath() string { return logPathOf(p.path) }

// logPathOf is the path of the log of the snapshot at path
// (disks.RegistryLogName beside disks.RegistryName).
func logPathOf(path string) string { return path + disks.RegistryLogSuffix }

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
