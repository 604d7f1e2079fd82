//go:build unix

package disks

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// statfs reports the bytes available to unprivileged users (Bavail, which
// leaves out the blocks reserved for root) and the file system's size.
func statfs(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	for {
		err = unix.Statfs(dir, &st)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return 0, 0, &fs.PathError{Op: "statfs", Path: dir, Err: err}
	}
	bsize := uint64(st.Bsize)
	return uint64(st.Bavail) * bsize, uint64(st.Blocks) * bsize, nil
}

// deviceOf returns the device of the file system that holds fi.
func deviceOf(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true
}
