package vfs

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/shuffled/shuffled/errdefs"
)

// ErrShortCopy reports that the source of a CopyRange ended before the
// requested number of bytes.
var ErrShortCopy = errdefs.New(errdefs.ErrDataLoss, "vfs: short copy")

// copyBufSize is the size of the pooled buffers of the user-space copy.
const copyBufSize = 256 << 10

var copyBufPool = sync.Pool{New: func() any {
	b := make([]byte, copyBufSize)
	return &b
}}

// CopyRange copies n bytes of src, starting at srcOff, to dst at dst's
// current offset, and advances dst's offset by the bytes copied. src's
// offset is neither used nor moved, so several copies may read one source
// at once.
//
// When dst implements RangeCopier, CopyRange hands the copy to it. Between
// two OS files on Linux the kernel copies the bytes (copy_file_range), with
// no trip through user memory; elsewhere, for other files, or when the
// kernel declines (different file systems, no support), the bytes go
// through a pooled buffer.
//
// It returns the bytes copied. A source that ends early is an error that
// wraps ErrShortCopy and names both files and offsets.
func CopyRange(dst, src File, srcOff, n int64) (int64, error) {
	if srcOff < 0 || n < 0 {
		return 0, fmt.Errorf("vfs: copy %d bytes from %s at offset %d to %s: negative offset or length",
			n, src.Name(), srcOff, dst.Name())
	}
	if rc, ok := dst.(RangeCopier); ok {
		return rc.CopyFrom(src, srcOff, n)
	}
	if n == 0 {
		return 0, nil
	}
	var done int64
	if d, ok := dst.(*os.File); ok {
		if s, ok := src.(*os.File); ok {
			m, fallback, err := copyFileRange(d, s, srcOff, n)
			done = m
			if err != nil {
				return done, copyError(dst, src, srcOff, n, done, err)
			}
			if !fallback {
				return done, nil
			}
		}
	}
	m, err := copyBuffered(dst, src, srcOff+done, n-done)
	done += m
	if err != nil {
		return done, copyError(dst, src, srcOff, n, done, err)
	}
	return done, nil
}

// copyBuffered copies n bytes of src at off to dst through a pooled buffer.
func copyBuffered(dst io.Writer, src io.ReaderAt, off, n int64) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	var done int64
	for done < n {
		chunk := buf
		if rem := n - done; rem < int64(len(chunk)) {
			chunk = chunk[:rem]
		}
		r, rerr := src.ReadAt(chunk, off+done)
		if r > 0 {
			w, werr := dst.Write(chunk[:r])
			done += int64(w)
			if werr != nil {
				return done, werr
			}
			if w < r {
				return done, io.ErrShortWrite
			}
		}
		switch {
		case rerr == io.EOF && r < len(chunk):
			return done, ErrShortCopy
		case rerr != nil && rerr != io.EOF:
			return done, rerr
		}
	}
	return done, nil
}

// copyError describes a failed copy; dst's offset is where the copy began.
func copyError(dst, src File, srcOff, n, done int64, err error) error {
	dstOff := "?"
	if cur, serr := dst.Seek(0, io.SeekCurrent); serr == nil {
		dstOff = fmt.Sprint(cur - done)
	}
	return fmt.Errorf("vfs: copy %d bytes from %s at offset %d to %s at offset %s: copied %d: %w",
		n, src.Name(), srcOff, dst.Name(), dstOff, done, err)
}
