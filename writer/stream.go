package writer

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// A stream is the ordered tail of the pipeline: one goroutine that takes a
// map output's records in arrival order, waits for each to be encoded, and
// hands the bytes to a sink. In Stream mode there is one stream per run.
type stream struct {
	w    *MapWriter
	q    chan *record
	sink sink
	err  error         // first failure; read after done is closed
	done chan struct{} // closed when the goroutine has returned
}

// sink receives encoded records of non-decreasing partition ids (Stream) or
// any order (Legacy).
type sink interface {
	write(p int, b []byte, sum uint32) error
	// close flushes and closes files; it runs once, after the last write or
	// after a failure.
	close(failed bool) error
	// remove deletes whatever files the sink made; it runs after close.
	remove()
}

// streamQueue bounds how many admitted records wait for their stream. The
// limiter already bounds their bytes; this only bounds the channel.
const streamQueue = 1024

func (w *MapWriter) startStream(s sink) *stream {
	st := &stream{w: w, q: make(chan *record, streamQueue), sink: s, done: make(chan struct{})}
	go st.loop()
	return st
}

func (s *stream) loop() {
	defer close(s.done)
	w := s.w
	for r := range s.q {
		<-r.done
		if s.err == nil {
			switch {
			case r.err != nil:
				s.err = r.err
			case w.aborted.Load():
				s.err = ErrAborted
			default:
				s.err = s.sink.write(r.partition, r.out, r.sum)
			}
			if s.err != nil {
				w.fail(s.err)
			}
		}
		w.e.lim.Release(r.quota)
		if r.out != nil {
			putBuffer(r.out)
			r.out = nil
		}
	}
	if err := s.sink.close(s.err != nil); err != nil && s.err == nil {
		s.err = err
		w.fail(err)
	}
}

// segments counts, per partition, the bytes a sink took and their checksum.
type segments struct {
	alg       checksum.Algorithm
	lengths   []int64
	checksums []uint32
}

func newSegments(n int, alg checksum.Algorithm) segments {
	s := segments{alg: alg, lengths: make([]int64, n)}
	if alg != checksum.None {
		s.checksums = make([]uint32, n)
		if e := alg.Empty(); e != 0 {
			for i := range s.checksums {
				s.checksums[i] = e
			}
		}
	}
	return s
}

func (s *segments) add(p int, n int, sum uint32) {
	s.lengths[p] += int64(n)
	if s.alg != checksum.None {
		s.checksums[p] = s.alg.Combine(s.checksums[p], sum, int64(n))
	}
}

// runFile is the sink of one run: a partial file in the data file's
// directory, written sequentially through a buffer.
type runFile struct {
	fs    vfs.FS
	space Space // nil: no space accounting
	path  string
	f     vfs.File
	bw    *bufio.Writer
	segments
}

func newRunFile(fsys vfs.FS, space Space, dataPath string, numPartitions int, alg checksum.Algorithm) (*runFile, error) {
	path := shufflefile.TempName(dataPath)
	f, err := fsys.Create(path, 0o600)
	if err != nil {
		return nil, err
	}
	return &runFile{
		fs: fsys, space: space, path: path, f: f,
		bw:       bufio.NewWriterSize(f, runBufferSize),
		segments: newSegments(numPartitions, alg),
	}, nil
}

func (rf *runFile) write(p int, b []byte, sum uint32) error {
	if rf.space != nil {
		if err := rf.space.Grow(int64(len(b))); err != nil {
			return err
		}
	}
	if _, err := rf.bw.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", rf.path, err)
	}
	rf.add(p, len(b), sum)
	return nil
}

func (rf *runFile) close(failed bool) error {
	var err error
	if !failed {
		err = rf.bw.Flush()
	}
	if cerr := rf.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", rf.path, cerr)
	}
	rf.bw = nil
	return err
}

func (rf *runFile) remove() { _ = rf.fs.Remove(rf.path) }

// partitionFiles is the Legacy sink: one temp file per partition, opened on
// first use and kept open (O(partitions) files and buffers, the cost the
// Stream design removes).
type partitionFiles struct {
	fs       vfs.FS
	space    Space
	dataPath string
	files    []vfs.File
	bufs     []*bufio.Writer
	paths    []string
	segments
}

// legacyBufferSize is Spark's spark.shuffle.file.buffer default.
const legacyBufferSize = 32 << 10

func newPartitionFiles(fsys vfs.FS, space Space, dataPath string, numPartitions int, alg checksum.Algorithm) *partitionFiles {
	return &partitionFiles{
		fs: fsys, space: space, dataPath: dataPath,
		files:    make([]vfs.File, numPartitions),
		bufs:     make([]*bufio.Writer, numPartitions),
		paths:    make([]string, numPartitions),
		segments: newSegments(numPartitions, alg),
	}
}

func (pf *partitionFiles) write(p int, b []byte, sum uint32) error {
	if pf.space != nil {
		if err := pf.space.Grow(int64(len(b))); err != nil {
			return err
		}
	}
	if pf.files[p] == nil {
		path := shufflefile.TempName(pf.dataPath + ".p" + strconv.Itoa(p))
		f, err := pf.fs.Create(path, 0o600)
		if err != nil {
			return err
		}
		pf.files[p], pf.paths[p] = f, path
		pf.bufs[p] = bufio.NewWriterSize(f, legacyBufferSize)
	}
	if _, err := pf.bufs[p].Write(b); err != nil {
		return fmt.Errorf("write %s: %w", pf.paths[p], err)
	}
	pf.add(p, len(b), sum)
	return nil
}

func (pf *partitionFiles) close(failed bool) error {
	var errs []error
	for p, f := range pf.files {
		if f == nil {
			continue
		}
		if !failed {
			if err := pf.bufs[p].Flush(); err != nil {
				errs = append(errs, fmt.Errorf("write %s: %w", pf.paths[p], err))
			}
		}
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", pf.paths[p], err))
		}
		pf.files[p], pf.bufs[p] = nil, nil
	}
	return errors.Join(errs...)
}

func (pf *partitionFiles) remove() {
	for _, path := range pf.paths {
		if path != "" {
			_ = pf.fs.Remove(path)
		}
	}
}

// discard is the Ceiling sink: it counts bytes and writes nothing.
type discard struct{ segments }

func (d *discard) write(p int, b []byte, sum uint32) error {
	d.add(p, len(b), sum)
	return nil
}
func (d *discard) close(bool) error { return nil }
func (d *discard) remove()          {}
