package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/shuffled/shuffled/errdefs"
)

// ErrNotLoopback means an address would expose the metrics beyond this host
// and remote scrapes were not allowed.
var ErrNotLoopback = errdefs.New(errdefs.ErrInvalidArgument, "metrics: address is not loopback")

// The paths Serve answers: the metrics, liveness and readiness.
const (
	Path        = "/metrics"
	HealthzPath = "/healthz"
	ReadyzPath  = "/readyz"
)

// shutdownGrace bounds how long Serve waits for in-flight scrapes at
// shutdown.
const shutdownGrace = 5 * time.Second

// CheckAddr reports whether addr ("host:port") is a loopback address the
// metrics may listen on: an IP in 127.0.0.0/8, ::1, or "localhost". An empty
// host (all interfaces) is refused.
func CheckAddr(addr string) error { return ValidateAddr(addr, false) }

// ValidateAddr checks addr ("host:port"); unless allowRemote, its host must
// be loopback (127.0.0.0/8, ::1, "localhost"). With allowRemote any host,
// or none (all interfaces), is accepted.
func ValidateAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics: address %q: %w", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return fmt.Errorf("metrics: address %q: bad port %q", addr, port)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %q (want 127.0.0.1, ::1 or localhost, or allow remote scrapes with --metrics-allow-remote)", ErrNotLoopback, addr)
}

// Listen opens a TCP listener on addr. Unless allowRemote it checks that
// addr is loopback before listening and that the bound address is after
// ("localhost" is resolved by the system), so the listener never serves
// beyond this host.
func Listen(addr string, allowRemote bool) (net.Listener, error) {
	if err := ValidateAddr(addr, allowRemote); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !allowRemote && (!ok || !tcp.IP.IsLoopback()) {
		ln.Close()
		return nil, fmt.Errorf("%w: %q resolved to %v", ErrNotLoopback, addr, ln.Addr())
	}
	return ln, nil
}

// Serve publishes m on the loopback address addr until ctx is done, then
// shuts the server down and returns nil. It returns an error at once for
// an address that is not loopback or cannot be bound.
func Serve(ctx context.Context, addr string, m *Metrics) error {
	ln, err := Listen(addr, false)
	if err != nil {
		return err
	}
	return ServeListener(ctx, ln, m)
}

// probes answer HealthzPath and ReadyzPath (WatchHealth).
type probes struct {
	live, ready func() error
}

// WatchHealth makes HealthzPath answer live() and ReadyzPath ready(): 200
// "ok" for nil, 503 with the error's text otherwise. Both must be safe to
// call from any goroutine. Until it is called both answer 503 "starting".
func (m *Metrics) WatchHealth(live, ready func() error) {
	m.health.Store(&probes{live, ready})
}

var errStarting = errors.New("starting")

func (m *Metrics) probe(ready bool) error {
	p := m.health.Load()
	switch {
	case p == nil:
		return errStarting
	case ready:
		return p.ready()
	default:
		return p.live()
	}
}

func (m *Metrics) probeHandler(ready bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := m.probe(ready); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// ServeListener serves m at Path, and the probes at HealthzPath and
// ReadyzPath, on a listener from Listen until ctx is done; it closes ln.
func ServeListener(ctx context.Context, ln net.Listener, m *Metrics) error {
	mux := http.NewServeMux()
	mux.Handle(Path, m.Handler())
	mux.Handle(HealthzPath, m.probeHandler(false))
	mux.Handle(ReadyzPath, m.probeHandler(true))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("metrics: serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	<-served // http.ErrServerClosed once Shutdown has begun
	if err != nil {
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}
