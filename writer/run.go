package writer

import (
	"sync"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/iocrypt"
)

// A run is the sink of one maximal stretch of records with non-decreasing
// partition ids: its bytes are, in order, every partition's segment.
//
// Every run keeps its bytes in memory until the budget refuses more: the
// run then spills, writing what it holds to its run file and streaming
// there from then on. The first run is the exception when it is known to
// be the only one, the map output's last batch having been marked
// (MarkLast) before its first record: it streams to its run file, which
// becomes the data file; and when the marked batch turns out to continue
// the first run, that run spills at the batch's first record (markLast).
// If a second run starts all the same while the first one streams to its
// file, the file keeps the run's first bytes (its prefix) and the rest is
// kept in memory. At Commit, runs in memory are merged into the data file
// without a run file in between, the first run's prefix read back from
// its file; a single run still in memory is written to its file then.
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
	// last: the run is its map output's only one (the last batch, marked,
	// continues it): its next put sends it to its file, which becomes
	// the data file, instead of keeping more in memory.
	last bool
	// seal: the first run of an encrypted map output, which put encrypts
	// (a single run's file becomes the data file as it is; a merge
	// encrypts the later runs).
	seal bool
}

func (w *MapWriter) newRun(first bool) (*run, error) {
	// A first run starts in memory too, unless it is the map output's
	// last batch: then no other run follows, and its file becomes the
	// data file without a copy.
	mem := w.e.memory.total > 0 && (!first || !w.lastMarked)
	ru := &run{w: w, segments: newSegments(w.spec.NumPartitions, w.spec.Checksum), mem: mem,
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

// follow turns a first run that streams to its file to memory once a
// second run starts (the data file will be a merge, not this run's
// file): what it has written stays in its file as its prefix, and its
// next bytes are kept in memory. It runs before the run's stream can end
// (its queue is still open).
func (ru *run) follow() error {
	if ru.w.e.memory.total == 0 {
		return nil
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	ru.last = false // the mark was wrong: another run follows
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
// and the budget allows (see keep) unless it is known to be the last
// run, else to its file, after what it held if it spills now. It returns
// the record quota the chunks took over. ru.mu is held.
func (ru *run) append(b []byte, quota int64) (int64, error) {
	if ru.mem {
		if !ru.last {
			if k, ok := ru.keep(b, quota); ok {
				return k, nil
			}
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
	if err := ru.file.writeChunks(ru.chunks); err != nil {
		return err
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

// markLast says that the run is its map output's only one: from its next
// put on it goes to its file (see append).
func (ru *run) markLast() {
	ru.mu.Lock()
	ru.last = true
	ru.mu.Unlock()
}

// writeOut writes a finished run that was kept in memory to its run file
// and closes it, so that the file holds the whole run (a single run's
// file becomes the data file).
func (ru *run) writeOut() error {
	ru.mu.Lock()
	err := ru.spill()
	ru.mu.Unlock()
	if err != nil {
		return err
	}
	return ru.file.close(false)
}

func (ru *run) remove() {
	if ru.file != nil {
		ru.file.remove()
	}
	ru.mu.Lock()
	ru.releaseMemory()
	ru.mu.Unlock()
}
