//go:build unix

package vfs

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openRegular opens name below dirfd (unix.AT_FDCWD: the working
// directory) for reading, with flags added (O_NOFOLLOW, ...), and returns
// it as a file named path. The open does not block: it carries O_NONBLOCK,
// so a FIFO without a writer (which a peer that may write the directory
// can plant under any name) opens at once instead of hanging the caller
// in open(2), and O_NOCTTY, so a terminal never becomes the daemon's. What
// it opened is then checked with fstat: anything but a regular file is
// closed unread and refused (CheckRegular). O_NONBLOCK is cleared before
// the file is returned: it changes nothing for a regular file's reads, but
// the descriptor is handed on as the blocking one that os.Open gives.
func openRegular(dirfd int, name string, flags int, path string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, flags|unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC|oLargefile, 0)
	if errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV) {
		// A socket, or a device without a driver, cannot be opened at
		// all: say what it is.
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			if rerr := CheckRegular(path, unixType(uint32(st.Mode))); rerr != nil {
				return nil, rerr
			}
		}
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := CheckRegular(path, unixType(uint32(st.Mode))); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openDir opens the directory name below dirfd (unix.AT_FDCWD: the
// working directory) for reading, not following name if it is a symbolic
// link, and returns it as a file named path. O_DIRECTORY makes the kernel
// refuse anything else (ENOTDIR) before it opens it, so the open cannot
// block either.
func openDir(dirfd int, name string, path string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) {
		// O_NOFOLLOW with O_DIRECTORY answers ENOTDIR for a symbolic
		// link, even to a directory: refuse it as one.
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && unixType(uint32(st.Mode)) == fs.ModeSymlink {
			err = unix.ELOOP
		}
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, &RefusedError{Path: path, Reason: "is a symbolic link"}
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// unixType converts the file type bits of a stat mode to fs.FileMode's.
func unixType(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

func (osFS) Open(name string) (File, error) {
	f, err := openRegular(unix.AT_FDCWD, name, 0, name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return f, nil
}

func (osFS) OpenDir(name string) (File, error) {
	f, err := openDir(unix.AT_FDCWD, name, name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return f, nil
}
