package errorfs

import (
	"io/fs"

	"github.com/shuffled/shuffled/vfs"
)

// file is a vfs.File of an FS.
type file struct {
	fs    *FS
	inner vfs.File
}

var (
	_ vfs.File         = (*file)(nil)
	_ vfs.RangeCopier  = (*file)(nil)
	_ vfs.Preallocator = (*file)(nil)
)

func (f *file) Name() string { return f.inner.Name() }

func (f *file) Read(p []byte) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.inner.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	e := f.fs.maybe(OpWrite, f.Name(), "")
	if e == nil {
		return f.inner.Write(p)
	}
	if !e.Short {
		return 0, e
	}
	n, err := f.inner.Write(p[:len(p)/2])
	if err != nil {
		return n, err
	}
	return n, e
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	return f.inner.Seek(offset, whence)
}

func (f *file) Sync() error {
	if err := f.fs.check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f *file) Stat() (fs.FileInfo, error) {
	if err := f.fs.check(OpStat, f.Name()); err != nil {
		return nil, err
	}
	return f.inner.Stat()
}

// Chmod sets the inner file's mode through its descriptor (OpChmod).
func (f *file) Chmod(mode fs.FileMode) error {
	if err := f.fs.check(OpChmod, f.Name()); err != nil {
		return err
	}
	return f.inner.Chmod(mode)
}

// Chown sets the inner file's owner and group through its descriptor
// (OpChown).
func (f *file) Chown(uid, gid int) error {
	if err := f.fs.check(OpChown, f.Name()); err != nil {
		return err
	}
	return f.inner.Chown(uid, gid)
}

// Close closes the inner file whether or not the close is failed.
func (f *file) Close() error {
	err := f.fs.check(OpClose, f.Name())
	cerr := f.inner.Close()
	if err != nil {
		return err
	}
	return cerr
}

// Preallocate passes through to the inner file: it is advisory and
// reports nothing, so there is no failure to inject.
func (f *file) Preallocate(off, n int64) { vfs.Preallocate(f.inner, off, n) }

// CopyFrom is vfs.CopyRange into f: one counted operation, then the copy
// between the inner files, so OS files still copy in the kernel.
func (f *file) CopyFrom(src vfs.File, srcOff, n int64) (int64, error) {
	e := f.fs.maybe(OpCopyRange, f.Name(), "")
	if s, ok := src.(*file); ok {
		src = s.inner
	}
	if e == nil {
		return vfs.CopyRange(f.inner, src, srcOff, n)
	}
	if !e.Short {
		return 0, e
	}
	m, err := vfs.CopyRange(f.inner, src, srcOff, n/2)
	if err != nil {
		return m, err
	}
	return m, e
}
