package disks

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

var (
	// ErrDiskFull reports that no disk has room above its low watermark:
	// for a new map output (Reserve) or for more bytes of one (Grow).
	ErrDiskFull = errdefs.New(errdefs.ErrResourceExhausted, "disks: disk full")
	// ErrDiskFailed reports that a disk is out of rotation after I/O
	// errors, or that every disk is.
	ErrDiskFailed = errdefs.New(errdefs.ErrResourceExhausted, "disks: disk failed")
	// ErrInvalidConfig reports an unusable directory or option.
	ErrInvalidConfig = errdefs.New(errdefs.ErrInternal, "disks: invalid configuration")
	// ErrInvalidArgument reports a bad argument to a method.
	ErrInvalidArgument = errdefs.New(errdefs.ErrInternal, "disks: invalid argument")
	// ErrReleased reports a Grow after Release.
	ErrReleased = errdefs.New(errdefs.ErrInternal, "disks: reservation released")
)

// Set is the daemon's root on one or more disks. Its methods are safe for
// concurrent use.
type Set struct {
	opts     options
	disks    []*Disk
	next     atomic.Uint64 // round-robin cursor
	refusals atomic.Uint64
}

// Disk is one directory of a Set, normally the mount point (or a directory)
// of one disk.
type Disk struct {
	set *Set
	dir string
	mu  struct {
		sync.Mutex
		free, total uint64    // statfs figure
		readAt      time.Time // when free was read; zero forces a read
		// unwritten is the part of live reservations' estimates that
		// Grow has not covered yet.
		unwritten int64
		// granted counts every byte Grow admitted on this disk.
		granted int64
		// inFlight is the sum of live reservations' latest Grow, whose
		// bytes may not be written yet.
		inFlight int64
		// grantedAtRead is granted less inFlight when free was read: the
		// bytes free already shows.
		grantedAtRead int64

		full        bool
		noSpaceAt   time.Time // last ENOSPC reported
		out         bool      // out of rotation
		consecutive int       // consecutive I/O errors
		lastErr     error
		errors      uint64
		takenOut    uint64
		failedGrows uint64
	}
}

// Dir returns the disk's directory, absolute and with symbolic links
// resolved.
func (d *Disk) Dir() string { return d.dir }

// ExecutorDir returns <disk>/<app>/<executor>, the directory of the
// executor's map outputs on d, after checking both names. It creates
// nothing.
func (d *Disk) ExecutorDir(app, executor string) (string, error) {
	if err := validateApp(app); err != nil {
		return "", err
	}
	if err := shufflefile.ValidateName("executor id", executor); err != nil {
		return "", fmt.Errorf("disks: %w", err)
	}
	return filepath.Join(d.dir, app, executor), nil
}

// New returns the Set of the directories dirs. Each must be absolute; it
// is created (0750) if missing, must be a directory, and is used with its
// symbolic links resolved; no two may be the same directory or lie one
// inside another. New reads each one's free space and fails if it cannot.
func New(dirs []string, opts ...Option) (*Set, error) {
	o := options{refresh: -1}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if err := o.ensureDefaults(); err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no directories", ErrInvalidConfig)
	}
	s := &Set{opts: o}
	for _, dir := range dirs {
		resolved, err := resolveDir(o.fs, dir)
		if err != nil {
			return nil, err
		}
		for _, prev := range s.disks {
			if within(resolved, prev.dir) || within(prev.dir, resolved) {
				return nil, fmt.Errorf("%w: directory %q (resolved %s) overlaps directory %s",
					ErrInvalidConfig, dir, resolved, prev.dir)
			}
		}
		d := &Disk{set: s, dir: resolved}
		free, total, err := o.statfs(resolved)
		if err != nil {
			return nil, fmt.Errorf("disks: directory %q: %w", resolved, err)
		}
		d.mu.free, d.mu.total, d.mu.readAt = free, total, o.now()
		s.disks = append(s.disks, d)
	}
	s.warnSharedDevices()
	return s, nil
}

// resolveDir checks dir and returns it resolved, creating it if missing.
func resolveDir(fsys vfs.FS, dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%w: directory %q is not an absolute path", ErrInvalidConfig, dir)
	}
	if err := fsys.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("%w: directory %q: %w", ErrInvalidConfig, dir, err)
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("%w: directory %q: %w", ErrInvalidConfig, dir, err)
	}
	fi, err := fsys.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("%w: directory %q: %w", ErrInvalidConfig, dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: directory %q is not a directory", ErrInvalidConfig, dir)
	}
	return resolved, nil
}

// within reports whether path is dir or lies under it; both are clean.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// warnSharedDevices logs directories on one file system: each keeps its
// own ledger of the same free space, so together they may admit more than
// the space above the watermark.
func (s *Set) warnSharedDevices() {
	seen := map[uint64]string{}
	for _, d := range s.disks {
		fi, err := s.opts.fs.Stat(d.dir)
		if err != nil {
			continue
		}
		dev, ok := deviceOf(fi)
		if !ok {
			continue
		}
		if other, dup := seen[dev]; dup {
			s.opts.logger.Warn("disks: two directories on one file system share its free space; admission counts it twice",
				"dir", d.dir, "other", other)
			continue
		}
		seen[dev] = d.dir
	}
}

// Disks returns the disks in the order New was given them.
func (s *Set) Disks() []*Disk { return append([]*Disk(nil), s.disks...) }

// Disk returns the disk whose directory is dir (as given to New, or
// resolved), or nil.
func (s *Set) Disk(dir string) *Disk {
	clean := filepath.Clean(dir)
	for _, d := range s.disks {
		if d.dir == clean {
			return d
		}
	}
	if resolved, err := filepath.EvalSymlinks(clean); err == nil {
		for _, d := range s.disks {
			if d.dir == resolved {
				return d
			}
		}
	}
	return nil
}

// Reserve picks a disk for a new map output of app that expects to write
// estimate bytes (0 when unknown) and reserves them. Disks are tried round
// robin from the one after the last pick; a disk out of rotation, full
// (below the low watermark, and not yet back above the high one), or
// without estimate bytes above its low watermark is skipped.
//
// When no disk admits the reservation, the error wraps ErrDiskFull and
// names every disk with its free bytes, or wraps ErrDiskFailed when every
// disk is out of rotation or unreadable.
func (s *Set) Reserve(app string, estimate int64) (*Reservation, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if estimate < 0 {
		return nil, fmt.Errorf("%w: estimate %d is negative", ErrInvalidArgument, estimate)
	}
	n := uint64(len(s.disks))
	start := s.next.Add(1) - 1
	var reasons []string
	anyFull := false
	for i := range n {
		d := s.disks[(start+i)%n]
		r, why, full := d.reserve(app, estimate)
		if r != nil {
			return r, nil
		}
		anyFull = anyFull || full
		reasons = append(reasons, d.dir+": "+why)
	}
	s.refusals.Add(1)
	if anyFull {
		return nil, fmt.Errorf("%w: no disk has room for %d bytes of application %q: %s",
			ErrDiskFull, estimate, app, strings.Join(reasons, "; "))
	}
	return nil, fmt.Errorf("%w: no disk can take a map output of application %q: %s",
		ErrDiskFailed, app, strings.Join(reasons, "; "))
}

// reserve reserves estimate bytes on d, or says why not and whether for
// want of space.
func (d *Disk) reserve(app string, estimate int64) (r *Reservation, why string, full bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.out {
		return nil, d.outReasonLocked(), false
	}
	avail, low, high := d.figuresLocked()
	need := low + estimate // what available must reach
	held := d.noSpaceHeldLocked()
	if d.mu.full {
		need = max(high, need)
	}
	// A full disk is read again whenever asked, unless it reported ENOSPC
	// within the refresh bound.
	if d.staleLocked() || avail < need || (d.mu.full && !held) {
		if err := d.readLocked(); err != nil {
			return nil, fmt.Sprintf("statfs: %v", err), false
		}
		avail, low, high = d.figuresLocked()
	}
	if !held {
		d.updateFullLocked(avail, low, high)
	}
	if d.mu.full || avail-estimate < low {
		return nil, d.spaceReasonLocked(avail, low), true
	}
	d.mu.unwritten += estimate
	return &Reservation{d: d, app: app, estimate: estimate}, "", false
}

func (d *Disk) outReasonLocked() string {
	return fmt.Sprintf("out of rotation after %d consecutive I/O errors (last: %v)", d.mu.consecutive, d.mu.lastErr)
}

func (d *Disk) spaceReasonLocked(avail, low int64) string {
	state := ""
	if d.mu.full {
		state = ", full until back above the high watermark"
	}
	return fmt.Sprintf("%d bytes free, %d after reservations, low watermark %d%s",
		d.mu.free, avail, low, state)
}

// figuresLocked returns the available bytes and the watermarks in bytes.
func (d *Disk) figuresLocked() (avail, low, high int64) {
	pending := d.mu.unwritten + d.mu.granted - d.mu.grantedAtRead
	avail = clampInt64(d.mu.free) - pending
	low = clampInt64(d.set.opts.low.Of(d.mu.total))
	high = max(low, clampInt64(d.set.opts.high.Of(d.mu.total)))
	return avail, low, high
}

func clampInt64(v uint64) int64 { return int64(min(v, 1<<63-1)) }

// noSpaceHeldLocked reports an ENOSPC within the refresh bound: the disk
// stays full for that long whatever a fresh figure says (inodes or a
// quota may be what ran out).
func (d *Disk) noSpaceHeldLocked() bool {
	return !d.mu.noSpaceAt.IsZero() && d.set.opts.now().Sub(d.mu.noSpaceAt) <= d.set.opts.refresh
}

func (d *Disk) staleLocked() bool {
	return d.mu.readAt.IsZero() || d.set.opts.now().Sub(d.mu.readAt) > d.set.opts.refresh
}

// readLocked reads the free-space figure. The bytes of each live
// reservation's latest Grow stay pending: they may not be written yet.
func (d *Disk) readLocked() error {
	atRead := d.mu.granted - d.mu.inFlight
	free, total, err := d.set.opts.statfs(d.dir)
	if err != nil {
		d.reportLocked(err)
		return err
	}
	d.mu.free, d.mu.total = free, total
	d.mu.readAt = d.set.opts.now()
	d.mu.grantedAtRead = atRead
	return nil
}

// updateFullLocked applies the watermarks to a fresh available figure.
func (d *Disk) updateFullLocked(avail, low, high int64) {
	switch {
	case !d.mu.full && avail < low:
		d.setFullLocked(avail, low, "below the low watermark")
	case d.mu.full && avail >= high:
		d.mu.full = false
		d.set.opts.logger.Info("disks: disk back above the high watermark; admitting map outputs",
			"dir", d.dir, "available", avail, "high_watermark", high)
	}
}

func (d *Disk) setFullLocked(avail, low int64, why string) {
	if d.mu.full {
		return
	}
	d.mu.full = true
	d.set.opts.logger.Warn("disks: disk full; refusing new map outputs",
		"dir", d.dir, "reason", why, "free", d.mu.free, "available", avail, "low_watermark", low)
}

// ReportError records the outcome of a failed I/O operation on d. An I/O
// error (EIO, EROFS, ENXIO, ENODEV, EUCLEAN) counts towards taking d out
// of rotation; ENOSPC and EDQUOT make d full (for at least the refresh
// bound, whatever statfs shows) and count as no failure;
// other errors are ignored.
func (s *Set) ReportError(d *Disk, err error) {
	if d == nil || d.set != s || err == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reportLocked(err)
}

func (d *Disk) reportLocked(err error) {
	switch {
	case isFullErr(err):
		avail, low, _ := d.figuresLocked()
		d.setFullLocked(avail, low, err.Error())
		// ENOSPC is fresher than the figure: hold the disk full for the
		// refresh bound, even where the figure shows space (inodes or a
		// quota ran out).
		d.mu.noSpaceAt = d.set.opts.now()
	case isIOErr(err):
		d.mu.errors++
		d.mu.consecutive++
		d.mu.lastErr = err
		if !d.mu.out && d.mu.consecutive >= d.set.opts.maxErrors {
			d.mu.out = true
			d.mu.takenOut++
			d.set.opts.logger.Error("disks: disk taken out of rotation",
				"dir", d.dir, "consecutive_errors", d.mu.consecutive, "err", err)
		}
	}
}

// ReportSuccess records a successful I/O operation on d (a commit), which
// resets its count of consecutive errors.
func (s *Set) ReportSuccess(d *Disk) {
	if d == nil || d.set != s {
		return
	}
	d.mu.Lock()
	d.mu.consecutive = 0
	d.mu.Unlock()
}

// Restore puts the disk of dir back into rotation with its error count
// reset, and forces a fresh free-space figure.
func (s *Set) Restore(dir string) error {
	d := s.Disk(dir)
	if d == nil {
		return fmt.Errorf("%w: directory %q is not a disk of the set", ErrInvalidArgument, dir)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	was := d.mu.out
	d.mu.out = false
	d.mu.consecutive = 0
	d.mu.lastErr = nil
	d.mu.readAt = time.Time{}
	if was {
		d.set.opts.logger.Info("disks: disk restored to rotation", "dir", d.dir)
	}
	return nil
}

func isFullErr(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func isIOErr(err error) bool {
	for _, e := range ioErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// DiskStats are one disk's figures, for metrics.
type DiskStats struct {
	Dir string
	// Free and Total are the statfs figures in bytes, as last read.
	Free, Total uint64
	// Reserved is the bytes admitted that Free does not show yet.
	Reserved int64
	// InRotation is false once I/O errors took the disk out.
	InRotation bool
	// Full is true from falling below the low watermark until back above
	// the high one.
	Full bool
	// Errors counts I/O errors reported, ever.
	Errors uint64
	// TakenOut counts the times the disk left rotation.
	TakenOut uint64
	// FailedGrows counts Grow calls refused for want of space.
	FailedGrows uint64
}

// Stats returns every disk's figures, in the order of Disks. A figure
// older than the refresh bound is read again first.
func (s *Set) Stats() []DiskStats {
	out := make([]DiskStats, 0, len(s.disks))
	for _, d := range s.disks {
		d.mu.Lock()
		if d.staleLocked() && d.readLocked() == nil && !d.noSpaceHeldLocked() {
			avail, low, high := d.figuresLocked()
			d.updateFullLocked(avail, low, high)
		}
		out = append(out, DiskStats{
			Dir:         d.dir,
			Free:        d.mu.free,
			Total:       d.mu.total,
			Reserved:    d.mu.unwritten + d.mu.granted - d.mu.grantedAtRead,
			InRotation:  !d.mu.out,
			Full:        d.mu.full,
			Errors:      d.mu.errors,
			TakenOut:    d.mu.takenOut,
			FailedGrows: d.mu.failedGrows,
		})
		d.mu.Unlock()
	}
	return out
}

// Refusals returns how many Reserve calls found no disk.
func (s *Set) Refusals() uint64 { return s.refusals.Load() }

// RegistryName is the file, in the first disk's directory, where the
// daemon keeps what it must know across a restart (RegistryPath). Like
// every name the daemon keeps in a root dir, it starts with
// shufflefile.DaemonPrefix, which no application id may.
const RegistryName = shufflefile.DaemonPrefix + "shuffled-registry"

// RegistryLogName is the registry's log of changes, beside RegistryName:
// its name with RegistryLogSuffix.
const RegistryLogName = RegistryName + RegistryLogSuffix

// RegistryLogSuffix turns a registry file's name into its log's.
const RegistryLogSuffix = ".log"

// RegistryPath returns the path of the daemon's registry file.
func (s *Set) RegistryPath() string { return filepath.Join(s.disks[0].dir, RegistryName) }

// ValidateApp checks an application id: a plain name
// (shufflefile.ValidateName), which never names one of the daemon's own
// files (shufflefile.DaemonPrefix).
func ValidateApp(app string) error { return validateApp(app) }

func validateApp(app string) error {
	if err := shufflefile.ValidateName("application id", app); err != nil {
		return fmt.Errorf("disks: %w", err)
	}
	return nil
}

// notExist reports an error that means the file or directory is gone.
func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
