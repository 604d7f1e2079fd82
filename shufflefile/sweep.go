package shufflefile

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// Sweep removes the temp files (names ending in TempSuffix) in dir and in
// its immediate sub-directories (Spark's hashed layout keeps files one
// level down), and returns how many it removed. Committed files and other
// files stay. It goes on past errors and returns them all.
//
// Run it at startup, before any commit: a temp file of a commit still in
// progress is indistinguishable from one left by a crash, and removing it
// fails that commit (safely: nothing is committed).
func Sweep(fsys vfs.FS, dir string) (removed int, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("shufflefile: sweep %s: %w", dir, err)
	}
	s := sweeper{fsys: fsys}
	s.removeTemps(dir, ents)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		subEnts, err := fsys.ReadDir(sub)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				s.errs = append(s.errs, err)
			}
			continue
		}
		s.removeTemps(sub, subEnts)
	}
	if err := errors.Join(s.errs...); err != nil {
		return s.removed, fmt.Errorf("shufflefile: sweep %s: %w", dir, err)
	}
	return s.removed, nil
}

type sweeper struct {
	fsys    vfs.FS
	removed int
	errs    []error
}

// removeTemps removes the temp files among the entries of dir.
func (s *sweeper) removeTemps(dir string, ents []fs.DirEntry) {
	for _, e := range ents {
		if e.IsDir() || !IsTempName(e.Name()) {
			continue
		}
		err := s.fsys.Remove(filepath.Join(dir, e.Name()))
		switch {
		case err == nil:
			s.removed++
		case !errors.Is(err, fs.ErrNotExist):
			s.errs = append(s.errs, err)
		}
	}
}

// Remove removes the committed map output id: the index first, so that a
// reader never finds an index without its data, then the data file and
// the checksum file of alg. Files already gone are fine. If the index
// cannot be removed, Remove stops there and the output stays committed
// and whole. It holds the output's lock in locks (Locks.Output) meanwhile.
func Remove(fsys vfs.FS, locks *Locks, l Layout, id ID, alg checksum.Algorithm) error {
	if err := id.Validate(); err != nil {
		return err
	}
	indexPath := Path(l, IndexName(id))
	unlock := locks.lock(indexPath)
	defer unlock()
	if err := removeIfExists(fsys, indexPath); err != nil {
		return fmt.Errorf("shufflefile: remove %v: %w", id, err)
	}
	paths := []string{Path(l, DataName(id))}
	if alg != checksum.None {
		paths = append(paths, Path(l, ChecksumName(id, alg)))
	}
	var errs []error
	for _, p := range paths {
		if err := removeIfExists(fsys, p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shufflefile: remove %v: %w", id, err)
	}
	return nil
}

func removeIfExists(fsys vfs.FS, name string) error {
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
