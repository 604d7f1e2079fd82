package writer

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// A stream is the ordered tail of the pipeline: it takes a map output's
// records in arrival order and hands each one's bytes to a sink once it and
// every record before it are encoded. There is no goroutine per stream: the
// worker that finishes the record at the head of the queue puts it and
// every finished record after it (one worker at a time per stream, so a
// sink sees one put at a time, in order), and the stream ends when the
// last record is put after the queue is closed. There is one stream per
// run (or one for a Spec.Sink).
type stream struct {
	w    *MapWriter
	sink sink
	// slots bounds the records queued and not yet put: the limiter already
	// bounds their bytes; this bounds their number.
	slots chan struct{}

	mu       handoffMutex
	recs     []*record // queued records; recs[head:] are not yet put
	head     int
	draining bool // a worker is putting records
	closed   bool // no record follows
	ended    bool

	err     error         // first failure; read after done is closed
	endedAt time.Time     // when it ended; read after done is closed
	done    chan struct{} // closed once every record is put and the sink closed
}

// sink receives encoded records of non-decreasing partition ids (a run) or
// in any order (a Spec.Sink).
type sink interface {
	// put takes an encoded record and says how much of the record's quota
	// it keeps (for bytes it holds in memory); the stream releases the
	// rest.
	put(r *record) (kept int64, err error)
	// close flushes and closes files; it runs once, after the last put or
	// after a failure.
	close(failed bool) error
	// remove deletes whatever files the sink made and gives back the
	// memory it holds; it runs after close.
	remove()
}

// streamQueue bounds how many admitted records wait for their stream.
const streamQueue = 1 << 14

func (w *MapWriter) startStream(s sink) *stream {
	return &stream{w: w, sink: s, slots: make(chan struct{}, streamQueue), done: make(chan struct{})}
}

// slot takes a slot for a record, once one is free.
func (s *stream) slot(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// trySlot takes a slot for a record if one is free.
func (s *stream) trySlot() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// queue appends records, each holding a slot, in arrival order.
func (s *stream) queue(rs []*record) {
	s.mu.Lock()
	s.recs = append(s.recs, rs...)
	s.mu.Unlock()
}

// finished is called by the worker that encoded r (or failed to): if r is
// at the head of the queue and no worker puts records, this one puts r and
// the finished records after it.
func (s *stream) finished(r *record, wk *worker) {
	s.mu.Lock()
	r.ready = true
	if s.draining || s.head == len(s.recs) || s.recs[s.head] != r {
		wk.wake(s.mu.unlockWoke())
		return
	}
	s.drain(wk)
}

// close marks the end of the queue: no record follows.
func (s *stream) close() {
	s.mu.Lock()
	s.closed = true
	if s.draining {
		s.mu.Unlock()
		return
	}
	s.drain(nil)
}

// drain puts the finished records at the head of the queue, in order, and
// ends the stream after its last record. s.mu is held on entry and
// released on return. wk is the worker that drains, nil for a call that
// is not on a worker.
func (s *stream) drain(wk *worker) {
	s.draining = true
	for s.head < len(s.recs) && s.recs[s.head].ready {
		r := s.recs[s.head]
		s.recs[s.head] = nil
		s.head++
		wk.wake(s.mu.unlockWoke())
		s.write(r)
		wk.wake(r.woke)
		r.woke = false
		<-s.slots
		s.mu.Lock()
	}
	if s.head == len(s.recs) { // reuse the queue's memory
		s.recs, s.head = s.recs[:0], 0
	}
	s.draining = false
	if !s.closed || s.head < len(s.recs) || s.ended {
		wk.wake(s.mu.unlockWoke())
		return
	}
	s.ended = true
	wk.wake(s.mu.unlockWoke())
	if err := s.sink.close(s.err != nil); err != nil && s.err == nil {
		s.err = err
		s.w.fail(err)
	}
	s.endedAt = time.Now()
	close(s.done)
	wk.wake(true) // a commit or a merge may wait for it
}

// write hands one finished record to the sink (unless the stream already
// failed) and releases what the sink does not keep.
func (s *stream) write(r *record) {
	w := s.w
	var kept int64
	if s.err == nil {
		switch {
		case r.err != nil:
			s.err = r.err
		case w.aborted.Load():
			s.err = ErrAborted
		default:
			kept, s.err = s.sink.put(r)
		}
		if s.err != nil {
			w.fail(s.err)
		}
	}
	if w.e.lim.ReleaseWoke(r.quota - kept) { // a producer waited for quota
		r.woke = true
	}
	if r.out != nil {
		putBuffer(r.out)
		r.out = nil
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

// memoryBudget bounds, across an engine, the bytes that runs keep in
// memory until their map output commits. Those bytes also stay counted by
// the limiter (a record hands its quota over to the run that keeps its
// encoding), so they are bytes in flight; the budget keeps them to a
// quarter of the limit, and to an eighth for one map output, so that
// records always find room and a map output larger than that spills to
// run files. An engine whose limit is under 16 records gets no budget: its
// runs go to files. (A record larger than the limit, admitted only with
// nothing else in flight, can then be one the writer cut itself; with a
// budget only WriteEncoded could bring one, and it refuses them.)
type memoryBudget struct {
	total, perOutput int64
	used             atomic.Int64
}

func newMemoryBudget(limit int64, recordSize int) memoryBudget {
	if limit < 16*int64(recordSize) {
		return memoryBudget{}
	}
	return memoryBudget{total: limit / 4, perOutput: limit / 8}
}

func (b *memoryBudget) reserve(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.total {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *memoryBudget) release(n int64) { b.used.Add(-n) }

// A run is the sink of one maximal stretch of records with non-decreasing
// partition ids: its bytes are, in order, every partition's segment.
//
// The first run of a map output streams to a run file, which becomes the
// data file if no other run follows. When a second run starts, the first
// one stops writing its file: the file keeps the run's first bytes (its
// prefix) and the rest is kept in memory, as later runs keep theirs, until
// the budget refuses more: the run then spills, writing what it holds to
// its run file (a new one for a later run) and streaming there from then
// on. At Commit, runs in memory are merged into the data file without a run
// file in between, the first run's prefix read back from its file.
type run struct {
	w *MapWriter
	// mu guards what a commit that merges the run while it is still
	// written reads: chunks, mem, held, segments, progress, finished; and
	// the file, which put writes holding it.
	mu      handoffMutex
	cond    sync.Cond // on mu: progress or finished changed
	waiters int       // merges waiting on cond
	segments
	file *runFile // nil while a later run is in memory only
	// mem: the run's bytes after its prefix are held in chunks; prefix: how
	// many of its bytes are in its file before those (the first run's, up
	// to when the second started; 0 for a later run).
	mem    bool
	prefix int64
	chunks [][]byte
	held   int64 // bytes held in chunks: limiter quota, budget, map output's share
	// progress: every partition below it is complete. finished: the run's
	// stream has closed it, failed if after a failure.
	progress         int
	finished, failed bool
	// taken: how many bytes the run has taken (a merge preallocates the
	// data file for them).
	taken int64
	// streamed: a commit is merging the run as it fills, holding slices of
	// its chunks; a spill then drops the chunks instead of reusing them.
	streamed bool
	// seal: the first run of an encrypted map output, which put encrypts
	// (a single run's file becomes the data file as it is; a merge
	// encrypts the later runs).
	seal bool
}

func (w *MapWriter) newRun(first bool) (*run, error) {
	ru := &run{w: w, segments: newSegments(w.spec.NumPartitions, w.spec.Checksum), mem: !first && w.e.memory.total > 0,
		seal: first && w.spec.Encryption != nil}
	ru.cond.L = &ru.mu
	if !ru.mem {
		rf, err := newRunFile(w.fs, w.spec.Space, w.dataPath)
		if err != nil {
			return nil, err
		}
		ru.file = rf
	}
	return ru, nil
}

// follow turns the first run to memory once a second run starts (the
// data file will be a merge, not this run's file): what it has written
// stays in its file as its prefix, and its next bytes are kept in memory.
// It runs before the run's stream can end (its queue is still open).
func (ru *run) follow() error {
	if ru.w.e.memory.total == 0 {
		return nil
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if ru.mem || ru.file == nil || ru.finished {
		return nil
	}
	// The merge reads the prefix back through another descriptor.
	if err := ru.file.flush(); err != nil {
		return err
	}
	ru.prefix, ru.mem = ru.file.n, true
	return nil
}

func (ru *run) put(r *record) (int64, error) {
	b := r.out
	ru.mu.Lock()
	defer func() {
		if ru.mu.unlockWoke() { // a merge slept on the lock while put wrote
			r.woke = true
		}
	}()
	n, sum := len(b), r.sum
	if ru.seal {
		iv, s := ru.encrypt(r.partition, b)
		if iv != nil {
			if _, err := ru.append(iv, 0); err != nil {
				return 0, err
			}
		}
		n, sum = len(iv)+len(b), s
	}
	kept, err := ru.append(b, r.quota)
	if err != nil {
		return 0, err
	}
	ru.add(r.partition, n, sum)
	ru.taken += int64(n)
	if r.partition > ru.progress {
		ru.progress = r.partition
		if ru.waiters > 0 {
			ru.cond.Broadcast()
			r.woke = true
		}
	}
	return kept, nil
}

// append adds b to the run's bytes: to its chunks while it is in memory
// and the budget allows (see keep), else to its file, after what it held
// if it spills now. It returns the record quota the chunks took over.
// ru.mu is held.
func (ru *run) append(b []byte, quota int64) (int64, error) {
	if ru.mem {
		if k, ok := ru.keep(b, quota); ok {
			return k, nil
		}
		if err := ru.spill(); err != nil {
			return 0, err
		}
	}
	return 0, ru.file.write(b)
}

// encrypt encrypts b in place, the next bytes of partition p of the
// first run of an encrypted map output: the partition's first bytes get
// a fresh IV, returned to be written ahead of them; later ones continue
// its keystream. sum is the checksum of the IV, if any, and b as they go
// to disk. ru.mu is held.
func (ru *run) encrypt(p int, b []byte) (iv []byte, sum uint32) {
	w := ru.w
	if len(b) == 0 { // no bytes: no IV either, the partition stays empty
		return nil, w.spec.Checksum.Empty()
	}
	ivp := (*[iocrypt.IVSize]byte)(w.ivs[p*iocrypt.IVSize:])
	off := ru.lengths[p] - iocrypt.IVSize
	if ru.lengths[p] == 0 {
		iocrypt.NewIV(ivp)
		iv, off = ivp[:], 0
	}
	w.spec.Encryption.StreamAt(ivp, off).XORKeyStream(b, b)
	if alg := w.spec.Checksum; alg != checksum.None {
		sum = alg.Update(alg.Update(alg.Empty(), iv), b)
	}
	return iv, sum
}

// keep copies b into the run's chunks if the budget allows, taking over up
// to quota bytes of the record's quota and acquiring the rest, if any. It
// returns the record quota it took. ru.mu is held.
func (ru *run) keep(b []byte, quota int64) (int64, bool) {
	w, n := ru.w, int64(len(b))
	if !w.e.memory.reserve(n) {
		return 0, false
	}
	if w.memHeld.Add(n) > w.e.memory.perOutput {
		w.memHeld.Add(-n)
		w.e.memory.release(n)
		return 0, false
	}
	kept := min(n, quota)
	if extra := n - kept; extra > 0 && !w.e.lim.TryAcquire(extra) {
		w.memHeld.Add(-n)
		w.e.memory.release(n)
		return 0, false
	}
	for len(b) > 0 {
		if k := len(ru.chunks); k == 0 || len(ru.chunks[k-1]) == cap(ru.chunks[k-1]) {
			ru.chunks = append(ru.chunks, getChunk(k))
		}
		c := &ru.chunks[len(ru.chunks)-1]
		m := copy((*c)[len(*c):cap(*c)], b)
		*c = (*c)[:len(*c)+m]
		b = b[m:]
	}
	ru.held += n
	return kept, true
}

// fromMemory reports whether the merge takes bytes of the run from memory:
// a run in memory, or the first run holding bytes after its prefix.
func (ru *run) fromMemory() bool {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return ru.mem && (ru.prefix == 0 || ru.held > 0)
}

// spill stops keeping the run in memory: what it holds goes to its run
// file (a new one for a later run, after the prefix for the first), and
// the memory is given back. ru.mu is held.
func (ru *run) spill() error {
	if ru.file == nil {
		w := ru.w
		rf, err := newRunFile(w.fs, w.spec.Space, w.dataPath)
		if err != nil {
			return err
		}
		ru.file = rf
	}
	for _, c := range ru.chunks {
		if err := ru.file.write(c); err != nil {
			return err
		}
	}
	ru.releaseMemory()
	return nil
}

// releaseMemory gives back the chunks and what they hold. ru.mu is held,
// or the run's stream has ended.
func (ru *run) releaseMemory() {
	if ru.held > 0 {
		w := ru.w
		w.e.lim.Release(ru.held)
		w.e.memory.release(ru.held)
		w.memHeld.Add(-ru.held)
		ru.held = 0
	}
	if !ru.streamed {
		for _, c := range ru.chunks {
			putBuffer(c)
		}
	}
	ru.chunks, ru.mem, ru.prefix = nil, false, 0
}

func (ru *run) close(failed bool) error {
	var err error
	if ru.file != nil {
		err = ru.file.close(failed)
	}
	ru.mu.Lock()
	ru.finished, ru.failed = true, failed || err != nil
	if !ru.failed {
		ru.progress = len(ru.lengths)
	}
	ru.cond.Broadcast()
	ru.mu.Unlock()
	return err
}

func (ru *run) remove() {
	if ru.file != nil {
		ru.file.remove()
	}
	ru.mu.Lock()
	ru.releaseMemory()
	ru.mu.Unlock()
}

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

// custom adapts a Spec.Sink.
type custom struct{ s Sink }

func (c custom) put(r *record) (int64, error) { return 0, c.s.Write(r.partition, r.out, r.sum) }
func (c custom) close(failed bool) error      { return c.s.Close(failed) }
func (c custom) remove()                      { c.s.Remove() }
