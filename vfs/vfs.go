// Package vfs is the file system interface through which all shuffle file
// I/O goes, so that tests can substitute a file system that injects errors
// (package errorfs) for the operating system's.
//
// Main invariant: code above this package never calls package os for file
// I/O; it takes an FS, and Default is the only FS that touches the disk
// directly.
package vfs

import (
	"io"
	"io/fs"
	"os"
)

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	io.Seeker
	// Sync commits the file's contents to stable storage (fsync).
	Sync() error
	// Stat describes the open file.
	Stat() (fs.FileInfo, error)
	// Name is the name the file was created or opened with.
	Name() string
	// Chmod sets the file's permission bits exactly, whatever the umask,
	// through its descriptor (fchmod): it changes the file this File is,
	// whatever its name names by now. Setting the mode of a file in a
	// directory that others may write goes through here, never by name.
	Chmod(mode fs.FileMode) error
	// Chown sets the file's owner and group through its descriptor
	// (fchown); -1 leaves one as it is.
	Chown(uid, gid int) error
}

// FS is a file system. Names are file paths in the host's syntax.
type FS interface {
	// Create creates name for reading and writing. It fails if name
	// exists: temp files carry unique names and nothing is ever clobbered
	// by a create.
	Create(name string, perm fs.FileMode) (File, error)
	// Open opens the regular file name for reading only. It never blocks
	// and never reads what it refuses: anything but a regular file (a
	// FIFO, a device, a socket, a directory) is refused with a
	// *RefusedError that names it and says what it is (CheckRegular), so
	// that a FIFO planted under a file's name cannot hang the caller.
	Open(name string) (File, error)
	// OpenDir opens the directory name (itself not a symbolic link; a
	// confined FS also checks its owner) for reading, so that its mode and
	// group can be set through the descriptor (File.Chmod, File.Chown)
	// rather than by a name that may have been swapped. Anything else is
	// refused.
	OpenDir(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames oldname to newname atomically, replacing newname
	// if it exists.
	Rename(oldname, newname string) error
	// Link makes newname a hard link to oldname. It fails if newname
	// exists, so it can place a file without clobbering another.
	Link(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm fs.FileMode) error
	// ReadDir lists dir, sorted by name.
	ReadDir(dir string) ([]fs.DirEntry, error)
	// Stat describes name.
	Stat(name string) (fs.FileInfo, error)
	// Lstat describes name without following it: a symbolic link is
	// described, not its target. With File.Stat it tells whether a name
	// still names a file opened before (os.SameFile).
	Lstat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of dir (creates, renames, removes)
	// durable: it opens dir, syncs it and closes it.
	SyncDir(dir string) error
	// Chmod sets name's permission bits exactly, whatever the umask. It
	// changes whatever name names when it runs: in a directory that
	// others may write, set the mode of a file made there through its
	// descriptor (File.Chmod) instead.
	Chmod(name string, mode fs.FileMode) error
	// Chown sets name's owner and group; -1 leaves one as it is. As for
	// Chmod, File.Chown is the safe form in a directory others may write.
	Chown(name string, uid, gid int) error
}

// RangeCopier is implemented by a File that wants to handle CopyRange
// itself when it is the destination; file system wrappers use it to see
// (and fail) range copies while still letting the kernel copy the bytes.
type RangeCopier interface {
	// CopyFrom copies n bytes of src starting at srcOff to the file at
	// its current offset, with the semantics of CopyRange.
	CopyFrom(src File, srcOff, n int64) (int64, error)
}

// Default is the operating system's file system. Its files are *os.File.
var Default FS = osFS{}

type osFS struct{}

var _ FS = osFS{}

func (osFS) Create(name string, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) Link(oldname, newname string) error          { return os.Link(oldname, newname) }
func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (fs.FileInfo, error)       { return os.Stat(name) }
func (osFS) Lstat(name string) (fs.FileInfo, error)      { return os.Lstat(name) }
func (osFS) Chmod(name string, mode fs.FileMode) error   { return os.Chmod(name, mode) }
func (osFS) Chown(name string, uid, gid int) error       { return os.Chown(name, uid, gid) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
