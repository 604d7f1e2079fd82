//go:build !linux

package unixsock

import (
	"errors"
	"net"
)

// PeerCred is only implemented on Linux, where the daemon runs.
func PeerCred(conn *net.UnixConn) (Cred, error) {
	return Cred{}, errors.ErrUnsupported
}

// Activated is only implemented on Linux, where systemd runs.
func Activated() ([]*net.UnixListener, error) {
	return nil, errors.ErrUnsupported
}
