package writer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/merge"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

type state uint8

const (
	open state = iota
	committed
	aborted
)

// MapWriter writes one map output. Write, WriteBatch and Commit must not be
// called concurrently with each other; Abort may be called at any time from
// any goroutine (a client disconnecting, a shutdown), and wins over a Commit
// that has not yet reached the commit step.
type MapWriter struct {
	e        *Engine
	spec     Spec
	enc      *codec.Pool
	fs       vfs.FS // the layout's own (shufflefile.FSOf), else the engine's
	dataPath string

	ctx     context.Context // cancelled by Abort and by the first failure
	cancel  context.CancelFunc
	aborted atomic.Bool
	failure atomic.Pointer[error] // first failure of a stream

	mu      sync.Mutex // serializes Write, WriteBatch, Commit and Abort
	state   state
	last    int // partition id of the last record
	cur     *stream
	streams []*stream // every stream, cur last
	records int64
	bytesIn int64
	memHeld atomic.Int64 // bytes its runs hold in memory
	held    []*record    // admitted, not yet queued on their stream nor submitted (see enqueue)
	credit  int64        // limiter quota taken ahead for the next records (see takeCredit)
	jobs    jobHeap      // records waiting for a worker (the engine's queue owns it)
	// Its places in the engine's job queue, which owns them: when it last
	// had a turn (or got its first job since), and its neighbours in the
	// queue's two lists (byArrival, byTurn).
	turnAt             int64
	turnPrev, turnNext [2]*MapWriter

	// spaceCredit: bytes the Space admitted for a data file removed
	// before it was done (a dropped early merge); the next merge takes
	// them before it asks the Space for more.
	spaceCredit int64

	// ivs: with Spec.Encryption, the IV of each partition (IVSize bytes
	// each), written by the first run's put, read by the merge.
	ivs []byte

	lastMarked bool        // MarkLast was called
	lastRun    bool        // a record came after MarkLast: no run should start any more
	early      *earlyMerge // the merge started in the last batch, if any
}

// earlyMerge is a streaming merge started before Commit, in the map
// output's last batch (see MarkLast). Its fields are set before done is
// closed.
type earlyMerge struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    Result // MergeBytes and MemoryRuns
	path   string // the data temp file, once done without error; Commit or Abort owns it then
	seg    segments
	ok     bool // false: a run was not in memory at the start, nothing was done
	err    error
	ended  time.Time // when the data file was complete
}

// Result is what a committed map output holds.
type Result struct {
	// Lengths and Checksums are per partition, as committed. When Existing is
	// set, another attempt of the same map output committed first, and these
	// are its figures (Spark's first-commit-wins).
	Lengths   []int64
	Checksums []uint32 // nil when the algorithm is None
	Existing  bool

	Runs       int   // runs the records formed (1 with a Spec.Sink)
	Records    int64 // records encoded
	BytesIn    int64 // uncompressed bytes written
	BytesOut   int64 // bytes on disk: the data file's length
	MergeBytes int64 // bytes the merge of several runs wrote
	// EarlyMerge: the merge of several runs began before Commit, while
	// the batch MarkLast announced was written.
	EarlyMerge bool
	// MemoryRuns is how many runs the merge took from memory rather than
	// from run files.
	MemoryRuns int

	// Where Commit's time went. EncodeWait: from Commit's call until the
	// last run had all its records, encoded and handed to it, its run
	// file flushed (0 if that was before the call). MergeTail: from then
	// until the data file was complete, the part of a merge of several
	// runs (or of a Spec.Sink's Assemble) that did not overlap the
	// encoding (0 also when an early merge was done by then); 0 for one
	// run without a Spec.Sink. Files: writing the index and checksum files
	// and committing all three (0 for a Spec.Sink that writes no file).
	EncodeWait, MergeTail, Files time.Duration
}

// setPhases sets res's EncodeWait and MergeTail for a commit called at
// start whose runs all ended by ended and whose data file was complete
// at assembled (after a merge, if merged).
func (res *Result) setPhases(start, ended, assembled time.Time, merged bool) {
	res.EncodeWait = max(0, ended.Sub(start))
	if merged {
		res.MergeTail = max(0, assembled.Sub(start.Add(res.EncodeWait)))
	}
}

// lastEnded returns when the last of the map output's streams ended; every
// stream has ended.
func (w *MapWriter) lastEnded() time.Time {
	var t time.Time
	for _, s := range w.streams {
		if s.endedAt.After(t) {
			t = s.endedAt
		}
	}
	return t
}

func newMapWriter(e *Engine, spec Spec, enc *codec.Pool) *MapWriter {
	w := &MapWriter{e: e, spec: spec, enc: enc, last: -1}
	w.fs = shufflefile.FSOf(spec.Layout, e.opts.fs)
	if spec.Encryption != nil {
		w.ivs = make([]byte, iocrypt.IVSize*spec.NumPartitions)
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w
}

func (w *MapWriter) init() error {
	w.dataPath = shufflefile.Path(w.spec.Layout, shufflefile.DataName(w.spec.ID))
	// A directory made here (a Spark hashed sub-directory, an executor's
	// dir in the daemon's root) gets shufflefile.DirMode, as Commit's do.
	if err := shufflefile.EnsureDir(w.fs, filepath.Dir(w.dataPath), w.e.opts.fileMode); err != nil {
		return fmt.Errorf("writer: map output %s: %w", w.name(), err)
	}
	return nil
}

func (w *MapWriter) name() string {
	return fmt.Sprintf("%d/%d", w.spec.ID.Shuffle, w.spec.ID.Map)
}

// NumPartitions returns the map output's number of partitions.
func (w *MapWriter) NumPartitions() int { return w.spec.NumPartitions }

// fail records the first failure of a stream and stops further writes.
func (w *MapWriter) fail(err error) {
	if w.failure.CompareAndSwap(nil, &err) {
		w.cancel()
	}
}

// usable reports why the map output takes no more calls, if it doesn't.
func (w *MapWriter) usable() error {
	switch w.state {
	case committed:
		return fmt.Errorf("map output %s: %w", w.name(), ErrCommitted)
	case aborted:
		return fmt.Errorf("map output %s: %w", w.name(), ErrAborted)
	}
	return w.stopped()
}

// stopped reports the map output's own abort or first failure, if any.
func (w *MapWriter) stopped() error {
	if w.aborted.Load() {
		return fmt.Errorf("map output %s: %w", w.name(), ErrAborted)
	}
	if p := w.failure.Load(); p != nil {
		return fmt.Errorf("writer: map output %s: %w", w.name(), *p)
	}
	return nil
}

// writing runs add holding w.mu, with a context that the map output's
// abort or failure cancels too, if the map output still takes writes.
func (w *MapWriter) writing(ctx context.Context, add func(ctx context.Context) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	ctx, stop := w.join(ctx)
	defer stop()
	defer w.releaseCredit()
	defer w.submitHeld()
	return add(ctx)
}

// join returns a context cancelled with ctx or with the map output.
func (w *MapWriter) join(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(w.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// checkPartition validates a partition id and starts a new run when it goes
// backwards.
func (w *MapWriter) checkPartition(p int) error {
	if p < 0 || p >= w.spec.NumPartitions {
		return fmt.Errorf("%w: map output %s: partition %d out of range [0,%d)", ErrInvalid, w.name(), p, w.spec.NumPartitions)
	}
	if w.cur == nil || (p < w.last && w.spec.Sink == nil) {
		if w.early != nil { // MarkLast was wrong: merge at Commit after all
			w.dropEarlyMerge()
			w.early = nil
		}
		if err := w.startRun(); err != nil {
			return err
		}
	}
	w.last = p
	if w.lastMarked && !w.lastRun {
		w.lastRun = true
		w.startEarlyMerge()
	}
	return nil
}

// MarkLast says that the map output's writes from now on until Commit
// are its last batch: their records come in non-decreasing partition
// order. They may start one more run, at their first record, but none
// after it. When the map output then has several runs, the writer starts
// merging them at that first record, following the last run's encoding,
// instead of at Commit, so that Commit finds most of the data file
// written. MarkLast changes no byte of the output, and nothing at all
// with a Spec.Sink or when no write follows it. If a later record starts
// a run all the same, the writer drops what it merged and merges at
// Commit, as without MarkLast. An early merge that fails (a disk refusing
// the data file) fails the map output at once, as a failed run does.
func (w *MapWriter) MarkLast() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastMarked = true
}

// startEarlyMerge starts the streaming merge of the map output's runs,
// now that no run follows, if there are several. The caller holds w.mu.
func (w *MapWriter) startEarlyMerge() {
	if w.spec.Sink != nil || len(w.streams) < 2 {
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	m := &earlyMerge{cancel: cancel, done: make(chan struct{})}
	w.early = m
	streams := append([]*stream(nil), w.streams...)
	go func() {
		defer close(m.done)
		m.path, m.seg, m.ok, m.err = w.streamMerge(ctx, streams, &m.res)
		m.ended = time.Now()
		if m.err != nil && ctx.Err() == nil {
			// Not dropped nor stopped: the output cannot commit (a disk
			// refused the data file): stop the writes of the last batch.
			w.fail(m.err)
		}
	}()
}

// dropEarlyMerge stops the early merge, if one was started, waits for it
// and removes the data temp file it made, unless Commit took it. The
// caller holds w.mu.
func (w *MapWriter) dropEarlyMerge() {
	if m := w.early; m != nil {
		m.cancel()
		<-m.done
		if m.err != nil { // its bytes were admitted, and are removed
			w.spaceCredit += m.res.MergeBytes
		}
		if m.path != "" {
			_ = w.fs.Remove(m.path)
			m.path = ""
		}
	}
}

// startRun closes the current run's queue, if any, and starts a new stream.
func (w *MapWriter) startRun() error {
	n := len(w.streams) + 1
	if w.spec.Sink == nil && (n > MaxRuns || n*w.spec.NumPartitions > maxRunSegments) {
		err := fmt.Errorf("%w: map output %s: run %d of %d partitions exceeds %d runs or %d run segments", ErrTooManyRuns, w.name(), n, w.spec.NumPartitions, MaxRuns, maxRunSegments)
		w.fail(err)
		return err
	}
	if n > 2 && w.spec.Sink == nil && w.spec.RunState != nil {
		if err := w.spec.RunState(int64(w.spec.NumPartitions) * RunTableBytes); err != nil {
			err = fmt.Errorf("writer: map output %s: run %d: %w", w.name(), n, err)
			w.fail(err)
			return err
		}
	}
	var s sink
	if w.spec.Sink != nil {
		cs, err := w.spec.Sink(SinkSpec{FS: w.fs, DataPath: w.dataPath, NumPartitions: w.spec.NumPartitions, Checksum: w.spec.Checksum, Space: w.spec.Space})
		if err != nil {
			err = fmt.Errorf("writer: map output %s: sink: %w", w.name(), err)
			w.fail(err)
			return err
		}
		s = custom{cs}
	} else {
		ru, err := w.newRun(len(w.streams) == 0)
		if err != nil {
			err = fmt.Errorf("writer: map output %s: run %d: %w", w.name(), len(w.streams), err)
			w.fail(err)
			return err
		}
		s = ru
	}
	if len(w.streams) == 1 && w.spec.Sink == nil {
		if err := w.streams[0].sink.(*run).follow(); err != nil {
			err = fmt.Errorf("writer: map output %s: run 0: %w", w.name(), err)
			_ = s.close(true)
			s.remove()
			w.fail(err)
			return err
		}
	}
	if w.cur != nil {
		w.submitHeld() // the records held back belong to the stream closed now
		w.cur.close()
	}
	w.cur = w.startStream(s)
	w.streams = append(w.streams, w.cur)
	return nil
}

// WriteBatch adds a columnar batch: each partition's slice is serialized (see
// package partition) into one record, or several when it is larger than the
// engine's record size. The batch must have the map output's number of
// partitions and is validated first; an invalid batch is an ErrInvalid error
// and nothing of it is written. The batch's buffers must stay unchanged
// until onDone (may be nil) is called, once no record refers to them any
// more; onDone is called exactly once, also when WriteBatch fails, and may
// be called before WriteBatch returns.
func (w *MapWriter) WriteBatch(ctx context.Context, b *partition.Batch, onDone func()) error {
	ref := newBatchRef(onDone)
	defer ref.release()
	if err := b.Validate(); err != nil {
		return fmt.Errorf("%w: map output %s: batch: %w", ErrInvalid, w.name(), err)
	}
	if n := b.NumPartitions(); n != w.spec.NumPartitions {
		return fmt.Errorf("%w: map output %s: batch has %d partitions, want %d", ErrInvalid, w.name(), n, w.spec.NumPartitions)
	}
	return w.writing(ctx, func(ctx context.Context) error { return w.writeColumnar(ctx, b, ref) })
}

// writeColumnar queues the records of every partition's slice of b. The
// caller holds w.mu.
func (w *MapWriter) writeColumnar(ctx context.Context, b *partition.Batch, ref *batchRef) error {
	for p := range w.spec.NumPartitions {
		start, end := b.PartitionRows(p)
		if start == end {
			continue
		}
		if err := w.checkPartition(p); err != nil {
			return err
		}
		var bounds []int
		if w.spec.Format.Size(b, start, end) <= w.e.opts.recordSize {
			bounds = []int{start, end}
		} else {
			bounds = w.spec.Format.Split(b, start, end, w.e.opts.recordSize)
		}
		for i := 1; i < len(bounds); i++ {
			lo, hi := bounds[i-1], bounds[i]
			r := &record{w: w, partition: p, cols: b, rowStart: lo, rowEnd: hi, batch: ref}
			r.quota = int64(w.spec.Format.Size(b, lo, hi))
			if err := w.enqueue(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Write adds an opaque record: partition p's bytes, already serialized by
// the client. Bytes larger than the engine's record size are split into
// several records (codec streams concatenate, so the partition decodes to
// the same bytes). Write returns once every record is admitted; data must
// stay unchanged until Commit or Abort returns (WriteOpaque says exactly
// when). Empty data is a no-op: empty partitions occupy no bytes.
func (w *MapWriter) Write(ctx context.Context, p int, data []byte) error {
	if p < 0 || p >= w.spec.NumPartitions {
		return fmt.Errorf("%w: map output %s: partition %d out of range [0,%d)", ErrInvalid, w.name(), p, w.spec.NumPartitions)
	}
	return w.writing(ctx, func(ctx context.Context) error { return w.writeOpaque(ctx, p, data, nil) })
}

// WriteOpaque adds an opaque batch: partition p is data[offsets[p]:
// offsets[p+1]], for the map output's numPartitions+1 offsets (the first 0,
// non-decreasing, the last len(data)). Invalid offsets are an ErrInvalid
// error and nothing is written. data must stay unchanged until onDone (may
// be nil) is called, once no record refers to it any more; onDone is called
// exactly once, also when WriteOpaque fails.
func (w *MapWriter) WriteOpaque(ctx context.Context, data []byte, offsets []int64, onDone func()) error {
	ref := newBatchRef(onDone)
	defer ref.release()
	if err := checkOffsets(offsets, w.spec.NumPartitions, int64(len(data))); err != nil {
		return fmt.Errorf("%w: map output %s: %w", ErrInvalid, w.name(), err)
	}
	return w.writing(ctx, func(ctx context.Context) error {
		for p := range w.spec.NumPartitions {
			if err := w.writeOpaque(ctx, p, data[offsets[p]:offsets[p+1]], ref); err != nil {
				return err
			}
		}
		return nil
	})
}

func checkOffsets(offsets []int64, numPartitions int, size int64) error {
	if len(offsets) != numPartitions+1 {
		return fmt.Errorf("%d partition offsets, want %d", len(offsets), numPartitions+1)
	}
	if offsets[0] != 0 {
		return fmt.Errorf("partition offset[0] = %d, want 0", offsets[0])
	}
	for p := 1; p < len(offsets); p++ {
		if offsets[p] < offsets[p-1] {
			return fmt.Errorf("partition offset[%d] = %d < offset[%d] = %d", p, offsets[p], p-1, offsets[p-1])
		}
	}
	if last := offsets[numPartitions]; last != size {
		return fmt.Errorf("partition offset[%d] = %d, want the payload length %d", numPartitions, last, size)
	}
	return nil
}

// writeOpaque queues partition p's bytes as records of at most the record
// size. The caller holds w.mu.
func (w *MapWriter) writeOpaque(ctx context.Context, p int, data []byte, ref *batchRef) error {
	if len(data) == 0 {
		return nil
	}
	if err := w.checkPartition(p); err != nil {
		return err
	}
	size := w.e.opts.recordSize
	for len(data) > 0 {
		n := min(len(data), size)
		r := &record{w: w, partition: p, quota: int64(n), data: data[:n], batch: ref}
		if err := w.enqueue(ctx, r); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// enqueue admits a record and holds it for the workers: it goes to them,
// queued on the current stream, with the next group of up to submitBatch
// records, or before anything blocks (records held back hold quota and
// stream slots that only their encoding gives back). On failure the record
// holds no quota and is not queued. The caller holds w.mu and calls
// submitHeld before letting go of it (writing does).
//
// The producer takes the work of admission once per group, not once per
// record, where it can: quota from its credit (see takeCredit), the
// stream's lock once per group (submitHeld). At 16 cores the producer's
// locks, shared with every worker, made it slower than the workers.
func (w *MapWriter) enqueue(ctx context.Context, r *record) error {
	if r.batch != nil {
		r.batch.add()
	}
	if !w.takeCredit(r.quota) {
		w.submitHeld()
		if err := w.e.lim.Acquire(ctx, r.quota); err != nil {
			r.quota = 0
			r.finish(nil)
			return w.wrapCtx(err)
		}
	}
	if !w.cur.trySlot() {
		w.submitHeld()
		w.releaseCredit()
		if err := w.cur.slot(ctx); err != nil {
			w.e.lim.Release(r.quota)
			r.quota = 0
			r.finish(nil)
			return w.wrapCtx(err)
		}
	}
	r.stream = w.cur
	r.run, r.seq = len(w.streams)-1, w.records
	w.records++
	if r.encoded {
		w.bytesIn += r.raw
	} else {
		w.bytesIn += r.quota
	}
	w.held = append(w.held, r)
	if len(w.held) >= submitBatch {
		w.submitHeld()
	}
	return nil
}

// submitBatch is how many admitted records a producer hands to the workers
// at once: one wake-up of the workers per group rather than per record.
const submitBatch = 16

// creditBytes is how much limiter quota a producer takes at once for the
// records it admits next, at most an eighth of the limit.
const creditBytes = 256 << 10

// takeCredit takes n bytes of quota for a record from the producer's
// credit, topping it up from the limiter without waiting; a record larger
// than a top-up asks the limiter for itself alone, as does any record
// when the limiter has no top-up to spare. It reports false, holding
// nothing more, when the limiter has not even n to spare. Unused credit
// goes back by releaseCredit before the producer blocks and when its call
// returns (writing). The caller holds w.mu.
func (w *MapWriter) takeCredit(n int64) bool {
	if n <= w.credit {
		w.credit -= n
		return true
	}
	lim := w.e.lim
	if top := min(creditBytes, lim.Limit()/8); n <= top && lim.TryAcquire(top-w.credit) {
		w.credit = top - n
		return true
	}
	w.releaseCredit()
	return lim.TryAcquire(n)
}

// releaseCredit gives the producer's unused credit back to the limiter.
func (w *MapWriter) releaseCredit() {
	if w.credit > 0 {
		w.e.lim.Release(w.credit)
		w.credit = 0
	}
}

// submitHeld queues the records held back on their streams, in order, and
// hands them to the workers.
func (w *MapWriter) submitHeld() {
	if len(w.held) == 0 {
		return
	}
	for i := 0; i < len(w.held); {
		s, j := w.held[i].stream, i+1
		for j < len(w.held) && w.held[j].stream == s {
			j++
		}
		s.queue(w.held[i:j])
		i = j
	}
	w.e.jobs.push(w.held)
	clear(w.held)
	w.held = w.held[:0]
}

// wrapErr explains an error of the merge: the map output's own abort or
// failure, a context error, or the merge's own.
func (w *MapWriter) wrapErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrAborted) {
		return w.wrapCtx(err)
	}
	return fmt.Errorf("writer: map output %s: %w", w.name(), err)
}

// wrapCtx explains a context error: the caller's, or the map output's own
// abort or failure.
func (w *MapWriter) wrapCtx(err error) error {
	if stop := w.stopped(); stop != nil {
		return stop
	}
	return fmt.Errorf("writer: map output %s: %w", w.name(), err)
}

// wait closes the open stream and waits for every stream to finish; it
// returns the first stream error.
func (w *MapWriter) wait(ctx context.Context) error {
	w.closeRun()
	return waitStreams(ctx, w.streams)
}

// closeRun closes the open stream's queue: no record follows.
func (w *MapWriter) closeRun() {
	if w.cur != nil {
		w.cur.close()
		w.cur = nil
	}
}

// waitStreams waits for streams to finish and returns the first error.
func waitStreams(ctx context.Context, streams []*stream) error {
	var first error
	for _, s := range streams {
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if s.err != nil && first == nil {
			first = s.err
		}
	}
	return first
}

// Commit finishes the map output: it waits for every record to be written,
// merges the runs if there are several, and commits the data, index and
// checksum files atomically. On any error the map output is aborted: nothing
// is committed and no file of it remains.
func (w *MapWriter) Commit(ctx context.Context) (Result, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		if w.state == open {
			w.abortLocked()
		}
		return Result{}, err
	}
	res, err := w.commitLocked(ctx)
	if err != nil {
		w.abortLocked()
		return Result{}, err
	}
	// The runs (or partition files) were merged into the data file.
	for _, s := range w.streams {
		s.sink.remove()
	}
	w.streams = nil
	w.state = committed
	w.cancel()
	w.e.done()
	return res, nil
}

func (w *MapWriter) commitLocked(ctx context.Context) (Result, error) {
	start := time.Now()
	res := Result{Runs: len(w.streams), Records: w.records, BytesIn: w.bytesIn}
	if w.spec.Sink == nil && len(w.streams) >= 2 {
		// Several runs: the merge may follow them as they are written.
		w.closeRun()
		var dataTemp string
		var seg segments
		var ok bool
		var err error
		var assembled time.Time     // when the data file was complete
		if m := w.early; m != nil { // started in the last batch
			if err := ctx.Err(); err != nil {
				return Result{}, w.wrapCtx(err)
			}
			select {
			case <-m.done:
			case <-ctx.Done():
				return Result{}, w.wrapCtx(ctx.Err())
			}
			m.cancel()
			dataTemp, seg, ok, err, assembled = m.path, m.seg, m.ok, m.err, m.ended
			m.path = "" // commitData owns it
			res.MergeBytes, res.MemoryRuns, res.EarlyMerge = m.res.MergeBytes, m.res.MemoryRuns, ok
		} else {
			dataTemp, seg, ok, err = w.streamMerge(ctx, w.streams, &res)
			assembled = time.Now()
		}
		if err != nil {
			return Result{}, w.wrapErr(err)
		}
		if ok {
			res.setPhases(start, w.lastEnded(), assembled, true)
			return w.commitData(res, dataTemp, seg)
		}
	}
	if err := w.wait(ctx); err != nil {
		return Result{}, w.wrapCtx(err)
	}
	if w.aborted.Load() {
		return Result{}, fmt.Errorf("map output %s: %w", w.name(), ErrAborted)
	}
	ended := w.lastEnded()
	if w.spec.Sink != nil && len(w.streams) == 1 {
		cs := w.streams[0].sink.(custom).s
		dataTemp, lengths, sums, err := cs.Assemble(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("writer: map output %s: %w", w.name(), err)
		}
		res.setPhases(start, ended, time.Now(), true)
		if dataTemp == "" {
			res.Lengths, res.Checksums, res.BytesOut = lengths, sums, sum(lengths)
			return res, nil
		}
		return w.commitData(res, dataTemp, segments{alg: w.spec.Checksum, lengths: lengths, checksums: sums})
	}
	merged := len(w.streams) >= 2
	dataTemp, seg, err := w.assemble(ctx, &res)
	if err != nil {
		return Result{}, fmt.Errorf("writer: map output %s: %w", w.name(), err)
	}
	res.setPhases(start, ended, time.Now(), merged)
	return w.commitData(res, dataTemp, seg)
}

// commitData commits a finished data temp file with its index and checksum
// file; the temp file is gone afterwards on every path.
func (w *MapWriter) commitData(res Result, dataTemp string, seg segments) (Result, error) {
	if w.aborted.Load() { // an Abort that came during the merge still wins
		_ = w.fs.Remove(dataTemp)
		return Result{}, fmt.Errorf("map output %s: %w", w.name(), ErrAborted)
	}
	c := shufflefile.Commit{
		FS:        w.fs,
		Layout:    w.spec.Layout,
		ID:        w.spec.ID,
		DataTemp:  dataTemp,
		Lengths:   seg.lengths,
		Checksums: seg.checksums,
		Algorithm: w.spec.Checksum,
		Sync:      w.e.opts.sync,
		FileMode:  w.e.opts.fileMode,
	}
	start := time.Now()
	lengths, sums, existing, err := c.Do()
	if err != nil {
		return Result{}, fmt.Errorf("writer: map output %s: commit: %w", w.name(), err)
	}
	res.Files = time.Since(start)
	res.Lengths, res.Checksums, res.Existing, res.BytesOut = lengths, sums, existing, sum(lengths)
	return res, nil
}

// assemble produces the finished data temp file: the single run's file as
// it is, or a merge of several runs. Run files are removed once merged; on
// error, assemble removes what it made and abortLocked removes the rest.
func (w *MapWriter) assemble(ctx context.Context, res *Result) (string, segments, error) {
	fsys := w.fs
	switch len(w.streams) {
	case 0:
		// No record at all: an empty data file.
		path := shufflefile.TempName(w.dataPath)
		f, err := fsys.Create(path, 0o600)
		if err != nil {
			return "", segments{}, err
		}
		if err := f.Close(); err != nil {
			_ = fsys.Remove(path)
			return "", segments{}, err
		}
		return path, newSegments(w.spec.NumPartitions, w.spec.Checksum), nil
	case 1:
		ru := w.streams[0].sink.(*run)
		ru.releaseMemory()
		w.streams = nil // the run file is now the data temp file; Commit owns it
		return ru.file.path, ru.segments, nil
	}
	return w.mergeRuns(ctx, res)
}

// mergeRuns merges finished runs, in files or in memory (package merge).
func (w *MapWriter) mergeRuns(ctx context.Context, res *Result) (path string, seg segments, err error) {
	fsys := w.fs
	runs := make([]merge.Run, 0, len(w.streams))
	var files []vfs.File
	defer func() {
		for _, f := range files {
			if cerr := f.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if err != nil && path != "" {
			_ = fsys.Remove(path)
			path = ""
		}
	}()
	var total int64
	for _, s := range w.streams {
		ru := s.sink.(*run)
		mr := merge.Run{Lengths: ru.lengths, Checksums: ru.checksums}
		if ru.mem {
			mr.Data, mr.Prefix = ru.chunks, ru.prefix
		}
		if ru.fromMemory() {
			res.MemoryRuns++
		}
		if !ru.mem || ru.prefix > 0 {
			f, err := ru.file.reopen()
			if err != nil {
				return "", segments{}, err
			}
			files = append(files, f)
			mr.File = f
		}
		runs = append(runs, mr)
		total += sum(ru.lengths)
	}
	total += w.addedIVs()
	if err := ctx.Err(); err != nil {
		return "", segments{}, err
	}
	// The merged copy holds the runs' bytes a second time until the runs
	// are removed.
	if err := w.grow(total); err != nil {
		return "", segments{}, err
	}
	path = shufflefile.TempName(w.dataPath)
	dst, err := fsys.Create(path, 0o600)
	if err != nil {
		return "", segments{}, err
	}
	vfs.Preallocate(dst, 0, total) // its size is known: the writes skip block allocation
	var mres merge.Result
	if w.spec.Encryption != nil {
		mres, err = merge.MergeEncrypted(dst, runs, w.spec.NumPartitions, w.spec.Checksum, w.encryption())
	} else {
		mres, err = merge.Merge(dst, runs, w.spec.NumPartitions, w.spec.Checksum)
	}
	if cerr := dst.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return path, segments{}, err
	}
	res.MergeBytes = mres.Bytes
	return path, segments{alg: w.spec.Checksum, lengths: mres.Lengths, checksums: mres.Checksums}, nil
}

// encryption is what a merge needs to encrypt the runs after the first.
func (w *MapWriter) encryption() merge.Encryption {
	return merge.Encryption{Key: w.spec.Encryption, IVs: w.ivs}
}

// addedIVs is how many bytes of IVs a merge of the finished runs adds
// to what they hold: one for each partition that the first run has no
// bytes of and a later run has.
func (w *MapWriter) addedIVs() int64 {
	if w.spec.Encryption == nil || len(w.streams) < 2 {
		return 0
	}
	first := w.streams[0].sink.(*run).lengths
	var n int64
	for p, l := range first {
		if l > 0 {
			continue
		}
		for _, s := range w.streams[1:] {
			if s.sink.(*run).lengths[p] > 0 {
				n += iocrypt.IVSize
				break
			}
		}
	}
	return n
}

// grow admits n more bytes on disk with the map output's Space, if any.
func (w *MapWriter) grow(n int64) error {
	if w.spec.Space == nil {
		return nil
	}
	if c := min(n, w.spaceCredit); c > 0 {
		w.spaceCredit -= c
		n -= c
	}
	if n == 0 {
		return nil
	}
	return w.spec.Space.Grow(n)
}

func sum(lengths []int64) int64 {
	var total int64
	for _, n := range lengths {
		total += n
	}
	return total
}

// Abort discards the map output: every record still in flight is dropped and
// its quota released, and every file it made is removed. Aborting twice is a
// no-op; aborting a committed map output returns ErrCommitted and changes
// nothing.
func (w *MapWriter) Abort() error {
	w.aborted.Store(true)
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.state {
	case committed:
		return fmt.Errorf("map output %s: %w", w.name(), ErrCommitted)
	case aborted:
		return nil
	}
	w.abortLocked()
	return nil
}

// abortLocked waits for every stream (workers never block, so this ends) and
// removes the files of every run.
func (w *MapWriter) abortLocked() {
	w.aborted.Store(true)
	w.cancel()
	_ = w.wait(context.Background())
	w.dropEarlyMerge() // before the runs' memory goes: it may read it
	for _, s := range w.streams {
		s.sink.remove()
	}
	w.streams = nil
	w.state = aborted
	w.e.done()
}
