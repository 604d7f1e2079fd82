package writer

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/limiter"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// Sentinel errors. Errors returned by the writer wrap one of them (or a
// context error, or an I/O error from the file system) with the map output
// and the value at fault.
var (
	// ErrInvalid marks bad input: a partition id out of range, a bad spec.
	ErrInvalid = errdefs.New(errdefs.ErrInvalidArgument, "writer: invalid argument")
	// ErrAborted is returned by calls on a map output that was aborted.
	ErrAborted = errdefs.New(errdefs.ErrAborted, "writer: map output aborted")
	// ErrCommitted is returned by calls on a map output that was committed.
	ErrCommitted = errdefs.New(errdefs.ErrInternal, "writer: map output already committed")
	// ErrTooManyRuns is returned when a map output's partition ids go
	// backwards more often than MaxRuns allows.
	ErrTooManyRuns = errdefs.New(errdefs.ErrResourceExhausted, "writer: too many runs")
	// ErrClosed is returned by Open on an Engine that was closed.
	ErrClosed = errdefs.New(errdefs.ErrInternal, "writer: engine closed")
)

// A Sink takes the place of the writer's own runs for one map output: it
// receives the map output's encoded records in arrival order and assembles
// its data file. It exists to measure the writer against other designs
// (the benchmarks' baselines); a map output without one (Spec.Sink nil)
// is written by the writer's runs.
type Sink interface {
	// Write takes partition p's next encoded codec stream and its
	// checksum (0 when the algorithm is None). b is valid only during the
	// call.
	Write(p int, b []byte, sum uint32) error
	// Close runs once, after the last Write or after a failure.
	Close(failed bool) error
	// Assemble runs at Commit, after Close: it returns the finished data
	// temp file, beside SinkSpec.DataPath, which Commit then commits, and
	// every partition's length and checksum. An empty dataTemp commits
	// nothing: Commit returns the lengths (a sink that writes no file).
	Assemble(ctx context.Context) (dataTemp string, lengths []int64, checksums []uint32, err error)
	// Remove deletes whatever files the sink still has. It runs once,
	// after Close (and Assemble, if Commit got that far), on every path.
	Remove()
}

// SinkSpec tells a Sink what it writes and where.
type SinkSpec struct {
	FS            vfs.FS
	DataPath      string // the data file's final path; temp files go beside it
	NumPartitions int
	Checksum      checksum.Algorithm
	Space         Space // nil: no space accounting
}

// Engine holds what every map output of a daemon shares: the limiter, the
// pool of encoding workers and the pools of encoders. It is safe for
// concurrent use.
type Engine struct {
	opts     options
	lim      *limiter.Limiter
	jobs     *jobQueue
	workers  sync.WaitGroup
	encoders [4]*codec.Pool // by codec.Kind, with the engine's options
	memory   memoryBudget

	// pools holds the encoder pools of the other (codec, block size,
	// level) triples map outputs asked for (Spec.BlockSize, Spec.Level),
	// made on first use, at most maxEncoderPools of them.
	pools struct {
		sync.Mutex
		m map[poolKey]*codec.Pool
	}

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
	if o.locks == nil {
		o.locks = new(shufflefile.Locks)
	}
	e := &Engine{opts: o, lim: o.lim}
	if e.lim == nil {
		e.lim = limiter.New(o.limit)
	}
	e.memory = newMemoryBudget(e.lim.Limit(), o.recordSize)
	for _, k := range []codec.Kind{codec.None, codec.LZ4, codec.Zstd, codec.Snappy} {
		p, err := codec.NewPool(k, codec.WithBlockSize(o.blockSize), codec.WithLevel(o.zstdLevel))
		if err != nil {
			return nil, fmt.Errorf("writer: codec %v: %w", k, err)
		}
		e.encoders[k] = p
	}
	e.jobs = newJobQueue(o.workers)
	e.workers.Add(o.workers)
	for range o.workers {
		go e.work()
	}
	return e, nil
}

// maxEncoderPools bounds Engine.pools: past it, making a pool drops
// another (the map outputs that use it keep it until they end).
const maxEncoderPools = 32

type poolKey struct {
	kind      codec.Kind
	blockSize int
	level     int
}

// encoderPool returns the pool of spec's codec with its block size and
// level, the engine's for the zero values.
func (e *Engine) encoderPool(spec *Spec) (*codec.Pool, error) {
	k := poolKey{kind: spec.Codec, blockSize: e.opts.blockSize, level: e.opts.zstdLevel}
	switch spec.Codec {
	case codec.LZ4, codec.Snappy:
		if spec.BlockSize != 0 {
			k.blockSize = spec.BlockSize
		}
		if spec.Level != 0 {
			return nil, fmt.Errorf("%w: map output %d/%d: codec %v takes no level, got %d", ErrInvalid, spec.ID.Shuffle, spec.ID.Map, spec.Codec, spec.Level)
		}
	case codec.Zstd:
		if spec.Level != 0 {
			k.level = spec.Level
		}
		if spec.BlockSize != 0 {
			return nil, fmt.Errorf("%w: map output %d/%d: codec %v takes no block size, got %d", ErrInvalid, spec.ID.Shuffle, spec.ID.Map, spec.Codec, spec.BlockSize)
		}
	default:
		if spec.BlockSize != 0 || spec.Level != 0 {
			return nil, fmt.Errorf("%w: map output %d/%d: codec %v takes no block size or level, got %d and %d", ErrInvalid, spec.ID.Shuffle, spec.ID.Map, spec.Codec, spec.BlockSize, spec.Level)
		}
	}
	if k.blockSize == e.opts.blockSize && k.level == e.opts.zstdLevel {
		return e.encoders[spec.Codec], nil
	}
	e.pools.Lock()
	defer e.pools.Unlock()
	if p := e.pools.m[k]; p != nil {
		return p, nil
	}
	p, err := codec.NewPool(k.kind, codec.WithBlockSize(k.blockSize), codec.WithLevel(k.level))
	if err != nil {
		return nil, fmt.Errorf("%w: map output %d/%d: %v", ErrInvalid, spec.ID.Shuffle, spec.ID.Map, err)
	}
	if e.pools.m == nil {
		e.pools.m = make(map[poolKey]*codec.Pool)
	}
	if len(e.pools.m) >= maxEncoderPools {
		for old := range e.pools.m {
			delete(e.pools.m, old)
			break
		}
	}
	e.pools.m[k] = p
	return p, nil
}

// encoderPools returns how many pools Engine.pools holds (for tests).
func (e *Engine) encoderPools() int {
	e.pools.Lock()
	defer e.pools.Unlock()
	return len(e.pools.m)
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
	e.jobs.close()
	e.workers.Wait()
	return nil
}

func (e *Engine) work() {
	defer e.workers.Done()
	wk := &worker{last: time.Now()}
	defer wk.encs.Close()
	var rs []*record
	for {
		rs = e.jobs.pop(rs[:0], wk)
		if len(rs) == 0 {
			return
		}
		if wk.waited { // it waited for work: count from now
			wk.waited, wk.last = false, time.Now()
		}
		for i, r := range rs {
			r.encode(wk)
			rs[i] = nil
			if wk.woke {
				wk.yield()
			}
		}
		wk.yield() // a pop is at most popBytes of input, or one record
	}
}

// A worker is what one of the engine's goroutines keeps between records.
type worker struct {
	encs codec.Cache // its own encoders
	// woke: since its last yield, the worker readied a goroutine that
	// waits on it: a merge waiting for the run it put into or for the lock
	// of that run, a producer waiting for limiter quota or for a lock the
	// worker held (handoffMutex), the caller waiting for a batch's bytes or
	// for a stream's end.
	woke   bool
	last   time.Time // its last yield, or the end of its last wait for work
	waited bool      // its last pop waited for work (set by jobQueue.pop)
}

// yieldEvery bounds how long a worker encodes records without yielding.
//
// A goroutine that a worker readies goes next on the worker's P, and with
// every P encoding it would wait there until the worker is preempted
// (10 ms); so would one that waits for a P to come free (a connection's
// reader). So a worker yields after a record that readied a goroutine
// waiting on it (worker.woke), and otherwise after the records of a pop
// (at most popBytes of input, or one record) once it has encoded for
// yieldEvery. It used to yield after every record: a trace of the default
// load generator workload at 16 cores counted 120,000 yields in 2.2 s, and
// four in five times the worker resumed on another P, after a median
// 24 µs, while its own P ran another worker. Yielding only every
// yieldEvery, without woke, left a single map task's producer and merge
// waiting on the workers' Ps (4 runs × 2000 partitions at 16 cores: the
// stream 14% slower). The figures, side by side: docs/benchmarks.md,
// "Node scale", "Workers' yields".
const yieldEvery = 250 * time.Microsecond

// due reports whether the worker should yield now, and if so starts its
// next interval.
func (wk *worker) due(now time.Time) bool {
	if !wk.woke && now.Sub(wk.last) < yieldEvery {
		return false
	}
	wk.woke, wk.last = false, now
	return true
}

// yield lets a goroutine that waits for a P run, between two records,
// when it is due.
func (wk *worker) yield() {
	if wk.due(time.Now()) {
		runtime.Gosched()
	}
}

// Spec names a map output and how to write it.
type Spec struct {
	ID            shufflefile.ID
	NumPartitions int
	Codec         codec.Kind
	// BlockSize (lz4, snappy) and Level (zstd) are the codec's options;
	// 0 takes the engine's (WithBlockSize, WithZstdLevel). Others must be 0.
	BlockSize int
	Level     int
	Checksum  checksum.Algorithm
	// Layout places the committed files (flat or Spark's hashed local dirs).
	// Run and temp files live in the directory of the data file.
	Layout shufflefile.Layout
	// Sink, when set, makes the map output's Sink (see Sink): for
	// measurements only.
	Sink func(SinkSpec) (Sink, error)
	// Format serializes the records of columnar batches: partition.SHFC
	// blocks (the zero value) or partition.Kudo tables.
	Format partition.Format
	// Space, when set, admits every byte the map output is about to put on
	// disk — run files, partition files, the merged data file — before it
	// is written. An error from Grow (a disk below its low watermark) fails
	// the map output cleanly: nothing is committed.
	Space Space
	// RunState, when set, admits the per-partition tables of every run
	// after the second (RunTableBytes per partition) before the run
	// starts; a caller that charges map outputs for two runs at Open bounds
	// what a map output whose partition ids go backwards many times holds.
	// An error fails the map output: the batch that starts the run gets it.
	RunState func(n int64) error
	// Encryption, when set, writes Spark's IO encryption
	// (spark.io.encryption.enabled) with this key: every non-empty
	// partition of the data file is a fresh random IV followed by the
	// AES-CTR encryption of its codec streams (package iocrypt), and the
	// lengths and checksums are those of these bytes. Not with a Sink.
	Encryption *iocrypt.Key
}

// RunTableBytes is what one run holds per partition until the merge: its
// length (8 bytes) and checksum (4).
const RunTableBytes = 12

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
const MaxPartitions = shufflefile.MaxPartitions

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
	if !s.Format.Valid() {
		return fmt.Errorf("%w: map output %d/%d: unknown format %v", ErrInvalid, s.ID.Shuffle, s.ID.Map, s.Format)
	}
	if s.Layout == nil {
		return fmt.Errorf("%w: map output %d/%d: no layout", ErrInvalid, s.ID.Shuffle, s.ID.Map)
	}
	if s.Encryption != nil && s.Sink != nil {
		return fmt.Errorf("%w: map output %d/%d: encryption with a Sink", ErrInvalid, s.ID.Shuffle, s.ID.Map)
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
	enc, err := e.encoderPool(&spec)
	if err != nil {
		e.done()
		return nil, err
	}
	w := newMapWriter(e, spec, enc)
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
