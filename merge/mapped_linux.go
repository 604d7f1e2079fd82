package merge

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/shuffled/shuffled/vfs"
)

// maxIovecs is the kernel's IOV_MAX: the most buffers one writev takes.
const maxIovecs = 1024

// writeBuffers writes bufs in order: one writev per maxIovecs buffers to an
// operating system file, one Write each to any other.
func writeBuffers(dst vfs.File, bufs [][]byte) error {
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

// mergeMapped fills dst, a new and empty operating system file, through a
// shared mapping of its final size, workers goroutines each copying one
// contiguous stretch of the pieces. It reports false, having changed
// nothing, when dst is not such a file or cannot be mapped; the caller then
// writes sequentially.
func mergeMapped(dst vfs.File, runs []Run, numPartitions int, total int64, workers int) (bool, error) {
	f, ok := dst.(*os.File)
	if !ok || int64(int(total)) != total {
		return false, nil
	}
	if off, err := f.Seek(0, io.SeekCurrent); err != nil || off != 0 {
		return false, nil
	}
	if st, err := f.Stat(); err != nil || st.Size() != 0 || !st.Mode().IsRegular() {
		return false, nil
	}
	if err := f.Truncate(total); err != nil {
		return true, fmt.Errorf("merge: size %s to %d bytes: %w", f.Name(), total, err)
	}
	var mem []byte
	var merr error
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) {
			mem, merr = unix.Mmap(int(fd), 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		})
	}
	if err != nil || merr != nil {
		// A file system that cannot map files: write it sequentially.
		if err := f.Truncate(0); err != nil {
			return true, fmt.Errorf("merge: size %s back to 0 bytes: %w", f.Name(), err)
		}
		return false, nil
	}
	pieces := layout(runs, numPartitions)
	starts := make([][]int64, len(runs)) // offset of each chunk in its run
	for r, run := range runs {
		starts[r] = make([]int64, len(run.Data))
		var off int64
		for i, c := range run.Data {
			starts[r][i] = off
			off += int64(len(c))
		}
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	lo := 0
	for w := range workers {
		bound := total * int64(w+1) / int64(workers)
		hi := sort.Search(len(pieces), func(i int) bool { return pieces[i].dst >= bound })
		if w == workers-1 {
			hi = len(pieces)
		}
		if hi > lo {
			wg.Add(1)
			go func(w int, ps []piece) {
				defer wg.Done()
				errs[w] = fill(mem, runs, starts, ps)
			}(w, pieces[lo:hi])
		}
		lo = hi
	}
	wg.Wait()
	uerr := unix.Munmap(mem)
	if err := errors.Join(errs...); err != nil {
		return true, fmt.Errorf("merge: write %s through its mapping: %w", f.Name(), err)
	}
	if uerr != nil {
		return true, fmt.Errorf("merge: unmap %s: %w", f.Name(), uerr)
	}
	if _, err := f.Seek(total, io.SeekStart); err != nil {
		return true, fmt.Errorf("merge: seek %s: %w", f.Name(), err)
	}
	return true, nil
}

// fill copies pieces into the mapping mem. A page the file system cannot
// back (a full disk, an I/O error) faults; the fault becomes an error here
// instead of crashing the process.
func fill(mem []byte, runs []Run, starts [][]int64, pieces []piece) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fault while writing the data file (disk full or I/O error): %v", r)
		}
	}()
	// Populating the stretch writable in one call costs less than a fault
	// per page; where the kernel lacks it (before 5.14), the copy faults
	// the pages in.
	page := int64(os.Getpagesize())
	lo := pieces[0].dst &^ (page - 1)
	last := pieces[len(pieces)-1]
	hi := min(int64(len(mem)), (last.dst+last.n+page-1)&^(page-1))
	_ = unix.Madvise(mem[lo:hi], unix.MADV_POPULATE_WRITE)
	for _, p := range pieces {
		chunks, st := runs[p.run].Data, starts[p.run]
		i := sort.Search(len(st), func(i int) bool { return st[i] > p.src }) - 1
		dst, src, n := p.dst, p.src-st[i], p.n
		for n > 0 {
			c := chunks[i][src:]
			if int64(len(c)) > n {
				c = c[:n]
			}
			copy(mem[dst:], c)
			dst += int64(len(c))
			n -= int64(len(c))
			i, src = i+1, 0
		}
	}
	return nil
}
