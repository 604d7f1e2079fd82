package merge

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/shuffled/shuffled/vfs"
)

// maxIovecs is the kernel's IOV_MAX: the most buffers one writev takes.
const maxIovecs = 1024

// WriteBuffers writes bufs in order: one writev per maxIovecs buffers to an
// operating system file, one Write each to any other.
func WriteBuffers(dst vfs.File, bufs [][]byte) error {
	f, ok := dst.(*os.File)
	if !ok {
		for _, b := range bufs {
			if _, err := dst.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	cerr := rc.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			batch := bufs[:min(len(bufs), maxIovecs)]
			n, err := unix.Writev(int(fd), batch)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				werr = os.NewSyscallError("writev", err)
				return true
			}
			if n == 0 {
				werr = io.ErrShortWrite
				return true
			}
			// Drop what was written; a partial write leaves the rest of a
			// buffer at the front.
			for n > 0 {
				if n >= len(bufs[0]) {
					n -= len(bufs[0])
					bufs = bufs[1:]
					continue
				}
				head := bufs[0][n:]
				bufs = append([][]byte{head}, bufs[1:]...)
				n = 0
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return cerr
}
