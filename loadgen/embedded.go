package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/limiter"
	"github.com/shuffled/shuffled/server"
)

// embeddedDrain bounds how long stopping the embedded daemon waits for map
// outputs still open (there are none after a clean run).
const embeddedDrain = 10 * time.Second

// embedded is a daemon run inside this process, on a socket in a temporary
// directory.
type embedded struct {
	srv    *server.Server
	tmp    string // holds the socket, and the root unless --root was given
	socket string
	root   string
	served chan error
}

// startEmbedded starts a daemon with the default configuration on a
// temporary socket, writing under cfg.Root or a temporary root.
func startEmbedded(cfg *Config) (_ *embedded, err error) {
	tmp, err := os.MkdirTemp("", "shuffled-loadgen-")
	if err != nil {
		return nil, fmt.Errorf("loadgen: embedded daemon: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	d := &embedded{tmp: tmp, socket: filepath.Join(tmp, "shuffled.sock"), root: cfg.Root, served: make(chan error, 1)}
	if d.root == "" {
		d.root = filepath.Join(tmp, "root")
	}
	sc := server.Config{SocketPath: d.socket, Root: d.root}
	// Its limit and pool size follow SHUFFLED_LIMIT and SHUFFLED_POOL, as
	// a child daemon's do; the socket and root stay the run's own.
	if err := sc.ApplyEnv(func(k string) (string, bool) {
		if k == "SHUFFLED_LIMIT" || k == "SHUFFLED_POOL" {
			return os.LookupEnv(k)
		}
		return "", false
	}); err != nil {
		return nil, fmt.Errorf("loadgen: embedded daemon: %w", err)
	}
	sc.EnsureDefaults()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if d.srv, err = server.New(sc, server.WithLogger(quiet)); err != nil {
		return nil, fmt.Errorf("loadgen: embedded daemon: %w", err)
	}
	ln, err := unixsock.Listen(d.socket, 0o660)
	if err != nil {
		d.srv.Shutdown(context.Background())
		return nil, fmt.Errorf("loadgen: embedded daemon: %w", err)
	}
	go func() { d.served <- d.srv.Serve(ln) }()
	return d, nil
}

// limiterStats returns the daemon's limiter figures.
func (d *embedded) limiterStats() limiter.Stats { return d.srv.Engine().Limiter().Stats() }

// stop drains the daemon and removes its temporary directory.
func (d *embedded) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), embeddedDrain)
	defer cancel()
	err := d.srv.Shutdown(ctx)
	if serr := <-d.served; err == nil {
		err = serr
	}
	if rerr := os.RemoveAll(d.tmp); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("loadgen: embedded daemon: %w", err)
	}
	return nil
}

// removeApp removes what a run wrote under the embedded daemon's root.
func (d *embedded) removeApp(appID string) error {
	dir := filepath.Join(d.root, appID)
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("loadgen: remove %s: %w", dir, err)
	}
	return nil
}
