package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// preallocate is fallocate(2) with FALLOC_FL_KEEP_SIZE; its errors (file
// systems without it, no space) are the caller's to ignore.
func preallocate(f *os.File, off, n int64) {
	c, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = c.Control(func(fd uintptr) {
		for {
			err := unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, off, n)
			if err != unix.EINTR {
				return
			}
		}
	})
}
