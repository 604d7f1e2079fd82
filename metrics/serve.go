package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ErrNotLoopback means an address would expose the metrics beyond this host.
var ErrNotLoopback = errors.New("metrics: address is not loopback")

// Path is where Serve publishes the metrics.
const Path = "/metrics"

// shutdownGrace bounds how long Serve waits for in-flight scrapes at
// shutdown.
const shutdownGrace = 5 * time.Second

// CheckAddr reports whether addr ("host:port") is a loopback address the
// metrics may listen on: an IP in 127.0.0.0/8, ::1, or "localhost". An empty
// host (all interfaces) is refused.
func CheckAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics: address %q: %w", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return fmt.Errorf("metrics: address %q: bad port %q", addr, port)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %q (want 127.0.0.1, ::1 or localhost)", ErrNotLoopback, addr)
}

// Listen opens a TCP listener on the loopback address addr. It checks the
// address before listening, and the bound address after ("localhost" is
// resolved by the system), so the listener never serves beyond this host.
func Listen(addr string) (net.Listener, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("%w: %q resolved to %v", ErrNotLoopback, addr, ln.Addr())
	}
	return ln, nil
}

// Serve publishes m at Path on the loopback address addr until ctx is done,
// then shuts the server down and returns nil. It returns an error at once
// for an address that is not loopback or cannot be bound.
func Serve(ctx context.Context, addr string, m *Metrics) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return ServeListener(ctx, ln, m)
}

// ServeListener is Serve on a listener from Listen; it closes ln.
func ServeListener(ctx context.Context, ln net.Listener, m *Metrics) error {
	mux := http.NewServeMux()
	mux.Handle(Path, m.Handler())
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
