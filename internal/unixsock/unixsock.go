// Package unixsock opens the daemon's Unix stream socket, takes sockets
// handed over by systemd socket activation, and identifies the process at
// the other end of a connection.
//
// Invariant: Listen never removes a socket that a live process answers on,
// nor anything that is not a socket; it only replaces a socket file whose
// listener is gone (connect is refused).
package unixsock

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/shuffled/shuffled/errdefs"
)

var (
	// ErrInUse means a live process answers on the socket path.
	ErrInUse = errdefs.New(errdefs.ErrFailedPrecondition, "unixsock: another daemon is serving")
	// ErrNotSocket means the path exists and is not a socket (a symbolic
	// link counts as not a socket: Listen does not follow it).
	ErrNotSocket = errdefs.New(errdefs.ErrFailedPrecondition, "unixsock: path exists and is not a socket")
	// ErrPathTooLong means the path does not fit a socket address.
	ErrPathTooLong = errdefs.New(errdefs.ErrInvalidArgument, "unixsock: path too long for a socket address")
)

// maxPathLen is the longest path a sockaddr_un holds with its terminating NUL
// (sun_path is 108 bytes on Linux).
const maxPathLen = 107

// Listen listens on the Unix stream socket path and sets its mode (0660 in
// the daemon). The parent directory is created (0755) when missing. When the
// path already exists Listen dials it: if something answers, it fails with
// ErrInUse; if connect is refused, the socket is stale and is replaced. Any
// other state (not a socket, a dial error other than refused) is refused
// rather than guessed at.
//
// The socket exists with the process umask's mode until the chmod that
// follows bind; connections made in that window are still subject to the
// peer credential check done on accept.
func Listen(path string, mode fs.FileMode) (*net.UnixListener, error) {
	if len(path) > maxPathLen {
		return nil, fmt.Errorf("%w: %q is %d bytes, at most %d fit", ErrPathTooLong, path, len(path), maxPathLen)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("unixsock: create socket directory: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("unixsock: listen: %w", err)
	}
	if err := os.Chmod(path, mode.Perm()); err != nil {
		ln.Close()
		return nil, fmt.Errorf("unixsock: set mode %#o on %s: %w", mode.Perm(), path, err)
	}
	return ln, nil
}

// removeStale removes path if it is a socket nobody listens on. A missing
// path is fine.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unixsock: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%w: %s is %v", ErrNotSocket, path, fi.Mode().Type())
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err == nil {
		conn.Close()
		return fmt.Errorf("%w %s", ErrInUse, path)
	}
	// Only a refused connect proves that no listener is bound. A full
	// backlog (EAGAIN) or a permission error may hide a live daemon.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("unixsock: probe existing socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unixsock: remove stale socket: %w", err)
	}
	return nil
}

// Cred identifies the process at the other end of a Unix socket, as the
// kernel recorded it when the connection was made.
type Cred struct {
	PID int32
	UID uint32
	// GID is the peer's primary group.
	GID uint32
	// Groups are the peer's supplementary groups, where the kernel reports
	// them (SO_PEERGROUPS, Linux 4.13 and later); nil otherwise.
	Groups []uint32
}

// Allowed reports whether a peer may use the daemon: root and the daemon's
// own effective uid always may (they can reach the daemon's files anyway);
// any other peer needs its uid in uids, or its primary or a supplementary
// group in gids. With both lists empty only root and the daemon's own uid are
// allowed.
func Allowed(c Cred, uids, gids []uint32) bool {
	if c.UID == 0 || c.UID == uint32(os.Geteuid()) || slices.Contains(uids, c.UID) {
		return true
	}
	if slices.Contains(gids, c.GID) {
		return true
	}
	return slices.ContainsFunc(c.Groups, func(g uint32) bool { return slices.Contains(gids, g) })
}
