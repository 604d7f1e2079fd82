package writer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/iocrypt"
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
