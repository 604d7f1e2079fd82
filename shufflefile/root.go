package shufflefile

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// Root is an executor's output directories opened once: a Layout (flat or
// Spark-hashed, over resolved paths) whose every file operation runs
// relative to the directories' descriptors, never following a symbolic
// link and never leaving them (vfs.Confine). A sub-directory that is a
// symbolic link, or belongs to a uid other than the owners given to
// OpenRoot, is refused with an error that names it and matches
// fs.ErrPermission.
//
// Make every file of a Root's outputs through FS: the writer, Commit,
// Sweep, Remove and List all take it.
type Root struct {
	layout Layout
	fs     vfs.Confined
}

// OpenRoot opens the directories of l (Flat or SparkHashed, resolved
// absolute paths: OpenRoot refuses a path with a symbolic link in it)
// through fsys. owners are the uids a sub-directory may belong to.
func OpenRoot(fsys vfs.FS, l Layout, owners []uint32) (*Root, error) {
	if r, ok := l.(*Root); ok {
		l = r.layout
	}
	if h, ok := l.(SparkHashed); ok {
		if err := h.Validate(); err != nil {
			return nil, err
		}
	}
	dirs, _ := l.Dirs()
	c, err := vfs.Confine(fsys, dirs, vfs.ConfineOptions{Owners: owners})
	if err != nil {
		return nil, fmt.Errorf("shufflefile: open root: %w", err)
	}
	return &Root{layout: l, fs: c}, nil
}

// Dir returns the directory of fileName, as the Root's layout places it.
func (r *Root) Dir(fileName string) string { return r.layout.Dir(fileName) }

// Dirs returns the layout's top directories and whether it is hashed.
func (r *Root) Dirs() ([]string, bool) { return r.layout.Dirs() }

// Layout returns the layout the Root opened.
func (r *Root) Layout() Layout { return r.layout }

// FS returns the confined file system of the Root's directories.
func (r *Root) FS() vfs.FS { return r.fs }

// Close releases the directories' descriptors.
func (r *Root) Close() error { return r.fs.Close() }

// FSLayout is a Layout whose files must be made through its own FS
// (a *Root).
type FSLayout interface {
	Layout
	FS() vfs.FS
}

// FSOf returns the FS that files of l must go through: l's own when it is
// an FSLayout, else fallback.
func FSOf(l Layout, fallback vfs.FS) vfs.FS {
	if fl, ok := l.(FSLayout); ok && fl != nil {
		return fl.FS()
	}
	return fallback
}

// DefaultFileMode is the mode of committed shuffle files unless configured:
// readable by everyone, as Spark makes them when the external shuffle
// service serves them (SPARK-37618: DiskBlockManager.createWorldReadableFile),
// so that the shuffle service reads them whatever its groups.
const DefaultFileMode fs.FileMode = 0o644

// DirMode is the mode of a directory this package (or the writer) makes
// for files of mode fileMode: x wherever fileMode has r, and group-writable,
// as Spark makes its local sub-directories when the shuffle service may
// remove shuffles (SPARK-37618): the executor makes its own files there, the
// daemon its shuffle files, and the shuffle service deletes them. 0644 gives
// 0775, 0640 gives 0770. EnsureDir adds the parent's setgid bit.
func DirMode(fileMode fs.FileMode) fs.FileMode {
	m := fileMode.Perm()
	return m | (m&0o444)>>2 | 0o020
}

// EnsureDir makes dir (and missing parents) when it does not exist. With
// fileMode set, the new directory takes its parent's group (so that the
// executor and the shuffle service, who share the group of Spark's local
// dirs, may write and delete in it) and gets exactly DirMode(fileMode),
// plus setgid when its parent has it; with fileMode 0 it is 0775 less the
// umask.
func EnsureDir(fsys vfs.FS, dir string, fileMode fs.FileMode) error {
	_, err := fsys.Stat(dir)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	mode := DirMode(fileMode)
	if fileMode == 0 {
		mode = DirMode(0o644)
	}
	if err := fsys.MkdirAll(dir, mode); err != nil {
		return err
	}
	if fileMode == 0 {
		return nil
	}
	pfi, err := fsys.Stat(filepath.Dir(dir))
	if err != nil {
		return err
	}
	if pfi.Mode()&fs.ModeSetgid != 0 {
		mode |= fs.ModeSetgid
	}
	// The group and mode go through a descriptor of the directory, not by
	// name: a peer who may write the parent could have swapped the name
	// for a hard link to another file since the mkdir.
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = setDirMode(fsys, d, dir, mode)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// setDirMode gives the open directory d, at path, its parent's group and
// exactly mode.
func setDirMode(fsys vfs.FS, d vfs.File, path string, mode fs.FileMode) error {
	// The group first: chown may clear setgid.
	if err := takeDirGroup(fsys, d, path); err != nil {
		return err
	}
	fi, err := d.Stat()
	if err != nil {
		return err
	}
	if fi.Mode()&(fs.ModePerm|fs.ModeSetgid) == mode {
		// mkdir under a umask that keeps the mode made it right, setgid
		// inherited: no chmod, which a sandbox that forbids setting
		// setgid (systemd's RestrictSUIDSGID=) would refuse.
		return nil
	}
	return d.Chmod(mode)
}

// FileKind is the kind of a map output file.
type FileKind uint8

// The files of a map output.
const (
	KindData FileKind = iota + 1
	KindIndex
	KindChecksum
	KindTemp // a temp file of any of the others
)

// Name is a parsed map output file name.
type Name struct {
	ID   ID
	Kind FileKind
	// Algorithm is the checksum file's algorithm (KindChecksum).
	Algorithm checksum.Algorithm
}

// ParseName parses a file name this package gives: DataName, IndexName,
// ChecksumName of a known algorithm, or a TempName of one of them. Only
// canonical names parse (decimal ids without leading zeros or signs, in
// range); anything else is not a map output file.
func ParseName(name string) (Name, bool) {
	if base, ok := strings.CutSuffix(name, TempSuffix); ok {
		// final + "." + 16 hex digits
		i := strings.LastIndexByte(base, '.')
		if i < 0 || len(base)-i-1 != 16 || strings.Trim(base[i+1:], "0123456789abcdef") != "" {
			return Name{}, false
		}
		n, ok := ParseName(base[:i])
		if !ok {
			// the writer's partition files: final + ".p" + partition
			j := strings.LastIndex(base[:i], ".p")
			if j < 0 || !canonicalUint(base[j+2:i], 31) {
				return Name{}, false
			}
			if n, ok = ParseName(base[:j]); !ok || n.Kind != KindData {
				return Name{}, false
			}
		}
		n.Kind = KindTemp
		return n, true
	}
	rest, ok := strings.CutPrefix(name, "shuffle_")
	if !ok {
		return Name{}, false
	}
	s, rest, ok := strings.Cut(rest, "_")
	if !ok || !canonicalUint(s, 31) {
		return Name{}, false
	}
	m, rest, ok := strings.Cut(rest, "_")
	if !ok || !canonicalUint(m, 63) {
		return Name{}, false
	}
	shuffle, _ := strconv.ParseInt(s, 10, 32)
	mapID, _ := strconv.ParseInt(m, 10, 64)
	n := Name{ID: ID{Shuffle: int32(shuffle), Map: mapID}}
	switch rest {
	case "0.data":
		n.Kind = KindData
	case "0.index":
		n.Kind = KindIndex
	default:
		alg, ok := strings.CutPrefix(rest, "0.checksum.")
		if !ok {
			return Name{}, false
		}
		a, err := checksum.Parse(alg)
		if err != nil || a == checksum.None || a.String() != alg {
			return Name{}, false
		}
		n.Kind, n.Algorithm = KindChecksum, a
	}
	return n, true
}

// canonicalUint reports a decimal number without sign or leading zero that
// fits in bits bits.
func canonicalUint(s string, bits int) bool {
	if s == "" || strings.Trim(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return err == nil && v < 1<<bits
}

// ListDirs returns the directories where l's files may be: its top
// directories and, when hashed, their sub-directories that exist. Entries
// are read through fsys without following symbolic links; a missing top
// directory holds none.
func ListDirs(fsys vfs.FS, l Layout) ([]string, error) {
	if h, ok := l.(SparkHashed); ok {
		if err := h.Validate(); err != nil {
			return nil, err
		}
	}
	tops, hashed := l.Dirs()
	if len(tops) == 0 {
		return nil, fmt.Errorf("%w: layout %T has no directories", ErrInvalidLayout, l)
	}
	if !hashed {
		return tops, nil
	}
	var dirs []string
	var errs []error
	for _, top := range tops {
		ents, err := fsys.ReadDir(top)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		dirs = append(dirs, top)
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(top, e.Name()))
			}
		}
	}
	return dirs, errors.Join(errs...)
}
