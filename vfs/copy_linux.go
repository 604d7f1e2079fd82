package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// maxCopyChunk bounds one copy_file_range call (the kernel copies at most
// about 2 GiB per call anyway).
const maxCopyChunk = 1 << 30

// copyFileRange copies n bytes of src at srcOff to dst's current offset in
// the kernel. fallback reports that the kernel declined the rest of the
// copy (done bytes are copied); the caller then copies the rest itself.
func copyFileRange(dst, src *os.File, srcOff, n int64) (done int64, fallback bool, err error) {
	sc, err := src.SyscallConn()
	if err != nil {
		return 0, true, nil
	}
	dc, err := dst.SyscallConn()
	if err != nil {
		return 0, true, nil
	}
	var opErr error
	cerr := sc.Control(func(sfd uintptr) {
		derr := dc.Control(func(dfd uintptr) {
			for done < n {
				off := srcOff + done
				chunk := min(n-done, maxCopyChunk)
				m, err := unix.CopyFileRange(int(sfd), &off, int(dfd), nil, int(chunk), 0)
				switch {
				case errors.Is(err, unix.EINTR):
					continue
				case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOSYS),
					errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
					fallback = true
					return
				case err != nil:
					opErr = os.NewSyscallError("copy_file_range", err)
					return
				case m == 0:
					// End of the source, or a file the kernel reports as
					// empty (procfs and the like): the buffered copy tells
					// the two apart.
					fallback = true
					return
				}
				done += int64(m)
			}
		})
		if derr != nil {
			fallback = true // as for src below
		}
	})
	if cerr != nil {
		// src could not be reached (closed): the buffered copy reports it.
		fallback = true
	}
	return done, fallback, opErr
}
