package server

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/shuffled/shuffled/blockserver"
	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
)

// serving is the daemon's side of the block server (package blockserver):
// the applications it serves, with their authentication secrets, and the
// Spark local dirs each executor registered. All of it is in memory only:
// a restart forgets it, and an application is served again once one of
// its executors registers with the auth tail (feature bit 7). So an
// application with a secret is never served without it: after a restart,
// the daemon does not know it had one, and serves it to nobody until it
// knows again.
type serving struct {
	srv       *blockserver.Server // nil when --serve-addr is empty
	host      string              // the host executors publish
	port      int32
	handshake blockserver.NewHandshake // authentication; set before New's listener starts (WithHandshake)

	mu   sync.Mutex
	apps map[string]*servedApp
}

// servedApp is one application the daemon serves: registered with the
// auth tail since the daemon started.
type servedApp struct {
	uid    uint32
	secret []byte // nil: none; never in a log, metric, error or file
	// execs are the Spark local dirs its executors registered (those
	// writing into the daemon's root have none here).
	execs map[string]shufflefile.SparkHashed
}

// maxServedExecs bounds the executors recorded per application; past it
// an executor's local dirs are found by searching every set the registry
// holds for the application.
const maxServedExecs = 1 << 16

// WithHandshake replaces the authentication the block server runs (by
// default Spark's own, package sparkauth: sparkHandshake), for tests.
func WithHandshake(h blockserver.NewHandshake) Option {
	return func(s *Server) { s.serving.handshake = h }
}

// startServing starts the block server when --serve-addr is set.
func (s *Server) startServing() error {
	s.serving.apps = map[string]*servedApp{}
	if s.cfg.Serve.Addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Serve.Addr)
	if err != nil {
		return fmt.Errorf("server: --serve-addr: %w", err)
	}
	host, port, err := advertise(s.cfg.Serve, ln.Addr())
	if err != nil {
		ln.Close()
		return err
	}
	handshake := s.serving.handshake
	if handshake == nil {
		handshake = sparkHandshake
	}
	srv, err := blockserver.New(blockserver.Config{
		Store:       (*servingStore)(s),
		Handshake:   handshake,
		RequireAuth: s.cfg.Serve.RequireAuth,
		Metrics:     s.metrics.Serving,
		Log:         s.log,
	})
	if err != nil {
		ln.Close()
		return fmt.Errorf("server: %w", err)
	}
	s.serving.srv, s.serving.host, s.serving.port = srv, host, port
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		if err := srv.Serve(ln); err != nil {
			s.log.Error("block server stopped", "err", err)
		}
	}()
	s.log.Info("serving map outputs", "addr", ln.Addr().String(), "advertise", net.JoinHostPort(host, strconv.Itoa(int(port))),
		"require_auth", s.cfg.Serve.RequireAuth)
	return nil
}

// stopServing closes the block server's listener and connections.
func (s *Server) stopServing() {
	if s.serving.srv != nil {
		s.serving.srv.Close()
	}
}

// ServeAddr returns the host and port executors publish, "" and 0 when
// the daemon does not serve.
func (s *Server) ServeAddr() (string, int) { return s.serving.host, int(s.serving.port) }

// advertise returns the host and port executors publish for a listener at
// addr: --serve-advertise-host, else the listener's host when it is not
// unspecified, else the host name.
func advertise(c ServeConfig, addr net.Addr) (string, int32, error) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return "", 0, fmt.Errorf("server: --serve-addr: listening on %v, not TCP", addr)
	}
	host := c.AdvertiseHost
	if host == "" && !ta.IP.IsUnspecified() {
		host = ta.IP.String()
	}
	if host == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return "", 0, fmt.Errorf("server: --serve-addr %s listens on every address and the host name is unknown (%v): set --serve-advertise-host", c.Addr, err)
		}
		host = h
	}
	return host, int32(ta.Port), nil
}

// serveInfo is Registered's serve tail.
func (s *Server) serveInfo() *protocol.ServeInfo {
	if s.serving.srv == nil {
		return &protocol.ServeInfo{}
	}
	si := &protocol.ServeInfo{Host: s.serving.host, Port: s.serving.port}
	if s.cfg.Serve.RequireAuth {
		si.Flags |= protocol.ServeRequireAuth
	}
	return si
}

// bindServing records a registration with the auth tail: the application
// is served from now on, with its secret (one per application: another
// while it is held is refused, naming the field, never the bytes), and the
// executor's local dirs (hashed nil: the daemon's root). It takes the
// secret's bytes (the caller's copy is cleared).
func (s *Server) bindServing(app, exec string, uid uint32, secret protocol.Secret, hashed *shufflefile.SparkHashed) error {
	defer secret.Clear()
	sv := &s.serving
	sv.mu.Lock()
	defer sv.mu.Unlock()
	a := sv.apps[app]
	if a == nil {
		a = &servedApp{uid: uid, execs: map[string]shufflefile.SparkHashed{}}
		if len(secret) > 0 {
			a.secret = append([]byte(nil), secret...)
		}
		sv.apps[app] = a
	} else if a.uid != uid || len(a.secret) != len(secret) || subtle.ConstantTimeCompare(a.secret, secret) != 1 {
		return fmt.Errorf("%w: RegisterExecutor.auth_secret: not the secret other executors of application %q registered (one secret per application, none being one)", errdefs.ErrInvalidArgument, app)
	}
	if hashed != nil {
		if _, ok := a.execs[exec]; ok || len(a.execs) < maxServedExecs {
			a.execs[exec] = *hashed
		}
	}
	return nil
}

// forgetServing forgets app (RemoveApplication): its secret and executors;
// nothing of it is served until it registers again.
func (s *Server) forgetServing(app string) {
	s.serving.mu.Lock()
	defer s.serving.mu.Unlock()
	if a := s.serving.apps[app]; a != nil {
		clear(a.secret)
		delete(s.serving.apps, app)
	}
}

// servedApp returns app's entry: its uid and the local dirs of exec
// (ok false when exec registered none).
func (s *Server) servedExec(app, exec string) (uid uint32, l shufflefile.SparkHashed, hashed bool, err error) {
	s.serving.mu.Lock()
	defer s.serving.mu.Unlock()
	a := s.serving.apps[app]
	if a == nil {
		return 0, l, false, fmt.Errorf("%w: application %q has not registered with this daemon since it started (a restart forgets what the daemon serves, secrets included); its map outputs are served again once one of its executors registers", blockserver.ErrUnknownExecutor, app)
	}
	l, hashed = a.execs[exec]
	return a.uid, l, hashed, nil
}

// servingStore is the Server as the block server's Store.
type servingStore Server

var _ blockserver.Store = (*servingStore)(nil)

func (st *servingStore) Secret(app string) ([]byte, bool) {
	s := (*Server)(st)
	s.serving.mu.Lock()
	defer s.serving.mu.Unlock()
	if a := s.serving.apps[app]; a != nil && a.secret != nil {
		return append([]byte(nil), a.secret...), true
	}
	return nil, false
}

// Executor opens where exec's committed map outputs are: the Spark local
// dirs it registered, or its directory on each disk of the daemon's root;
// for an executor this process has not seen register (before a restart),
// every set of local dirs the registry holds for the application too. All
// are opened confined (shufflefile.Root): no symbolic link is followed, no
// file outside them is reached.
func (st *servingStore) Executor(app, exec string) (blockserver.Executor, error) {
	s := (*Server)(st)
	uid, l, hashed, err := s.servedExec(app, exec)
	if err != nil {
		return nil, err
	}
	e := &servedExecutor{s: s}
	owners := s.owners(uid)
	var errs []error
	open := func(layout shufflefile.Layout) {
		r, err := shufflefile.OpenRoot(s.fs, layout, owners)
		switch {
		case err == nil:
			e.roots = append(e.roots, r)
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	if hashed {
		open(l)
	} else {
		for _, d := range s.disks.Disks() {
			dir, err := d.ExecutorDir(app, exec)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", blockserver.ErrUnknownExecutor, err)
			}
			open(shufflefile.Flat(dir))
		}
		if len(e.roots) == 0 {
			sets, _ := s.apps.local(app)
			for _, set := range sets {
				open(set)
			}
		}
	}
	if len(e.roots) == 0 {
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("executor %q of application %q: %w", exec, app, err)
		}
		return nil, fmt.Errorf("%w: executor %q of application %q has no map outputs on this node", blockserver.ErrUnknownExecutor, exec, app)
	}
	return e, nil
}

func (st *servingStore) LocalDirs(app, exec string) ([]string, error) {
	s := (*Server)(st)
	_, l, hashed, err := s.servedExec(app, exec)
	if err != nil {
		return nil, err
	}
	if !hashed {
		return nil, fmt.Errorf("%w: executor %q of application %q has no Spark local dirs this daemon knows of: it registered none (its map outputs are in the daemon's root, read through this server, not from disk), or registered before the daemon's last start", blockserver.ErrUnknownExecutor, exec, app)
	}
	return append([]string(nil), l.LocalDirs...), nil
}

// Remove removes app's map outputs through the daemon's removal path (the
// same as RemoveShuffle and RemoveApplication on the socket).
func (st *servingStore) Remove(app string, shuffle int32) (int64, int64, error) {
	s := (*Server)(st)
	if _, _, _, err := s.servedExec(app, ""); err != nil {
		return 0, 0, err
	}
	var removed protocol.Removed
	var err error
	if shuffle < 0 {
		removed, err = s.removeApplication(app, metrics.RemovalApplication)
	} else {
		removed, err = s.removeShuffle(app, shuffle)
	}
	return removed.MapOutputs, removed.Bytes, err
}

// servedExecutor is one executor's opened directories.
type servedExecutor struct {
	s     *Server
	roots []*shufflefile.Root
}

func (e *servedExecutor) Open(id shufflefile.ID, alg checksum.Algorithm) (*shufflefile.MapOutput, error) {
	var first error
	for _, r := range e.roots {
		mo, err := shufflefile.Open(r.FS(), r, id, alg)
		if err == nil {
			return mo, nil
		}
		if first == nil || errors.Is(first, fs.ErrNotExist) && !errors.Is(err, fs.ErrNotExist) {
			first = err
		}
	}
	return nil, first
}

// Remove removes map output id (its index, data and every checksum file)
// under the map outputs' locks, in whichever directory holds it.
func (e *servedExecutor) Remove(id shufflefile.ID) (bool, error) {
	found := false
	for _, r := range e.roots {
		if _, err := r.FS().Stat(shufflefile.Path(r, shufflefile.IndexName(id))); err != nil {
			continue
		}
		found = true
		for _, alg := range []checksum.Algorithm{checksum.Adler32, checksum.CRC32, checksum.CRC32C} {
			if err := shufflefile.Remove(r.FS(), e.s.locks, r, id, alg); err != nil {
				return true, err
			}
		}
	}
	return found, nil
}

func (e *servedExecutor) Close() error {
	var errs []error
	for _, r := range e.roots {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
