package shufflefile

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/shuffled/shuffled/vfs"
)

// ShuffleUsage is what one shuffle holds in some directories.
type ShuffleUsage struct {
	Shuffle int32
	// Outputs counts the committed map outputs (index files).
	Outputs int
	// Bytes sums the sizes of the shuffle's files, temp files included.
	Bytes int64
}

// RemoveShuffle removes every file of shuffle in the directories of layout
// l (and, for a hashed layout, their sub-directories): the map outputs'
// data, index and checksum files, and the temp files of outputs in flight.
// Each output's files go under the output's lock in locks (Locks.Output,
// which its commit takes); the index files go first, so that a reader never finds
// an index without its data; outputs are counted by their index files.
// Missing directories and files are fine, so removing twice is harmless;
// it goes on past errors and returns them all. List and remove through the
// FS the files were made with (a Root's own).
//
// Files that a commit creates after the directories are listed stay: stop
// the shuffle's writers first.
func RemoveShuffle(fsys vfs.FS, locks *Locks, l Layout, shuffle int32) (outputs int, freed int64, err error) {
	if err := (ID{Shuffle: shuffle}).Validate(); err != nil {
		return 0, 0, fmt.Errorf("shufflefile: remove shuffle: %w", err)
	}
	dirs, err := layoutDirs(fsys, l)
	if err != nil {
		return 0, 0, fmt.Errorf("shufflefile: remove shuffle %d: %w", shuffle, err)
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
	rm := remover{fsys: fsys, locks: locks}
	rm.removeOutputs(files, l)
	errs = append(errs, rm.errs...)
	if err := errors.Join(errs...); err != nil {
		return rm.outputs, rm.freed, fmt.Errorf("shufflefile: remove shuffle %d: %w", shuffle, err)
	}
	return rm.outputs, rm.freed, nil
}

// layoutDirs lists the directories where l puts files.
func layoutDirs(fsys vfs.FS, l Layout) ([]string, error) {
	if h, ok := l.(*SparkHashed); l == nil || ok && h == nil {
		return nil, fmt.Errorf("%w: no layout", ErrInvalidLayout)
	}
	return ListDirs(fsys, l)
}

// ListShuffles returns the shuffles with files in the directories of
// layout l (those RemoveShuffle removes), ascending by id. Bytes count
// every file of the shuffle, committed and temp.
func ListShuffles(fsys vfs.FS, l Layout) ([]ShuffleUsage, error) {
	var c Census
	err := c.Add(fsys, l)
	return c.Shuffles(), err
}

// A Census counts the shuffles of several layouts, each file once: layouts
// that share directories (the same local dirs registered again in another
// order or with another sub-dir count) count what they share once, as
// RemoveShuffle over each of them removes it once. Files are told apart by
// path, so give every layout's directories as the same (resolved) paths.
// The zero Census is empty.
type Census struct {
	seen map[string]struct{}
	byID map[int32]*ShuffleUsage
}

// Add counts the shuffle files of l's directories that no earlier Add
// counted.
func (c *Census) Add(fsys vfs.FS, l Layout) error {
	if c.byID == nil {
		c.seen, c.byID = map[string]struct{}{}, map[int32]*ShuffleUsage{}
	}
	dirs, err := layoutDirs(fsys, l)
	errs := []error{err}
	for _, dir := range dirs {
		files, err := shuffleFiles(fsys, dir, func(int32) bool { return true })
		errs = append(errs, err)
		for _, f := range files {
			if _, ok := c.seen[f.path]; ok {
				continue
			}
			c.seen[f.path] = struct{}{}
			u := c.byID[f.shuffle]
			if u == nil {
				u = &ShuffleUsage{Shuffle: f.shuffle}
				c.byID[f.shuffle] = u
			}
			u.Bytes += f.size
			if f.index {
				u.Outputs++
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shufflefile: list shuffles: %w", err)
	}
	return nil
}

// Shuffles returns what the census counted, ascending by shuffle id.
func (c *Census) Shuffles() []ShuffleUsage {
	out := make([]ShuffleUsage, 0, len(c.byID))
	for _, u := range c.byID {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b ShuffleUsage) int { return cmp.Compare(a.Shuffle, b.Shuffle) })
	return out
}

// RemoveAll removes dir and everything below it without following
// symbolic links, the files of each directory by map output (as
// RemoveShuffle does, over the directory as a Flat layout, under the
// outputs' locks in locks), and returns
// the map outputs removed (index files) and the bytes freed. It goes on
// past errors and returns them all.
func RemoveAll(fsys vfs.FS, locks *Locks, dir string) (outputs int, freed int64, err error) {
	rm := remover{fsys: fsys, locks: locks}
	rm.removeTree(dir)
	return rm.outputs, rm.freed, errors.Join(rm.errs...)
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// shuffleFile is one file of a shuffle, as listed.
type shuffleFile struct {
	path    string
	shuffle int32
	size    int64
	index   bool // a committed index file: it marks one map output
	// name is the parsed file name; ok false for a file that is no map
	// output's (removeTree meets those).
	name Name
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
		n, ok := ParseName(e.Name())
		if !ok || !keep(n.ID.Shuffle) {
			continue
		}
		f := shuffleFile{
			path:    filepath.Join(dir, e.Name()),
			shuffle: n.ID.Shuffle,
			index:   n.Kind == KindIndex,
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

// remover removes files and counts what it freed.
type remover struct {
	fsys    vfs.FS
	locks   *Locks // the outputs' locks
	outputs int
	freed   int64
	errs    []error
}

// removeOutputs removes files, which lie in the directories of layout l,
// each output's under its lock in rm.locks (Locks.Output, which its
// commit takes): first the index files of every output, so that once any data
// file is gone no index of these outputs is left, then the rest. When an
// output's index cannot be removed, or a commit placed a new one between
// the two passes, its data and checksum files stay, so that the output
// stays whole (as shufflefile.Remove leaves it); its listed temp files go.
// Files that belong to no map output go last.
func (rm *remover) removeOutputs(files []shuffleFile, l Layout) {
	byID := map[ID][]shuffleFile{}
	var others []shuffleFile
	for _, f := range files {
		if !f.ok {
			others = append(others, f)
			continue
		}
		byID[f.name.ID] = append(byID[f.name.ID], f)
	}
	ids := make([]ID, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b ID) int {
		return cmp.Or(cmp.Compare(a.Shuffle, b.Shuffle), cmp.Compare(a.Map, b.Map))
	})
	kept := map[ID]bool{}
	for _, id := range ids {
		unlock := rm.locks.Output(l, id)
		for _, f := range byID[id] {
			if f.index && !rm.removeOne(f) {
				kept[id] = true
			}
		}
		unlock()
	}
	for _, id := range ids {
		unlock := rm.locks.Output(l, id)
		if !kept[id] {
			if _, err := rm.fsys.Stat(Path(l, IndexName(id))); !notExist(err) {
				kept[id] = true // committed again since the first pass (or unreadable): it stays
			}
		}
		for _, f := range byID[id] {
			if f.index || kept[id] && f.name.Kind != KindTemp {
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
		f.name, f.ok = ParseName(e.Name())
		f.index = f.ok && f.name.Kind == KindIndex
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			f.size = fi.Size()
		}
		files = append(files, f)
	}
	rm.removeOutputs(files, Flat(dir))
	for _, e := range ents {
		if e.IsDir() {
			rm.removeTree(filepath.Join(dir, e.Name()))
		}
	}
	if err := rm.fsys.Remove(dir); err != nil && !notExist(err) {
		rm.errs = append(rm.errs, err)
	}
}
