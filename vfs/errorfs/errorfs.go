// Package errorfs wraps a vfs.FS to inject errors into its operations, so
// that tests can fail every file system operation of a code path in turn
// and check that each failure surfaces and leaves nothing half done.
//
// The FS numbers every operation it performs, from 0, in the order they
// start. An Injector sees each operation before it runs and may fail it.
// A test sweeps the failure point:
//
//	for i := int64(0); ; i++ {
//		fsys := errorfs.New(vfs.Default, errorfs.OnIndex(i))
//		err := run(fsys)
//		if fsys.Injected() == 0 {
//			break // operation i was never reached: the run passed untouched
//		}
//		// err must be non-nil, and nothing may be left half done.
//	}
//
// Counted operations (OpKind): FS Create, Open and OpenDir (OpOpen),
// Remove, Rename, Link, MkdirAll, ReadDir, Stat and Lstat (OpStat),
// SyncDir, Chmod, Chown; File Read and ReadAt (OpRead), Write, Sync, Stat,
// Chmod, Chown, Close; and vfs.CopyRange into a file of this FS
// (OpCopyRange, one operation per call). Seek and Name do no I/O and are
// not counted.
//
// What a failed operation does: it does not happen, except that
//   - Close closes the inner file anyway (no descriptor leaks) and returns
//     the injected error;
//   - a Write or CopyRange failed by an injector made with ShortWrite first
//     writes (copies) half of its bytes, as a disk that fills up mid-write.
//
// Main invariant: an FS with a nil Injector, or one that never fires,
// behaves exactly like the FS it wraps.
package errorfs

import (
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/vfs"
)

// ErrInjected is the error an injector returns when the test names none.
var ErrInjected = errdefs.New(errdefs.ErrInternal, "errorfs: injected error")

// OpKind is the kind of a counted operation.
type OpKind uint8

// The counted operations.
const (
	OpCreate OpKind = iota
	OpOpen
	OpRead // File.Read and File.ReadAt
	OpWrite
	OpSync
	OpClose
	OpStat // FS.Stat and File.Stat
	OpRemove
	OpRename
	OpLink
	OpMkdirAll
	OpReadDir
	OpSyncDir
	OpChmod
	OpCopyRange
	OpChown
)

var opNames = [...]string{
	OpCreate:    "create",
	OpOpen:      "open",
	OpRead:      "read",
	OpWrite:     "write",
	OpSync:      "sync",
	OpClose:     "close",
	OpStat:      "stat",
	OpRemove:    "remove",
	OpRename:    "rename",
	OpLink:      "link",
	OpMkdirAll:  "mkdirall",
	OpReadDir:   "readdir",
	OpSyncDir:   "syncdir",
	OpChmod:     "chmod",
	OpCopyRange: "copyrange",
	OpChown:     "chown",
}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one operation, as an Injector sees it.
type Op struct {
	Kind OpKind
	// Path is the file or directory operated on; for Rename and Link, the
	// old name.
	Path string
	// NewPath is the new name of a Rename or Link, else "".
	NewPath string
	// Index is the operation's number in the FS, counting from 0.
	Index int64
}

func (op Op) String() string {
	if op.NewPath != "" {
		return fmt.Sprintf("op %d %s %s -> %s", op.Index, op.Kind, op.Path, op.NewPath)
	}
	return fmt.Sprintf("op %d %s %s", op.Index, op.Kind, op.Path)
}

// Error is the error of an injected failure.
type Error struct {
	Op Op
	// Short reports a write or copy that wrote half of its bytes first.
	Short bool
	// Err is what the injector returned: ErrInjected or the test's error.
	Err error
}

func (e *Error) Error() string {
	short := ""
	if e.Short {
		short = " (short)"
	}
	return fmt.Sprintf("errorfs: %s%s: %v", e.Op, short, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Injector decides whether an operation fails.
type Injector interface {
	// MaybeError is called before op runs; a non-nil result fails it.
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) error

// MaybeError returns f(op).
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// OnIndex fails operation i (counting from 0) with ErrInjected.
func OnIndex(i int64) Injector {
	return InjectorFunc(func(op Op) error {
		if op.Index == i {
			return ErrInjected
		}
		return nil
	})
}

// OnOp fails every operation of the kind with err, or with ErrInjected
// when err is nil.
func OnOp(kind OpKind, err error) Injector {
	if err == nil {
		err = ErrInjected
	}
	return InjectorFunc(func(op Op) error {
		if op.Kind == kind {
			return err
		}
		return nil
	})
}

// ShortWrite makes the writes and range copies that inj fails write half
// of their bytes before they fail. Other operations fail as inj says.
func ShortWrite(inj Injector) Injector {
	return InjectorFunc(func(op Op) error {
		err := inj.MaybeError(op)
		if err != nil && (op.Kind == OpWrite || op.Kind == OpCopyRange) {
			return shortError{err}
		}
		return err
	})
}

// shortError marks an injected error as a short write.
type shortError struct{ err error }

func (e shortError) Error() string { return e.err.Error() }

// FS is a vfs.FS that counts its operations and fails those its Injector
// picks. It is safe for concurrent use; concurrent operations take
// indexes in the order they start.
type FS struct {
	inner vfs.FS
	inj   Injector
	n     *counters // shared with the FS's confined children
}

type counters struct{ ops, injected atomic.Int64 }

var (
	_ vfs.FS       = (*FS)(nil)
	_ vfs.Confiner = (*FS)(nil)
)

// New wraps inner; inj may be nil (count only).
func New(inner vfs.FS, inj Injector) *FS {
	return &FS{inner: inner, inj: inj, n: &counters{}}
}

// Ops returns the number of operations started so far.
func (f *FS) Ops() int64 { return f.n.ops.Load() }

// Injected returns the number of operations failed so far.
func (f *FS) Injected() int64 { return f.n.injected.Load() }

// Confine confines the inner FS (vfs.Confine) and wraps the result: its
// operations are counted and injected with f's, in one sequence.
func (f *FS) Confine(dirs []string, opts vfs.ConfineOptions) (vfs.Confined, error) {
	c, err := vfs.Confine(f.inner, dirs, opts)
	if err != nil {
		return nil, err
	}
	return confined{FS: &FS{inner: c, inj: f.inj, n: f.n}, c: c}, nil
}

type confined struct {
	*FS
	c vfs.Confined
}

func (c confined) Dirs() []string { return c.c.Dirs() }
func (c confined) Close() error   { return c.c.Close() }

// maybe counts an operation and asks the injector about it; it returns
// the injected failure or nil.
func (f *FS) maybe(kind OpKind, path, newPath string) *Error {
	op := Op{Kind: kind, Path: path, NewPath: newPath, Index: f.n.ops.Add(1) - 1}
	if f.inj == nil {
		return nil
	}
	err := f.inj.MaybeError(op)
	if err == nil {
		return nil
	}
	f.n.injected.Add(1)
	var se shortError
	if errors.As(err, &se) {
		return &Error{Op: op, Short: true, Err: se.err}
	}
	return &Error{Op: op, Err: err}
}

// check is maybe for an operation on one path, as an error.
func (f *FS) check(kind OpKind, path string) error {
	if e := f.maybe(kind, path, ""); e != nil {
		return e
	}
	return nil
}

// Create creates name in the inner FS.
func (f *FS) Create(name string, perm fs.FileMode) (vfs.File, error) {
	if err := f.check(OpCreate, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return &file{fs: f, inner: inner}, nil
}

// Open opens name in the inner FS.
func (f *FS) Open(name string) (vfs.File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &file{fs: f, inner: inner}, nil
}

// OpenDir opens the directory name in the inner FS (counted as OpOpen).
func (f *FS) OpenDir(name string) (vfs.File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &file{fs: f, inner: inner}, nil
}

// Remove removes name in the inner FS.
func (f *FS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// Rename renames in the inner FS.
func (f *FS) Rename(oldname, newname string) error {
	if e := f.maybe(OpRename, oldname, newname); e != nil {
		return e
	}
	return f.inner.Rename(oldname, newname)
}

// Link links in the inner FS.
func (f *FS) Link(oldname, newname string) error {
	if e := f.maybe(OpLink, oldname, newname); e != nil {
		return e
	}
	return f.inner.Link(oldname, newname)
}

// MkdirAll creates dir in the inner FS.
func (f *FS) MkdirAll(dir string, perm fs.FileMode) error {
	if err := f.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir, perm)
}

// ReadDir lists dir in the inner FS.
func (f *FS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := f.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(dir)
}

// Stat describes name in the inner FS.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	if err := f.check(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

// Lstat describes name in the inner FS without following it (counted as
// OpStat).
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	if err := f.check(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Lstat(name)
}

// SyncDir syncs dir in the inner FS.
func (f *FS) SyncDir(dir string) error {
	if err := f.check(OpSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

// Chown sets name's owner and group in the inner FS.
func (f *FS) Chown(name string, uid, gid int) error {
	if err := f.check(OpChown, name); err != nil {
		return err
	}
	return f.inner.Chown(name, uid, gid)
}

// Chmod sets name's mode in the inner FS.
func (f *FS) Chmod(name string, mode fs.FileMode) error {
	if err := f.check(OpChmod, name); err != nil {
		return err
	}
	return f.inner.Chmod(name, mode)
}
