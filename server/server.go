package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/ingest"
	"github.com/shuffled/shuffled/internal/accept"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
	"golang.org/x/sync/semaphore"
)

// Server is the daemon. Create it with New, hand it listeners with Serve,
// and stop it with Shutdown.
type Server struct {
	cfg      Config
	log      *slog.Logger
	metrics  *metrics.Metrics
	fs       vfs.FS
	eng      *writer.Engine
	planes   *ingest.Planes // the data planes batches arrive on
	codec    codec.Kind
	checksum checksum.Algorithm
	disks    *disks.Set // the daemon's own root, one dir per disk
	roots    []string   // allowed roots for Spark local dirs, resolved
	diskOpts []disks.Option
	// locks is the table of map-output locks that the writer's commits and
	// every removal (root and Spark local dirs) share.
	locks *shufflefile.Locks
	stop  chan struct{}  // closed by Shutdown: background loops end
	loops sync.WaitGroup // background loops

	sessions sync.WaitGroup
	// frames is Config.FrameMemory: the payloads of the frames the
	// connections are reading or applying.
	frames *semaphore.Weighted
	// frameReadTimeout bounds how long an admitted frame's payload may
	// take to arrive (defaultFrameReadTimeout; tests shorten it).
	frameReadTimeout time.Duration

	// commits and aborts count map outputs committed and aborted since
	// start (StatsResult commits_total, aborts_total).
	commits, aborts atomic.Int64
	// Commits whose last batch was marked LAST, and those of them merged
	// from that batch on (StatsResult marked_commits_total,
	// early_merges_total).
	markedCommits, earlyMerges atomic.Int64

	refusalLog refusalLog // rate-limits the WARN lines of refusals; its own lock

	apps    *registry    // applications, owners, local dir claims; its own lock
	persist *persistence // the registry's file

	keys ioKeys // IO encryption keys, in memory only

	serving serving // the block server and what it serves (serving.go)

	mu struct {
		sync.Mutex
		listeners accept.Listeners
		sessions  map[*session]struct{}
		perUID    map[uint32]int                 // sessions by peer uid
		uidFrames map[uint32]*semaphore.Weighted // each uid's share of frames, while it has sessions
		uidMemfds map[uint32]*ingest.MemfdBudget // each uid's budget of cached memfd mappings, likewise
		open      int                            // map outputs open, all sessions
		admitted  int                            // map outputs admitted (admitOutput), all sessions
		state     int64                          // partition-state bytes charged by admitted map outputs
		// uidAdmitted and uidState are admitted and state by the peer uid
		// of the map outputs' connections (entries of 0 deleted).
		uidAdmitted map[uint32]int
		uidState    map[uint32]int64
		outputs     map[string]map[*output]struct{} // open map outputs by application
		// removing counts the removals in progress by application and
		// shuffle (-1: the whole application): a map output of one opens
		// aborted (beginRemoval). opening counts the Opens of each
		// application between admitOutput and their end (openEnded), which
		// make directories; a removal waits for them (opened, a condition
		// on the lock).
		removing map[string]map[int32]int
		opening  map[string]int
		opened   *sync.Cond
		idle     chan struct{} // closed when open reaches 0 while draining
		draining bool
	}
}

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithMetrics sets the metrics the server updates (default: its own).
func WithMetrics(m *metrics.Metrics) Option { return func(s *Server) { s.metrics = m } }

// WithDiskOptions adds options to the set of root disks (tests fake
// statfs with disks.WithStatfs).
func WithDiskOptions(opts ...disks.Option) Option {
	return func(s *Server) { s.diskOpts = append(s.diskOpts, opts...) }
}

// WithFS sets the file system of every shuffle file (default the OS's).
func WithFS(fsys vfs.FS) Option { return func(s *Server) { s.fs = fsys } }

// New validates cfg, sweeps temp files a crash left under the daemon's root
// and starts the writer engine. Nothing is primed: the first map output
// pays for whatever it allocates.
func New(cfg Config, opts ...Option) (*Server, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: slog.Default(), fs: vfs.Default, frameReadTimeout: defaultFrameReadTimeout}
	for _, o := range opts {
		o(s)
	}
	if s.metrics == nil {
		s.metrics = metrics.New()
	}
	codes := make([]string, 0, 16)
	for _, c := range protocol.Codes() {
		codes = append(codes, c.String())
	}
	s.metrics.ExportCodes(codes)
	var err error
	if s.codec, err = codec.Parse(cfg.DefaultCodec); err != nil {
		return nil, fmt.Errorf("server: --codec: %w", err)
	}
	if s.checksum, err = checksum.Parse(cfg.DefaultChecksum); err != nil {
		return nil, fmt.Errorf("server: --checksum: %w", err)
	}
	low, err := disks.ParseWatermark(cfg.DiskLowWatermark)
	if err != nil {
		return nil, fmt.Errorf("server: --disk-low-watermark: %w", err)
	}
	s.locks = new(shufflefile.Locks)
	diskOpts := []disks.Option{disks.WithLowWatermark(low), disks.WithLogger(s.log), disks.WithFS(s.fs), disks.WithLocks(s.locks)}
	if cfg.DiskHighWatermark != "" {
		high, err := disks.ParseWatermark(cfg.DiskHighWatermark)
		if err != nil {
			return nil, fmt.Errorf("server: --disk-high-watermark: %w", err)
		}
		diskOpts = append(diskOpts, disks.WithHighWatermark(high))
	}
	if s.disks, err = disks.New(cfg.RootDirs(), append(diskOpts, s.diskOpts...)...); err != nil {
		return nil, fmt.Errorf("server: --root: %w", err)
	}
	for _, r := range cfg.AllowedRoots {
		resolved, err := filepath.EvalSymlinks(r)
		if err != nil {
			return nil, fmt.Errorf("server: --allowed-roots %s: %w", r, err)
		}
		s.roots = append(s.roots, resolved)
	}
	s.apps = newRegistry()
	s.persist = &persistence{fs: s.fs, path: s.disks.RegistryPath(), sync: cfg.Sync}
	if err := s.loadRegistry(); err != nil {
		// A registry file read but unusable: the owners it names would be
		// lost, so the daemon does not start on it; an operator repairs
		// it or moves it aside. An I/O error (a failing first disk) is
		// logged: the file is kept, never replaced, and applications in
		// the root stay root's and the daemon's only.
		if registryDamaged(err) {
			return nil, fmt.Errorf("server: %w (the registry file names every application's owner: repair it, or move it aside to start without it, after which applications in the root are root's and the daemon's only)", err)
		}
		s.log.Error("reading the registry; what it names is not known until a restart on a readable file, and nothing registered is persisted", "path", s.persist.path, "err", err)
	}
	if n, err := s.disks.SweepTemps(); err != nil {
		return nil, fmt.Errorf("server: sweep %s: %w", cfg.Root, err)
	} else if n > 0 {
		s.log.Info("removed temp files left by an earlier run", "root", cfg.Root, "files", n)
	}
	s.eng, err = writer.New(
		writer.WithFS(s.fs),
		writer.WithLocks(s.locks),
		writer.WithLimit(cfg.LimitBytes),
		writer.WithWorkers(cfg.PoolSize),
		writer.WithBlockSize(cfg.BlockSize),
		writer.WithSync(cfg.Sync),
		writer.WithFileMode(cfg.FileMode),
	)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	lim := s.eng.Limiter()
	s.planes = ingest.New(ingest.Config{Log: s.log, Limiter: lim, NoCUDACompress: cfg.NoCUDACompress, CUDAStagingPrime: cfg.CUDAStagingPrime, CUDACompressSlots: cfg.CUDACompressSlots, MemfdIdleGrace: cfg.MemfdIdleGrace})
	if err := s.planes.Prime(); err != nil {
		s.planes.Close()
		s.eng.Close()
		return nil, err
	}
	s.metrics.LimiterLimitBytes.Set(float64(lim.Limit()))
	s.metrics.WatchLimiter(func() (int64, int64) {
		st := lim.Stats()
		return st.InFlight, st.Peak
	})
	s.mu.sessions = make(map[*session]struct{})
	s.mu.perUID = make(map[uint32]int)
	s.mu.uidFrames = make(map[uint32]*semaphore.Weighted)
	s.mu.uidMemfds = make(map[uint32]*ingest.MemfdBudget)
	s.frames = semaphore.NewWeighted(s.cfg.FrameMemory)
	s.mu.outputs = make(map[string]map[*output]struct{})
	s.mu.removing = make(map[string]map[int32]int)
	s.mu.opening = make(map[string]int)
	s.mu.uidAdmitted = make(map[uint32]int)
	s.mu.uidState = make(map[uint32]int64)
	s.mu.opened = sync.NewCond(&s.mu.Mutex)
	s.stop = make(chan struct{})
	if err := s.startServing(); err != nil {
		s.planes.Close()
		s.eng.Close()
		return nil, err
	}
	s.loops.Add(1)
	go s.housekeeping()
	return s, nil
}

// Engine returns the writer engine (its limiter's figures, for reports).
func (s *Server) Engine() *writer.Engine { return s.eng }

// Metrics returns the metrics the server updates.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// Serve accepts connections on ln until ln is closed or Shutdown is called;
// then it returns nil. It may be called for several listeners.
func (s *Server) Serve(ln net.Listener) error {
	err := accept.Serve(ln, accept.Loop{
		Mu:        &s.mu,
		Listeners: &s.mu.listeners,
		Closed:    func() bool { return s.mu.draining },
		Warn:      func(err error) { s.log.Warn("accept", "err", err) },
		Handle: func(conn net.Conn) {
			uc, ok := conn.(*net.UnixConn)
			if !ok {
				conn.Close()
				return
			}
			if sess := s.newSession(uc); sess != nil {
				go sess.serve()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("server: accept: %w", err)
	}
	return nil
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.draining
}

// admitOutput charges a map output about to open against the daemon's
// bounds: MaxOpenOutputs outputs and PartitionStateLimit bytes of
// per-partition state. It refuses (ResourceExhausted) rather than wait:
// Open runs on the connection's reader. It returns errRemoving, admitting
// nothing, while a removal of the map output's shuffle or application
// runs. An admitted Open counts as opening until openEnded.
func (s *Server) admitOutput(o *output) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.mu.removing[o.app]; r[o.id.Shuffle] > 0 || r[-1] > 0 {
		return fmt.Errorf("%w: map output %d/%d of application %q: a removal of its shuffle or application is in progress",
			errRemoving, o.id.Shuffle, o.id.Map, o.app)
	}
	// A removal ends the registrations before its end takes s.mu: an Open
	// admitted after it sees that its registration ended.
	if o.reg != nil && o.reg.ended.Load() {
		return endedError(o.reg)
	}
	if s.mu.admitted >= s.cfg.MaxOpenOutputs {
		return fmt.Errorf("%w: %d map outputs open daemon-wide, the most --max-open-outputs allows", errdefs.ErrResourceExhausted, s.mu.admitted)
	}
	if n, limit := s.mu.uidAdmitted[o.uid], s.cfg.uidOutputLimit(); n >= limit {
		return fmt.Errorf("%w: %d map outputs open from uid %d, the most --max-open-outputs-per-uid (%d) allows", errdefs.ErrResourceExhausted, n, o.uid, limit)
	}
	if s.mu.state+o.state > s.cfg.PartitionStateLimit {
		return fmt.Errorf("%w: OpenMapOutput.num_partitions %d needs %d bytes of partition state; %d of --partition-state-limit %d are held by open map outputs",
			errdefs.ErrResourceExhausted, o.state/PartitionStateBytes, o.state, s.mu.state, s.cfg.PartitionStateLimit)
	}
	if held, limit := s.mu.uidState[o.uid], s.cfg.uidStateLimit(); held+o.state > limit {
		return fmt.Errorf("%w: OpenMapOutput.num_partitions %d needs %d bytes of partition state; %d of uid %d's share, --partition-state-limit-per-uid %d, are held by its open map outputs",
			errdefs.ErrResourceExhausted, o.state/PartitionStateBytes, o.state, held, o.uid, limit)
	}
	s.mu.admitted++
	s.mu.state += o.state
	s.mu.uidAdmitted[o.uid]++
	s.mu.uidState[o.uid] += o.state
	s.mu.opening[o.app]++
	return nil
}

// openEnded ends an Open that admitOutput admitted, opened or not.
func (s *Server) openEnded(app string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.opening[app]--; s.mu.opening[app] <= 0 {
		delete(s.mu.opening, app)
		s.mu.opened.Broadcast()
	}
}

// chargeRun charges a run after the map output's second, n bytes of
// per-partition tables, to the partition state (refused, ResourceExhausted,
// past PartitionStateLimit); releaseOutput gives it back with the rest.
// It runs on the connection's reader, inside the Batch that starts the run.
func (s *Server) chargeRun(o *output, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.state+n > s.cfg.PartitionStateLimit {
		return fmt.Errorf("%w: a new run (partition ids went backwards) needs %d bytes of partition state (%d partitions × %d); %d of --partition-state-limit %d are held by open map outputs",
			errdefs.ErrResourceExhausted, n, n/writer.RunTableBytes, writer.RunTableBytes, s.mu.state, s.cfg.PartitionStateLimit)
	}
	if held, limit := s.mu.uidState[o.uid], s.cfg.uidStateLimit(); held+n > limit {
		return fmt.Errorf("%w: a new run (partition ids went backwards) needs %d bytes of partition state (%d partitions × %d); %d of uid %d's share, --partition-state-limit-per-uid %d, are held by its open map outputs",
			errdefs.ErrResourceExhausted, n, n/writer.RunTableBytes, writer.RunTableBytes, held, o.uid, limit)
	}
	s.mu.state += n
	s.mu.uidState[o.uid] += n
	o.state += n
	return nil
}

// releaseOutput gives back what admitOutput and chargeRun charged.
func (s *Server) releaseOutput(o *output) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.admitted--
	s.mu.state -= o.state
	if s.mu.uidAdmitted[o.uid]--; s.mu.uidAdmitted[o.uid] <= 0 {
		delete(s.mu.uidAdmitted, o.uid)
	}
	if s.mu.uidState[o.uid] -= o.state; s.mu.uidState[o.uid] <= 0 {
		delete(s.mu.uidState, o.uid)
	}
}

// outputOpened counts a map output as open; it refuses while draining.
func (s *Server) outputOpened(o *output) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.draining {
		return fmt.Errorf("%w: no new map outputs", errUnavailable)
	}
	s.mu.open++
	byApp := s.mu.outputs[o.app]
	if byApp == nil {
		byApp = make(map[*output]struct{})
		s.mu.outputs[o.app] = byApp
	}
	byApp[o] = struct{}{}
	s.metrics.OpenMapOutputs.Set(float64(s.mu.open))
	return nil
}

// beginRemoval starts a removal of app's shuffle (of the whole
// application when shuffle is -1): until end is called, a map output of it
// opens aborted (admitOutput). It waits for the Opens of app in progress
// and returns the map outputs of it open then, which the removal aborts
// and waits for before it lists the files: so no map output of it makes a
// file or directory while the removal runs.
func (s *Server) beginRemoval(app string, shuffle int32) (open []*output, end func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mu.removing[app]
	if r == nil {
		r = make(map[int32]int)
		s.mu.removing[app] = r
	}
	r[shuffle]++
	for s.mu.opening[app] > 0 { // they make directories; later ones are refused
		s.mu.opened.Wait()
	}
	for o := range s.mu.outputs[app] {
		if shuffle < 0 || o.id.Shuffle == shuffle {
			open = append(open, o)
		}
	}
	return open, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r[shuffle]--; r[shuffle] == 0 {
			delete(r, shuffle)
		}
		if len(r) == 0 {
			delete(s.mu.removing, app)
		}
	}
}

// outputEnded counts a map output as committed or aborted.
func (s *Server) outputEnded(o *output) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.open--
	if byApp := s.mu.outputs[o.app]; byApp != nil {
		delete(byApp, o)
		if len(byApp) == 0 {
			delete(s.mu.outputs, o.app)
		}
	}
	s.metrics.OpenMapOutputs.Set(float64(s.mu.open))
	if s.mu.open == 0 && s.mu.idle != nil {
		close(s.mu.idle)
		s.mu.idle = nil
	}
}

// Shutdown drains the daemon: it stops accepting connections and new map
// outputs, lets open map outputs finish (and their commits send their
// results) until ctx ends, then closes every connection (aborting what is
// still open), waits for the sessions, and stops the engine. It returns
// how many map outputs the deadline aborted as an error, or nil.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopServing() // reducers get no more blocks from a daemon that stops
	s.mu.Lock()
	if !s.mu.draining {
		close(s.stop)
	}
	s.mu.draining = true
	s.mu.listeners.CloseAll()
	var idle chan struct{}
	if s.mu.open > 0 {
		if s.mu.idle == nil {
			s.mu.idle = make(chan struct{})
		}
		idle = s.mu.idle
	}
	s.mu.Unlock()

	var aborted int
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			s.mu.Lock()
			aborted = s.mu.open
			s.mu.Unlock()
		}
	}
	if aborted == 0 {
		// Every map output has ended, but a commit ends its map output
		// before it sends the result (see session.commit): let the
		// results go out before the connections close.
		s.mu.Lock()
		sessions := make([]*session, 0, len(s.mu.sessions))
		for sess := range s.mu.sessions {
			sessions = append(sessions, sess)
		}
		s.mu.Unlock()
		replied := make(chan struct{})
		go func() {
			for _, sess := range sessions {
				sess.commits.Wait()
			}
			close(replied)
		}()
		select {
		case <-replied:
		case <-ctx.Done():
		}
	}
	why := fmt.Errorf("%w: it stops now; connect again to its next start", errUnavailable)
	if aborted > 0 {
		why = fmt.Errorf("%w: its drain deadline passed and it stops now: any map output still open on this connection is aborted", errUnavailable)
	}
	s.mu.Lock()
	for sess := range s.mu.sessions {
		go sess.closeWith(why)
	}
	s.mu.Unlock()
	s.sessions.Wait()
	s.loops.Wait()
	s.persist.close()
	err := s.eng.Close()
	if perr := s.planes.Close(); err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if aborted > 0 {
		return fmt.Errorf("server: drain deadline passed: aborted %d open map outputs", aborted)
	}
	return nil
}

// peakRSS returns the process's peak resident set in bytes (0 if unknown).
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}
