package writer

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"

	"github.com/shuffled/shuffled/merge"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// runFile is a run's file: a partial file in the data file's directory,
// written sequentially through a buffer.
type runFile struct {
	fs    vfs.FS
	space Space // nil: no space accounting
	path  string
	f     vfs.File
	bw    *bufio.Writer
	n     int64       // bytes written
	id    fs.FileInfo // the file created, to know it again (reopen)
}

func newRunFile(fsys vfs.FS, space Space, dataPath string) (*runFile, error) {
	path := shufflefile.TempName(dataPath)
	f, err := fsys.Create(path, 0o600)
	if err != nil {
		return nil, err
	}
	id, err := f.Stat()
	if err != nil {
		f.Close()
		_ = fsys.Remove(path)
		return nil, err
	}
	return &runFile{fs: fsys, space: space, path: path, f: f, bw: bufio.NewWriterSize(f, runBufferSize), id: id}, nil
}

// reopen opens the run file again for reading (a merge), refusing a name
// that no longer is the file the writer made: the directory may be a
// client's, and a name swapped for a link to another file must not bring
// that file's bytes into this output.
func (rf *runFile) reopen() (vfs.File, error) {
	f, err := rf.fs.Open(rf.path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !os.SameFile(fi, rf.id) {
		f.Close()
		return nil, &vfs.RefusedError{Path: rf.path, Reason: "is no longer the run file the writer made (it was replaced)"}
	}
	return f, nil
}

func (rf *runFile) write(b []byte) error {
	if rf.space != nil {
		if err := rf.space.Grow(int64(len(b))); err != nil {
			return err
		}
	}
	if _, err := rf.bw.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", rf.path, err)
	}
	rf.n += int64(len(b))
	return nil
}

// writeChunks writes bs after what the file holds, past its buffer
// (flushed first): the chunks of a run that goes to its file, each large
// enough to skip the copy into the buffer.
func (rf *runFile) writeChunks(bs [][]byte) error {
	var n int64
	for _, b := range bs {
		n += int64(len(b))
	}
	if n == 0 {
		return nil
	}
	if rf.space != nil {
		if err := rf.space.Grow(n); err != nil {
			return err
		}
	}
	if err := rf.flush(); err != nil {
		return err
	}
	if err := merge.WriteBuffers(rf.f, bs); err != nil {
		return fmt.Errorf("write %s: %w", rf.path, err)
	}
	rf.n += n
	return nil
}

// flush writes what the buffer holds to the file.
func (rf *runFile) flush() error {
	if err := rf.bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", rf.path, err)
	}
	return nil
}

func (rf *runFile) close(failed bool) error {
	if rf.f == nil {
		return nil
	}
	var err error
	if !failed {
		err = rf.bw.Flush()
	}
	if cerr := rf.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", rf.path, cerr)
	}
	rf.f, rf.bw = nil, nil
	return err
}

func (rf *runFile) remove() { _ = rf.fs.Remove(rf.path) }
