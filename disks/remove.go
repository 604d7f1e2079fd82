package disks

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// RemoveShuffleIn removes every file of shuffle in the directories of
// layout l, which is a shufflefile.Flat or a shufflefile.SparkHashed (an
// executor's own local dirs, whose hashed sub-directories it scans): the
// map outputs' data, index and checksum files, and the temp files of
// outputs in flight. Each output's files go under the output's lock
// (shufflefile.LockOutput, which its commit takes), index first, so that a
// reader never finds an index without its data and a commit never
// interleaves with the removal; outputs are counted by their index files. Missing directories and files are
// fine, so removing twice is harmless; it goes on past errors and returns
// them all.
//
// Files that a commit creates after the directories are listed stay: stop
// the shuffle's writers first.
func RemoveShuffleIn(fsys vfs.FS, l shufflefile.Layout, shuffle int32) (outputs int, freed int64, err error) {
	if err := (shufflefile.ID{Shuffle: shuffle}).Validate(); err != nil {
		return 0, 0, fmt.Errorf("disks: remove shuffle: %w", err)
	}
	dirs, err := layoutDirs(fsys, l)
	if err != nil {
		return 0, 0, fmt.Errorf("disks: remove shuffle %d: %w", shuffle, err)
	}
	var files []shuffleFile
	var errs []error
	for _, dir := range dirs {
		found, err := shuffleFiles(fsys, dir, func(s int32) bool { return s == shuffle })
		if err != nil {
			errs = append(errs, err)
		}
		files = append(files, found...)
	}
	rm := remover{fsys: fsys}
	rm.removeOutputs(files, l)
	errs = append(errs, rm.errs...)
	if err := errors.Join(errs...); err != nil {
		return rm.outputs, rm.freed, fmt.Errorf("disks: remove shuffle %d: %w", shuffle, err)
	}
	return rm.outputs, rm.freed, nil
}

// layoutDirs lists the directories where l puts files.
func layoutDirs(fsys vfs.FS, l shufflefile.Layout) ([]string, error) {
	if h, ok := l.(*shufflefile.SparkHashed); l == nil || ok && h == nil {
		return nil, fmt.Errorf("%w: no layout", ErrInvalidArgument)
	}
	return shufflefile.ListDirs(fsys, l)
}

// ListShufflesIn returns the shuffles with files in the directories of
// layout l (as RemoveShuffleIn finds them), ascending by id. Bytes count
// every file of the shuffle, committed and temp.
func ListShufflesIn(fsys vfs.FS, l shufflefile.Layout) ([]ShuffleUsage, error) {
	dirs, err := layoutDirs(fsys, l)
	errs := []error{err}
	byID := map[int32]*ShuffleUsage{}
	for _, dir := range dirs {
		files, err := shuffleFiles(fsys, dir, func(int32) bool { return true })
		errs = append(errs, err)
		for _, f := range files {
			u := byID[f.shuffle]
			if u == nil {
				u = &ShuffleUsage{Shuffle: f.shuffle}
				byID[f.shuffle] = u
			}
			u.Bytes += f.size
			if f.index {
				u.Outputs++
			}
		}
	}
	out := make([]ShuffleUsage, 0, len(byID))
	for _, u := range byID {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b ShuffleUsage) int { return cmp.Compare(a.Shuffle, b.Shuffle) })
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("disks: list shuffles: %w", err)
	}
	return out, nil
}

// shuffleFile is one file of a shuffle, as listed.
type shuffleFile struct {
	path    string
	shuffle int32
	size    int64
	index   bool // a committed index file: it marks one map output
	// name is the parsed file name; ok false for a file that is no map
	// output's (removeTree meets those).
	name shufflefile.Name
	ok   bool
}

// shuffleFiles lists the shuffle files in dir (not below it) whose shuffle
// keep accepts. A missing dir holds none.
func shuffleFiles(fsys vfs.FS, dir string, keep func(int32) bool) ([]shuffleFile, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		if notExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []shuffleFile
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		n, ok := shufflefile.ParseName(e.Name())
		if !ok || !keep(n.ID.Shuffle) {
			continue
		}
		f := shuffleFile{
			path:    filepath.Join(dir, e.Name()),
			shuffle: n.ID.Shuffle,
			index:   n.Kind == shufflefile.KindIndex,
			name:    n,
			ok:      true,
		}
		fi, err := e.Info()
		switch {
		case err == nil:
			f.size = fi.Size()
		case notExist(err):
			continue
		default:
			errs = append(errs, err)
		}
		out = append(out, f)
	}
	return out, errors.Join(errs...)
}

// shuffleOf returns the shuffle id of a map output file name (committed
// or temp, shufflefile.ParseName), and false for other names.
func shuffleOf(name string) (int32, bool) {
	n, ok := shufflefile.ParseName(name)
	return n.ID.Shuffle, ok
}

// remover removes files and counts what it freed.
type remover struct {
	fsys    vfs.FS
	outputs int
	freed   int64
	errs    []error
}

// removeOutputs removes files, which lie in the directories of layout l,
// each output's under its lock (shufflefile.LockOutput, which its commit
// takes): first the index files of every output, so that once any data
// file is gone no index of these outputs is left, then the rest. When an
// output's index cannot be removed, or a commit placed a new one between
// the two passes, its data and checksum files stay, so that the output
// stays whole (as shufflefile.Remove leaves it); its listed temp files go.
// Files that belong to no map output go last.
func (rm *remover) removeOutputs(files []shuffleFile, l shufflefile.Layout) {
	byID := map[shufflefile.ID][]shuffleFile{}
	var others []shuffleFile
	for _, f := range files {
		if !f.ok {
			others = append(others, f)
			continue
		}
		byID[f.name.ID] = append(byID[f.name.ID], f)
	}
	ids := make([]shufflefile.ID, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b shufflefile.ID) int {
		return cmp.Or(cmp.Compare(a.Shuffle, b.Shuffle), cmp.Compare(a.Map, b.Map))
	})
	kept := map[shufflefile.ID]bool{}
	for _, id := range ids {
		unlock := shufflefile.LockOutput(l, id)
		for _, f := range byID[id] {
			if f.index && !rm.removeOne(f) {
				kept[id] = true
			}
		}
		unlock()
	}
	for _, id := range ids {
		unlock := shufflefile.LockOutput(l, id)
		if !kept[id] {
			if _, err := rm.fsys.Stat(shufflefile.Path(l, shufflefile.IndexName(id))); !notExist(err) {
				kept[id] = true // committed again since the first pass (or unreadable): it stays
			}
		}
		for _, f := range byID[id] {
			if f.index || kept[id] && f.name.Kind != shufflefile.KindTemp {
				continue
			}
			rm.removeOne(f)
		}
		unlock()
	}
	for _, f := range others {
		rm.removeOne(f)
	}
}

// removeOne removes f and counts it; false when it is still there.
func (rm *remover) removeOne(f shuffleFile) bool {
	err := rm.fsys.Remove(f.path)
	switch {
	case err == nil:
		rm.freed += f.size
		if f.index {
			rm.outputs++
		}
	case notExist(err):
	default:
		rm.errs = append(rm.errs, err)
		return false
	}
	return true
}

// removeTree removes dir and everything below it, the files of each
// directory by output (removeOutputs over the directory as a flat layout),
// without following symbolic links.
func (rm *remover) removeTree(dir string) {
	ents, err := rm.fsys.ReadDir(dir)
	if err != nil {
		if !notExist(err) {
			rm.errs = append(rm.errs, err)
		}
		return
	}
	var files []shuffleFile
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		f := shuffleFile{path: filepath.Join(dir, e.Name())}
		f.name, f.ok = shufflefile.ParseName(e.Name())
		f.index = f.ok && f.name.Kind == shufflefile.KindIndex
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			f.size = fi.Size()
		}
		files = append(files, f)
	}
	rm.removeOutputs(files, shufflefile.Flat(dir))
	for _, e := range ents {
		if e.IsDir() {
			rm.removeTree(filepath.Join(dir, e.Name()))
		}
	}
	if err := rm.fsys.Remove(dir); err != nil && !notExist(err) {
		rm.errs = append(rm.errs, err)
	}
}

// treeUsage sums the sizes of the regular files below dir and finds the
// newest modification time of anything below it.
func treeUsage(fsys vfs.FS, dir string) (bytes int64, newest time.Time, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		if notExist(err) {
			return 0, newest, nil
		}
		return 0, newest, err
	}
	var errs []error
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			if !notExist(err) {
				errs = append(errs, err)
			}
			continue
		}
		if info.ModTime().After(newest) {
			newest = info.ModTime()
		}
		switch {
		case e.IsDir():
			b, n, err := treeUsage(fsys, filepath.Join(dir, e.Name()))
			bytes += b
			if n.After(newest) {
				newest = n
			}
			if err != nil {
				errs = append(errs, err)
			}
		case info.Mode().IsRegular():
			bytes += info.Size()
		}
	}
	return bytes, newest, errors.Join(errs...)
}
