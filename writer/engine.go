package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/limiter"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/shufflefile"
)

// Sentinel errors. Errors returned by the writer wrap one of them (or a
// context error, or an I/O error from the file system) with the map output
// and the value at fault.
var (
	// ErrInvalid marks bad input: a partition id out of range, a bad spec.
	ErrInvalid = errors.New("writer: invalid argument")
	// ErrAborted is returned by calls on a map output that was aborted.
	ErrAborted = errors.New("writer: map output aborted")
	// ErrCommitted is returned by calls on a map output that was committed.
	ErrCommitted = errors.New("writer: map output already committed")
	// ErrTooManyRuns is returned when a map output's partition ids go
	// backwards more often than MaxRuns allows.
	ErrTooManyRuns = errors.New("writer: too many runs")
	// ErrClosed is returned by Open on an Engine that was closed.
	ErrClosed = errors.New("writer: engine closed")
)

// Mode selects how a map output's records reach the disk. Stream is the
// writer; Legacy and Ceiling exist to measure it.
type Mode uint8

const (
	// Stream writes each run straight into its own file, partitions in order,
	// and merges runs at commit.
	Stream Mode = iota
	// Legacy is the pre-V2 design: one temp file per partition, then a
	// sequential concatenation into the data file at commit.
	Legacy
	// Ceiling encodes every record on the pool and discards the result: the
	// compression ceiling, with no I/O at all. Commit writes nothing.
	Ceiling
)

func (m Mode) String() string {
	switch m {
	case Stream:
		return "stream"
	case Legacy:
		return "legacy"
	case Ceiling:
		return "ceiling"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Engine holds what every map output of a daemon shares: the limiter, the
// pool of encoding workers and the pools of encoders. It is safe for
// concurrent use.
type Engine struct {
	opts     options
	lim      *limiter.Limiter
	jobs     chan *record
	workers  sync.WaitGroup
	encoders [4]*codec.Pool // by codec.Kind

	mu struct {
		sync.Mutex
		closed bool
		open   int // map outputs neither committed nor aborted
	}
}

// New starts an Engine: its workers run until Close.
func New(opts ...Option) (*Engine, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	e := &Engine{opts: o, lim: o.lim}
	if e.lim == nil {
		e.lim = limiter.New(o.limit)
	}
	for _, k := range []codec.Kind{codec.None, codec.LZ4, codec.Zstd, codec.Snappy} {
		p, err := codec.NewPool(k, codec.WithBlockSize(o.blockSize), codec.WithLevel(o.zstdLevel))
		if err != nil {
			return nil, fmt.Errorf("writer: codec %v: %w", k, err)
		}
		e.encoders[k] = p
	}
	e.jobs = make(chan *record, 4*o.workers)
	e.workers.Add(o.workers)
	for range o.workers {
		go e.work()
	}
	return e, nil
}

// Limiter returns the engine's bytes-in-flight limiter.
func (e *Engine) Limiter() *limiter.Limiter { return e.lim }

// Close stops the workers once every record already submitted is encoded.
// Map outputs still open must be committed or aborted first; Close returns
// an error naming how many are still open, and closes nothing, if not.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	if e.mu.open > 0 {
		n := e.mu.open
		e.mu.Unlock()
		return fmt.Errorf("writer: Close with %d map outputs still open", n)
	}
	e.mu.closed = true
	e.mu.Unlock()
	close(e.jobs)
	e.workers.Wait()
	return nil
}

func (e *Engine) work() {
	defer e.workers.Done()
	for r := range e.jobs {
		r.encode()
	}
}

// submit hands an admitted record to the workers.
func (e *Engine) submit(ctx context.Context, r *record) error {
	select {
	case e.jobs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Spec names a map output and how to write it.
type Spec struct {
	ID            shufflefile.ID
	NumPartitions int
	Codec         codec.Kind
	Checksum      checksum.Algorithm
	// Layout places the committed files (flat or Spark's hashed local dirs).
	// Run and temp files live in the directory of the data file.
	Layout shufflefile.Layout
	Mode   Mode
	// Format serializes the records of columnar batches: partition.SHFC
	// blocks (the zero value) or partition.Kudo tables.
	Format partition.Format
	// Space, when set, admits every byte the map output is about to put on
	// disk — run files, partition files, the merged data file — before it
	// is written. An error from Grow (a disk below its low watermark) fails
	// the map output cleanly: nothing is committed.
	Space Space
}

// Space admits bytes before they reach the disk (see disks.Reservation).
type Space interface {
	Grow(n int64) error
}

// Bounds on the runs of one map output: each run holds a file open until
// the merge (which opens them all) and a length and checksum per partition.
const (
	MaxRuns = 1024
	// maxRunSegments bounds runs × partitions: 32 Mi segments, 384 MiB of
	// segment tables at most.
	maxRunSegments = 1 << 25
)

// MaxPartitions bounds NumPartitions, as Spark bounds a shuffle's reducers
// (2^24, PartitionIdPassthrough's practical limit).
const MaxPartitions = 1 << 24

func (s *Spec) validate() error {
	if s.ID.Shuffle < 0 {
		return fmt.Errorf("%w: shuffle id %d < 0", ErrInvalid, s.ID.Shuffle)
	}
	if s.ID.Map < 0 {
		return fmt.Errorf("%w: map id %d < 0", ErrInvalid, s.ID.Map)
	}
	if s.NumPartitions <= 0 || s.NumPartitions > MaxPartitions {
		return fmt.Errorf("%w: map output %d/%d: partitions %d out of range [1,%d]", ErrInvalid, s.ID.Shuffle, s.ID.Map, s.NumPartitions, MaxPartitions)
	}
	if s.Codec > codec.Snappy {
		return fmt.Errorf("%w: map output %d/%d: unknown codec %v", ErrInvalid, s.ID.Shuffle, s.ID.Map, s.Codec)
	}
	if s.Checksum > checksum.CRC32C {
		return fmt.Errorf("%w: map output %d/%d: unknown checksum algorithm %v", ErrInvalid, s.ID.Shuffle, s.ID.Map, s.Checksum)
	}
	if s.Mode > Ceiling {
		return fmt.Errorf("%w: map output %d/%d: unknown mode %v", ErrInvalid, s.ID.Shuffle, s.ID.Map, s.Mode)
	}
	if !s.Format.Valid() {
		return fmt.Errorf("%w: map output %d/%d: unknown format %v", ErrInvalid, s.ID.Shuffle, s.ID.Map, s.Format)
	}
	if s.Layout == nil && s.Mode != Ceiling {
		return fmt.Errorf("%w: map output %d/%d: no layout", ErrInvalid, s.ID.Shuffle, s.ID.Map)
	}
	return nil
}

// Open starts a map output. The returned MapWriter must be committed or
// aborted.
func (e *Engine) Open(ctx context.Context, spec Spec) (*MapWriter, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	e.mu.open++
	e.mu.Unlock()
	w := newMapWriter(e, spec)
	if err := w.init(); err != nil {
		e.done()
		return nil, err
	}
	return w, nil
}

func (e *Engine) done() {
	e.mu.Lock()
	e.mu.open--
	e.mu.Unlock()
}
