package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/shuffled/shuffled/internal/buildinfo"
	"github.com/shuffled/shuffled/internal/sdnotify"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/server"
)

// memoryHeadroom is what the daemon may use beyond --limit before the
// garbage collector works harder: frames being read, encoders, buffers.
const memoryHeadroom = 256 << 20

// cpuProfileEnv is --cpu-profile's variable; server.Config's flags have
// theirs from their names the same way.
const cpuProfileEnv = "SHUFFLED_CPU_PROFILE"

// serve runs the daemon until SIGTERM or SIGINT, then drains it: no new
// connections or map outputs, open map outputs finish until the drain
// deadline, the rest are aborted, and it exits 0.
func serve(ctx context.Context, args []string, _, stderr io.Writer) error {
	start := time.Now()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	fs := flag.NewFlagSet("shuffled serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Like every flag of serve, --cpu-profile has its variable; the flag,
	// parsed after, wins.
	var cpuProfile string
	fs.StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the daemon's run, start to drain, to `file` (read with go tool pprof) (env "+cpuProfileEnv+")")
	if v, ok := os.LookupEnv(cpuProfileEnv); ok {
		cpuProfile = v
	}
	var cfg server.Config
	if err := cfg.Load(fs, args, os.LookupEnv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	log := newLogger(stderr, cfg)
	if cpuProfile != "" {
		stop, err := startCPUProfile(cpuProfile)
		if err != nil {
			return err
		}
		defer stop(log)
	}
	// Records in flight are bounded by --limit; give the garbage collector
	// a soft bound a little above it, unless the operator set GOMEMLIMIT.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(cfg.LimitBytes + memoryHeadroom)
	}

	// Take the socket first: a second daemon started by mistake must stop
	// at "another daemon is serving" before it sweeps the live one's temp
	// files.
	listeners, err := unixsock.Activated()
	if err != nil {
		return err
	}
	activated := len(listeners) > 0
	if !activated {
		ln, err := unixsock.Listen(cfg.SocketPath, cfg.SocketMode)
		if err != nil {
			return err
		}
		listeners = []*net.UnixListener{ln}
	}
	closeListeners := func() {
		for _, ln := range listeners {
			ln.Close()
		}
		if !activated {
			_ = os.Remove(cfg.SocketPath)
		}
	}

	// Then the roots: a second daemon on another socket but the same root
	// stops here, naming the first's pid.
	lock, err := server.LockRoots(cfg)
	if err != nil {
		closeListeners()
		return err
	}
	defer lock.Close()
	// A metrics address that cannot be bound fails the start, before
	// anything is swept or served.
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		if metricsLn, err = metrics.Listen(cfg.MetricsAddr, cfg.MetricsAllowRemote); err != nil {
			closeListeners()
			return fmt.Errorf("--metrics-addr: %w", err)
		}
	}

	m := metrics.New()
	s, err := server.New(cfg, server.WithLogger(log), server.WithMetrics(m))
	if err != nil {
		if metricsLn != nil {
			metricsLn.Close()
		}
		closeListeners()
		return err
	}
	m.WatchHealth(s.Live, s.Ready)

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // stops the metrics endpoint and the watchdog before waiting for them
		wg.Wait()
	}()
	if metricsLn != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := metrics.ServeListener(ctx, metricsLn, m); err != nil {
				log.Error("metrics endpoint", "addr", cfg.MetricsAddr, "err", err)
			}
		}()
		if cfg.MetricsAllowRemote {
			log.Warn("metrics endpoint open beyond this host (--metrics-allow-remote): /metrics, /healthz and /readyz answer anyone who reaches it", "addr", metricsLn.Addr().String())
		}
	}
	serveErr := make(chan error, len(listeners))
	for _, ln := range listeners {
		go func() { serveErr <- s.Serve(ln) }()
	}
	if _, err := sdnotify.Ready(); err != nil {
		log.Warn("sd_notify READY", "err", err)
	}
	sdnotify.Status("serving on %s", listeners[0].Addr())
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = sdnotify.RunWatchdog(ctx, func() bool { return true })
	}()
	log.Info("shuffled ready", "version", buildinfo.Get().Version, "commit", buildinfo.Get().ShortCommit(), "socket", listeners[0].Addr().String(),
		"activated", activated, "limit", server.FormatSize(cfg.LimitBytes), "pool", cfg.PoolSize,
		"metrics", metricsAddr(metricsLn), "startup", time.Since(start))

	var runErr error
	select {
	case sig := <-sigs:
		log.Info("draining", "signal", sig.String(), "deadline", cfg.DrainTimeout)
	case runErr = <-serveErr:
		log.Error("listener failed", "err", runErr)
	case <-ctx.Done():
	}
	sdnotify.Stopping()
	sdnotify.Status("draining")
	drainCtx, drainCancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer drainCancel()
	if err := s.Shutdown(drainCtx); err != nil {
		log.Warn("drain", "err", err)
	}
	closeListeners()
	log.Info("shuffled stopped")
	return runErr
}

func newLogger(w io.Writer, cfg server.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// metricsAddr is the address the metrics endpoint listens on, or "off".
func metricsAddr(ln net.Listener) string {
	if ln == nil {
		return "off"
	}
	return ln.Addr().String()
}

// startCPUProfile starts a CPU profile into a new file at path and returns
// what stops it and closes the file.
func startCPUProfile(path string) (func(*slog.Logger), error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("--cpu-profile %s: %w", path, err)
	}
	return func(log *slog.Logger) {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Warn("--cpu-profile", "path", path, "err", err)
		}
	}, nil
}
