package disks

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// RemoveShuffleIn removes every file of shuffle in the directories of
// layout l, which is a shufflefile.Flat or a shufflefile.SparkHashed (an
// executor's own local dirs, whose hashed sub-directories it scans): the
// map outputs' data, index and checksum files, and the temp files of
// outputs in flight. It removes every index file of the shuffle first, so
// that a reader never finds an index without its data, and counts the
// outputs removed by their index files. Missing directories and files are
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
	var rm remover
	rm.fsys = fsys
	rm.remove(files, true)
	rm.remove(files, false)
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
		s, ok := shuffleOf(e.Name())
		if !ok || !keep(s) {
			continue
		}
		f := shuffleFile{
			path:    filepath.Join(dir, e.Name()),
			shuffle: s,
			index:   isIndexName(e.Name()),
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

// isIndexName reports a committed index file's name (not a temp one).
func isIndexName(name string) bool {
	n, ok := shufflefile.ParseName(name)
	return ok && n.Kind == shufflefile.KindIndex
}

// remover removes files and counts what it freed.
type remover struct {
	fsys    vfs.FS
	outputs int
	freed   int64
	errs    []error
	// kept holds the outputBase of outputs whose index could not be
	// removed.
	kept map[string]bool
}

// remove removes the index files among files (indexes true) or the others.
// The committed files of an output whose index could not be removed stay,
// so that the output stays whole (as shufflefile.Remove leaves it).
func (rm *remover) remove(files []shuffleFile, indexes bool) {
	for _, f := range files {
		if f.index != indexes {
			continue
		}
		name := filepath.Base(f.path)
		if !indexes && !shufflefile.IsTempName(name) && rm.kept[outputBase(name)] {
			continue
		}
		err := rm.fsys.Remove(f.path)
		switch {
		case err == nil:
			rm.freed += f.size
			if f.index {
				rm.outputs++
			}
		case !notExist(err):
			rm.errs = append(rm.errs, err)
			if f.index {
				if rm.kept == nil {
					rm.kept = map[string]bool{}
				}
				rm.kept[outputBase(name)] = true
			}
		}
	}
}

// outputBase returns the part of a map output file's name before the
// first dot, "shuffle_{s}_{m}_0", which all its files share.
func outputBase(name string) string {
	base, _, _ := strings.Cut(name, ".")
	return base
}

// removeTree removes dir and everything below it, index files of each
// directory first, without following symbolic links.
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
		path := filepath.Join(dir, e.Name())
		if e.IsDir() {
			continue
		}
		f := shuffleFile{path: path, index: isIndexName(e.Name())}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			f.size = fi.Size()
		}
		files = append(files, f)
	}
	// An executor's directory holds whole outputs: what an index failure
	// keeps here says nothing of a same-named output in another directory.
	outer := rm.kept
	rm.kept = nil
	rm.remove(files, true)
	rm.remove(files, false)
	rm.kept = outer
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
