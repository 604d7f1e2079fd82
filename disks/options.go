package disks

import (
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// Watermark is a free-space threshold: a number of bytes, or a fraction of
// each disk's total size. The zero Watermark is 0 bytes.
type Watermark struct {
	bytes    uint64
	fraction float64
	isFrac   bool
}

// Bytes returns the watermark of n bytes of free space.
func Bytes(n uint64) Watermark { return Watermark{bytes: n} }

// Fraction returns the watermark of f (0 ≤ f ≤ 1) of each disk's total
// size. New rejects other values.
func Fraction(f float64) Watermark { return Watermark{fraction: f, isFrac: true} }

// Of returns the watermark in bytes for a disk of total bytes.
func (w Watermark) Of(total uint64) uint64 {
	if !w.isFrac {
		return w.bytes
	}
	return uint64(w.fraction * float64(total))
}

func (w Watermark) validate(field string) error {
	if w.isFrac && !(w.fraction >= 0 && w.fraction <= 1) {
		return fmt.Errorf("%w: %s fraction %v is outside [0, 1]", ErrInvalidConfig, field, w.fraction)
	}
	return nil
}

// String formats w as ParseWatermark reads it: "5%" or a byte count with
// the largest binary unit that divides it ("512MiB", "1000").
func (w Watermark) String() string {
	if w.isFrac {
		return strconv.FormatFloat(w.fraction*100, 'g', -1, 64) + "%"
	}
	n := w.bytes
	for _, u := range byteUnits {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatUint(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatUint(n, 10)
}

// Set parses s into w (ParseWatermark), so that a *Watermark is a
// flag.Value.
func (w *Watermark) Set(s string) error {
	v, err := ParseWatermark(s)
	if err != nil {
		return err
	}
	*w = v
	return nil
}

var byteUnits = []struct {
	name string
	size uint64
}{
	{"TiB", 1 << 40},
	{"GiB", 1 << 30},
	{"MiB", 1 << 20},
	{"KiB", 1 << 10},
}

var unitSizes = map[string]uint64{
	"": 1, "B": 1,
	"K": 1 << 10, "KiB": 1 << 10,
	"M": 1 << 20, "MiB": 1 << 20,
	"G": 1 << 30, "GiB": 1 << 30,
	"T": 1 << 40, "TiB": 1 << 40,
}

// ParseWatermark reads a watermark: a percentage of the disk's size ("5%",
// "2.5%"), or a byte count with an optional binary unit: "1073741824",
// "512MiB", "1GiB", "1G", "10B" (K, M, G and T mean KiB, MiB, GiB and
// TiB).
func ParseWatermark(s string) (Watermark, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(f >= 0 && f <= 100) {
			return Watermark{}, fmt.Errorf("%w: watermark %q: percentage must be a number in [0, 100]", ErrInvalidConfig, s)
		}
		return Fraction(f / 100), nil
	}
	i := strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	mult, ok := unitSizes[unit]
	if !ok {
		return Watermark{}, fmt.Errorf("%w: watermark %q: unknown unit %q", ErrInvalidConfig, s, unit)
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return Watermark{}, fmt.Errorf("%w: watermark %q: not a byte count or percentage", ErrInvalidConfig, s)
	}
	if n > math.MaxUint64/mult {
		return Watermark{}, fmt.Errorf("%w: watermark %q overflows 64 bits", ErrInvalidConfig, s)
	}
	return Bytes(n * mult), nil
}

// Defaults.
const (
	// DefaultMaxErrors is the number of consecutive I/O errors that take a
	// disk out of rotation.
	DefaultMaxErrors = 3
	// DefaultRefresh bounds the age of a disk's free-space figure.
	DefaultRefresh = 500 * time.Millisecond
)

// DefaultLowWatermarkBytes is the low watermark when none is set:
// Bytes(DefaultLowWatermarkBytes) of free space. The high watermark, when
// none is set, is twice the low one (twice the bytes, or twice the
// fraction up to 1).
const DefaultLowWatermarkBytes = 1 << 30

// StatfsFunc reports the free bytes available to the daemon and the total
// bytes of the file system holding dir.
type StatfsFunc func(dir string) (free, total uint64, err error)

type options struct {
	low, high *Watermark
	statfs    StatfsFunc
	now       func() time.Time
	maxErrors int
	refresh   time.Duration
	logger    *slog.Logger
	fs        vfs.FS
	locks     *shufflefile.Locks
}

// Option configures a Set.
type Option func(*options) error

// WithLowWatermark sets the low watermark: a disk whose available space
// falls below it refuses new map outputs, and in-flight writes that would
// go below it fail.
func WithLowWatermark(w Watermark) Option {
	return func(o *options) error {
		if err := w.validate("low watermark"); err != nil {
			return err
		}
		o.low = &w
		return nil
	}
}

// WithHighWatermark sets the high watermark: a full disk admits new map
// outputs again once its available space is at or above it. Where it is
// below the low watermark (a fraction against bytes on a small disk), the
// low watermark serves as both.
func WithHighWatermark(w Watermark) Option {
	return func(o *options) error {
		if err := w.validate("high watermark"); err != nil {
			return err
		}
		o.high = &w
		return nil
	}
}

// WithStatfs replaces the statfs call (for tests).
func WithStatfs(f StatfsFunc) Option {
	return func(o *options) error {
		if f == nil {
			return fmt.Errorf("%w: statfs function is nil", ErrInvalidConfig)
		}
		o.statfs = f
		return nil
	}
}

// WithClock replaces time.Now, which dates free-space figures (for tests).
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return fmt.Errorf("%w: clock is nil", ErrInvalidConfig)
		}
		o.now = now
		return nil
	}
}

// WithMaxErrors sets how many consecutive I/O errors take a disk out of
// rotation (n ≥ 1; default DefaultMaxErrors).
func WithMaxErrors(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: max errors %d is below 1", ErrInvalidConfig, n)
		}
		o.maxErrors = n
		return nil
	}
}

// WithRefresh bounds the age of a disk's free-space figure: an older one is
// read again before it is used (d ≥ 0; 0 reads statfs for every decision;
// default DefaultRefresh).
func WithRefresh(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: refresh %v is negative", ErrInvalidConfig, d)
		}
		o.refresh = d
		return nil
	}
}

// WithLogger logs disks leaving and rejoining rotation and crossing the
// watermarks (default: no logging).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: logger is nil", ErrInvalidConfig)
		}
		o.logger = l
		return nil
	}
}

// WithFS sets the file system of the lifecycle operations (for tests;
// default vfs.Default). Free space always comes from the statfs function.
func WithFS(fsys vfs.FS) Option {
	return func(o *options) error {
		if fsys == nil {
			return fmt.Errorf("%w: file system is nil", ErrInvalidConfig)
		}
		o.fs = fsys
		return nil
	}
}

// WithLocks sets the table of map-output locks the removals take, the one
// the commits into the same directories take (the daemon's); default a
// table of the Set's own.
func WithLocks(l *shufflefile.Locks) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: lock table is nil", ErrInvalidConfig)
		}
		o.locks = l
		return nil
	}
}

func (o *options) ensureDefaults() error {
	if o.locks == nil {
		o.locks = new(shufflefile.Locks)
	}
	if o.low == nil {
		low := Bytes(DefaultLowWatermarkBytes)
		o.low = &low
	}
	if o.high == nil {
		high := *o.low
		if high.isFrac {
			high.fraction = min(2*high.fraction, 1)
		} else if high.bytes <= math.MaxUint64/2 {
			high.bytes *= 2
		}
		o.high = &high
	}
	if o.low.isFrac == o.high.isFrac && o.high.Of(1<<62) < o.low.Of(1<<62) {
		return fmt.Errorf("%w: high watermark %v is below low watermark %v", ErrInvalidConfig, o.high, o.low)
	}
	if o.statfs == nil {
		o.statfs = statfs
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.maxErrors == 0 {
		o.maxErrors = DefaultMaxErrors
	}
	if o.refresh < 0 {
		o.refresh = DefaultRefresh
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.fs == nil {
		o.fs = vfs.Default
	}
	return nil
}
