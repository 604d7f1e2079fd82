package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/shuffled/shuffled/errdefs"
)

// ErrRefused marks an operation that a confined FS refused because a
// directory on its path is a symbolic link, lies outside the confining
// directories, or belongs to a uid that is not allowed, or that any FS
// refused because what a name names is not the kind of file the operation
// takes (Open of a FIFO, CheckRegular). It matches fs.ErrPermission.
var ErrRefused = errdefs.New(errdefs.ErrPermissionDenied, "refused")

// RefusedError says which directory was refused and why.
type RefusedError struct {
	// Path is the directory (or file) refused.
	Path string
	// Reason says why: "is a symbolic link", "belongs to uid 1001", "is a
	// FIFO, not a regular file", ...
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s %s: refused", e.Path, e.Reason)
}

// Is makes a RefusedError match ErrRefused, its class
// errdefs.ErrPermissionDenied, and fs.ErrPermission.
func (e *RefusedError) Is(target error) bool {
	return target == ErrRefused || target == errdefs.ErrPermissionDenied || target == fs.ErrPermission
}

// CheckRegular returns nil when typ (the type bits of an fs.FileMode,
// FileMode.Type()) is that of a regular file, else a *RefusedError that
// names path and says what it is instead ("/d/shuffle_0_5_0.index is a
// FIFO, not a regular file: refused"). Shuffle files are regular files: a
// FIFO, a device or a socket under one of their names was put there by
// someone else, and reading it could block forever.
func CheckRegular(path string, typ fs.FileMode) error {
	if typ.Type() == 0 {
		return nil
	}
	return &RefusedError{Path: path, Reason: "is " + typeName(typ) + ", not a regular file"}
}

// typeName says what kind of file a FileMode's type bits describe.
func typeName(typ fs.FileMode) string {
	switch t := typ.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "a file of unknown type"
	}
}

// pathErr wraps err, a failure of op on name, in an *fs.PathError (nil
// stays nil).
func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var re *RefusedError
	if errors.As(err, &re) {
		return &fs.PathError{Op: op, Path: name, Err: re}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Confined is an FS whose every operation happens relative to directories
// opened once, without following a symbolic link anywhere below them and
// without leaving them. Close releases the directories.
type Confined interface {
	FS
	// Dirs are the confining directories, as given.
	Dirs() []string
	// Close releases the directory descriptors; the FS is unusable after.
	Close() error
}

// WritableChecker is implemented by a file system that can tell whether
// the caller may create files in a directory without creating one (the
// confined FS of the operating system: faccessat).
type WritableChecker interface {
	CheckWritable(dir string) error
}

// ConfineOptions say what a confined FS accepts below its directories.
type ConfineOptions struct {
	// Owners are the uids a sub-directory may belong to; empty accepts any.
	// The confining directories themselves are not checked: their owner
	// is the caller's concern.
	Owners []uint32
}

// Confiner is implemented by an FS that can confine itself (errorfs wraps
// the confined FS of the FS it wraps, so injection still applies).
type Confiner interface {
	Confine(dirs []string, opts ConfineOptions) (Confined, error)
}

// Confine returns fsys confined to dirs: absolute, clean paths of existing
// directories, none of whose components may be a symbolic link. Names
// given to the confined FS must lie under one of dirs (lexically); any
// other name is refused. fsys must be Default or implement Confiner.
func Confine(fsys FS, dirs []string, opts ConfineOptions) (Confined, error) {
	for _, d := range dirs {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d {
			return nil, fmt.Errorf("vfs: confine: %q is not an absolute clean path", d)
		}
	}
	switch f := fsys.(type) {
	case osFS:
		return confineOS(dirs, opts)
	case Confiner:
		return f.Confine(dirs, opts)
	}
	return nil, fmt.Errorf("vfs: confine: file system %T cannot confine its operations", fsys)
}

// splitUnder returns the index of the dir of dirs that holds name and the
// path of name relative to it ("." for the dir itself).
func splitUnder(dirs []string, name string) (int, string, error) {
	clean := filepath.Clean(name)
	for i, d := range dirs {
		if clean == d {
			return i, ".", nil
		}
		if rest, ok := strings.CutPrefix(clean, d+"/"); ok {
			return i, rest, nil
		}
	}
	return 0, "", &fs.PathError{Op: "confine", Path: name, Err: &RefusedError{Path: name, Reason: "is not under a confining directory"}}
}
