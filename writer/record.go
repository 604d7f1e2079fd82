package writer

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/shuffled/shuffled/partition"
)

// A record is one unit of encoding work: one partition's slice of one batch,
// at most the engine's record size. It holds limiter quota from admission
// until its stream has written (or dropped) its encoded bytes.
type record struct {
	w         *MapWriter
	partition int
	run       int   // index of its run in the map output
	seq       int64 // arrival order in the map output
	quota     int64

	// Exactly one of data and cols is set: opaque bytes are compressed as
	// they are; rows [rowStart, rowEnd) of cols are serialized into the
	// encoder as one block or kudo table (the map output's Format).
	data             []byte
	cols             *partition.Batch
	rowStart, rowEnd int
	batch            *batchRef // released once the payload is no longer referenced
	// encoded: data is already the map output's codec stream of raw
	// uncompressed bytes (WriteEncoded); it is only checksummed and
	// written. Unless the map output is encrypted (which encrypts out in
	// place), out borrows data rather than copying it: borrowed, and the
	// record keeps its batch until the stream has written it.
	encoded  bool
	borrowed bool
	raw      int64
	// summed: sum is already out's checksum, made with the encoded
	// stream (EncodedRecord.Sum); encode does not compute it.
	summed bool

	// stream is the stream the record is queued on (nil until it is); the
	// results are published to it by finish, and ready (guarded by its
	// mutex) says the record may be put.
	stream *stream
	ready  bool
	out    []byte
	sum    uint32
	err    error
	// woke: putting the record readied a goroutine (a merge waiting for
	// its run); the worker that put it yields after its record.
	woke bool
}

// encode runs on a worker: serialize + compress into one codec stream and
// checksum the encoded bytes, with an encoder from the worker's own.
func (r *record) encode(wk *worker) {
	encs := &wk.encs
	w := r.w
	if w.aborted.Load() {
		r.err = ErrAborted
	} else {
		switch {
		case r.encoded && w.spec.Encryption == nil:
			r.out, r.borrowed = r.data, true
		case r.encoded:
			r.out = append(getBuffer(int(r.quota)), r.data...)
		default:
			buf := getBuffer(int(r.quota))
			enc := encs.Get(w.enc)
			if r.cols != nil {
				enc.Reset(buf)
				_, r.err = w.spec.Format.Write(enc, r.cols, r.rowStart, r.rowEnd)
				r.out = enc.Finish()
			} else {
				r.out = enc.Encode(buf, r.data)
			}
			encs.Put(w.enc, enc)
		}
		// Encrypted bytes are summed where they are encrypted (run.put,
		// the merge), once their place in the partition is known.
		if r.err == nil && w.spec.Checksum != 0 && w.spec.Encryption == nil && !r.summed {
			alg := w.spec.Checksum
			r.sum = alg.Update(alg.Empty(), r.out)
		}
	}
	r.finish(wk)
}

// finish drops the payload and publishes the result to the record's
// stream, if it is queued on one. wk is the worker that finishes it, nil
// for a record that failed before it was queued. A record whose out
// borrows its payload keeps its batch until done.
func (r *record) finish(wk *worker) {
	r.data, r.cols = nil, nil
	if r.batch != nil && !r.borrowed {
		if r.batch.read != nil {
			r.batch.read(r.quota)
		}
		if r.batch.release() && wk != nil {
			wk.woke = true
		}
		r.batch = nil
	}
	if r.stream != nil {
		r.stream.finished(r, wk)
	}
}

// batchRef calls done once every record of a batch has let go of the batch's
// bytes, so a caller can unmap or reuse them.
type batchRef struct {
	pending atomic.Int64
	done    func()
	read    func(n int64) // BatchHooks.Read; nil: none
}

func newBatchRef(done func()) *batchRef {
	b := &batchRef{done: done}
	b.pending.Store(1) // the call's own, released when it returns
	return b
}

func (b *batchRef) add() { b.pending.Add(1) }

// done lets go of what the record holds once its stream is through with
// it: its encoded bytes, or the batch they borrow. It reports whether
// that called the batch's done.
func (r *record) done() bool {
	if r.out == nil {
		return false
	}
	woke := false
	if r.borrowed {
		woke = r.batch.release()
		r.batch, r.borrowed = nil, false
	} else {
		putBuffer(r.out)
	}
	r.out = nil
	return woke
}

// release lets go of the batch for one record; it reports whether that
// was the last reference and done was called.
func (b *batchRef) release() bool {
	if b.pending.Add(-1) == 0 && b.done != nil {
		b.done()
		return true
	}
	return false
}

// Encoded-record buffers come from size-classed pools (powers of four from
// 4 KiB to 64 MiB), so a small record never pins a large buffer and the
// memory held stays close to what the limiter admitted.
const (
	minBufferShift = 12
	maxBufferShift = 26
)

var bufferPools [(maxBufferShift-minBufferShift)/2 + 1]sync.Pool

func bufferClass(n int) int {
	if n <= 1<<minBufferShift {
		return 0
	}
	shift := bits.Len(uint(n - 1)) // smallest power of two >= n
	c := (shift - minBufferShift + 1) / 2
	if c >= len(bufferPools) {
		return -1
	}
	return c
}

// getBuffer returns an empty buffer with room for the encoding of n input
// bytes plus codec framing.
func getBuffer(n int) []byte {
	want := n + n/16 + 256
	c := bufferClass(want)
	if c < 0 {
		return make([]byte, 0, want)
	}
	if p, ok := bufferPools[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<(minBufferShift+2*c))
}

// putBuffer returns a buffer to the pool of the largest class it can serve.
func putBuffer(b []byte) {
	if cap(b) < 1<<minBufferShift {
		return
	}
	c := (bits.Len(uint(cap(b))) - 1 - minBufferShift) / 2
	if c >= len(bufferPools) {
		return
	}
	b = b[:0]
	bufferPools[c].Put(&b)
}

// getChunk returns an empty buffer for the k-th chunk of a run held in
// memory: 64 KiB, then 256 KiB, then 1 MiB for every later one, so a small
// run holds little and a large one few chunks.
func getChunk(k int) []byte {
	c := min(2+k, 4)
	if p, ok := bufferPools[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<(minBufferShift+2*c))
}
