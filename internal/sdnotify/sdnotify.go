// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)): READY, STOPPING, STATUS and WATCHDOG datagrams sent to the
// socket named by $NOTIFY_SOCKET.
//
// Invariant: outside systemd (no $NOTIFY_SOCKET) every call is a no-op that
// reports (false, nil), so the daemon runs the same with and without a
// service manager and never has to ask which one it has.
package sdnotify

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/shuffled/shuffled/errdefs"
)

// The states the daemon sends. Several may be joined with newlines in one
// datagram.
const (
	StateReady    = "READY=1"
	StateStopping = "STOPPING=1"
	StateWatchdog = "WATCHDOG=1"
)

// Environment variables systemd sets for a Type=notify service.
const (
	envSocket       = "NOTIFY_SOCKET"
	envWatchdogUsec = "WATCHDOG_USEC"
	envWatchdogPID  = "WATCHDOG_PID"
)

// ErrUnsupportedSocket means $NOTIFY_SOCKET names an address this package
// cannot reach (systemd also allows vsock addresses, which a node daemon never
// gets).
var ErrUnsupportedSocket = errdefs.New(errdefs.ErrUnsupported, "sdnotify: unsupported NOTIFY_SOCKET")

// Notify sends state (for example "READY=1" or "STATUS=draining") to the
// service manager. It reports false with a nil error when $NOTIFY_SOCKET is
// unset, true once the datagram is sent. Abstract sockets ("@name") and path
// sockets ("/run/systemd/notify") are both supported.
func Notify(state string) (bool, error) {
	name, ok := os.LookupEnv(envSocket)
	if !ok || name == "" {
		return false, nil
	}
	if name[0] != '/' && name[0] != '@' {
		return false, fmt.Errorf("%w: %q (want a path or an @abstract name)", ErrUnsupportedSocket, name)
	}
	// The Go runtime maps a leading '@' to Linux's abstract namespace.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sdnotify: dial %s: %w", name, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sdnotify: send to %s: %w", name, err)
	}
	return true, nil
}

// Ready tells the service manager that start-up is complete: send it only
// once the socket serves.
func Ready() (bool, error) { return Notify(StateReady) }

// Stopping tells the service manager that shutdown has begun.
func Stopping() (bool, error) { return Notify(StateStopping) }

// Watchdog sends one watchdog keep-alive.
func Watchdog() (bool, error) { return Notify(StateWatchdog) }

// Status sets the free-form status line that `systemctl status` shows.
// A newline in the formatted text would start a new assignment, so newlines
// are replaced by spaces.
func Status(format string, args ...any) (bool, error) {
	msg := []byte(fmt.Sprintf(format, args...))
	for i, c := range msg {
		if c == '\n' {
			msg[i] = ' '
		}
	}
	return Notify("STATUS=" + string(msg))
}

// WatchdogInterval returns the watchdog timeout systemd expects keep-alives
// within (WatchdogSec=), and whether the watchdog is enabled for this
// process: WATCHDOG_USEC is a positive number and WATCHDOG_PID, when set,
// names this process.
func WatchdogInterval() (time.Duration, bool) {
	s, ok := os.LookupEnv(envWatchdogUsec)
	if !ok {
		return 0, false
	}
	usec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || usec <= 0 || usec > int64(1<<63-1)/int64(time.Microsecond) {
		return 0, false
	}
	if p, ok := os.LookupEnv(envWatchdogPID); ok {
		pid, err := strconv.Atoi(p)
		if err != nil || pid != os.Getpid() {
			return 0, false
		}
	}
	return time.Duration(usec) * time.Microsecond, true
}

// RunWatchdog sends a keep-alive every half watchdog interval for as long as
// healthy returns true, until ctx is done. A tick on which healthy returns
// false sends nothing, so a daemon that stays unhealthy for a whole interval
// is restarted by systemd. It returns nil at once when the watchdog is not
// enabled, nil when ctx ends, and the error of a keep-alive that could not be
// sent. Run it on a goroutine whose owner waits for it.
func RunWatchdog(ctx context.Context, healthy func() bool) error {
	interval, ok := WatchdogInterval()
	if !ok {
		return nil
	}
	period := max(interval/2, time.Microsecond)
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if !healthy() {
			continue
		}
		if _, err := Watchdog(); err != nil {
			return err
		}
	}
}
