package writer

import (
	"fmt"
	"io/fs"
	"runtime"

	"github.com/shuffled/shuffled/limiter"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// Defaults for an Engine.
const (
	// DefaultLimit is the bytes-in-flight limit when neither WithLimit nor
	// WithLimiter is given; the daemon's --limit defaults to it too.
	DefaultLimit = 512 << 20
	// DefaultRecordSize is the largest record the writer makes when it splits
	// a big partition slice; it bounds the memory of one unit of work.
	DefaultRecordSize = 1 << 20
	// DefaultBlockSize is Spark's spark.io.compression.{lz4,snappy}.blockSize.
	DefaultBlockSize = 32 << 10
	// DefaultFileMode is shufflefile.DefaultFileMode.
	DefaultFileMode fs.FileMode = shufflefile.DefaultFileMode
	// runBufferSize is the write buffer of one run file.
	runBufferSize = 256 << 10
)

type options struct {
	fs         vfs.FS
	lim        *limiter.Limiter
	limit      int64
	workers    int
	recordSize int
	blockSize  int
	zstdLevel  int
	sync       bool
	fileMode   fs.FileMode
	locks      *shufflefile.Locks
}

// Option configures an Engine.
type Option func(*options) error

// WithFS sets the file system every file goes through (default vfs.Default).
func WithFS(fsys vfs.FS) Option {
	return func(o *options) error {
		if fsys == nil {
			return fmt.Errorf("writer: WithFS: nil file system")
		}
		o.fs = fsys
		return nil
	}
}

// WithLocks sets the table of map-output locks the commits take, which
// the removals of the same directories must share (the daemon's one);
// default a table of the Engine's own.
func WithLocks(l *shufflefile.Locks) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("writer: WithLocks: nil lock table")
		}
		o.locks = l
		return nil
	}
}

// WithLimiter shares an existing limiter (one per daemon).
func WithLimiter(l *limiter.Limiter) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("writer: WithLimiter: nil limiter")
		}
		o.lim = l
		return nil
	}
}

// WithLimit sets the bytes-in-flight limit of a limiter the Engine creates.
func WithLimit(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("writer: WithLimit: limit must be > 0, got %d", n)
		}
		o.limit = n
		return nil
	}
}

// WithWorkers sets the number of encoding workers (default GOMAXPROCS).
func WithWorkers(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("writer: WithWorkers: workers must be > 0, got %d", n)
		}
		o.workers = n
		return nil
	}
}

// WithRecordSize sets the size at which big partition slices are split into
// several records (default 1 MiB).
func WithRecordSize(n int) Option {
	return func(o *options) error {
		if n < 1<<10 || n > 64<<20 {
			return fmt.Errorf("writer: WithRecordSize: size must be in [1KiB, 64MiB], got %d", n)
		}
		o.recordSize = n
		return nil
	}
}

// WithBlockSize sets the lz4 and snappy block size (default 32 KiB).
func WithBlockSize(n int) Option {
	return func(o *options) error {
		if n < 64 || n > 32<<20 {
			return fmt.Errorf("writer: WithBlockSize: size must be in [64, 32MiB], got %d", n)
		}
		o.blockSize = n
		return nil
	}
}

// WithZstdLevel sets the zstd level (default 1, as Spark).
func WithZstdLevel(level int) Option {
	return func(o *options) error {
		if level < 1 || level > 22 {
			return fmt.Errorf("writer: WithZstdLevel: level must be in [1, 22], got %d", level)
		}
		o.zstdLevel = level
		return nil
	}
}

// WithSync makes Commit fsync the data, index and checksum files before
// renaming them, and the directory after. Without it (Spark's behaviour) the
// commit is still atomic against a crash of the process, not of the machine.
func WithSync(sync bool) Option {
	return func(o *options) error {
		o.sync = sync
		return nil
	}
}

// WithFileMode sets the permission bits of committed files (default 0640).
func WithFileMode(mode fs.FileMode) Option {
	return func(o *options) error {
		if mode&^fs.ModePerm != 0 || mode&0o600 != 0o600 {
			return fmt.Errorf("writer: WithFileMode: mode must be permission bits including 0600, got %#o", mode)
		}
		o.fileMode = mode
		return nil
	}
}

func defaultOptions() options {
	return options{
		fs:         vfs.Default,
		limit:      DefaultLimit,
		workers:    runtime.GOMAXPROCS(0),
		recordSize: DefaultRecordSize,
		blockSize:  DefaultBlockSize,
		zstdLevel:  1,
		fileMode:   DefaultFileMode,
	}
}
