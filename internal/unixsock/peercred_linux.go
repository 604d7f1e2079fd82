package unixsock

import (
	"errors"
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PeerCred returns the credentials of the process that made conn
// (SO_PEERCRED), with its supplementary groups (SO_PEERGROUPS) where the
// kernel reports them.
func PeerCred(conn *net.UnixConn) (Cred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("unixsock: peer credentials: %w", err)
	}
	var (
		c       Cred
		credErr error
	)
	err = raw.Control(func(fd uintptr) {
		var u *unix.Ucred
		u, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr != nil {
			return
		}
		c = Cred{PID: u.Pid, UID: u.Uid, GID: u.Gid}
		c.Groups, credErr = peerGroups(int(fd))
	})
	if err == nil {
		err = credErr
	}
	if err != nil {
		return Cred{}, fmt.Errorf("unixsock: peer credentials: %w", err)
	}
	return c, nil
}

// peerGroups reads SO_PEERGROUPS. A kernel without it gives nil, nil.
func peerGroups(fd int) ([]uint32, error) {
	groups := make([]uint32, 32)
	for {
		n := uint32(len(groups) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd),
			unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&groups[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case errno == 0:
			return groups[:n/4], nil
		case errors.Is(errno, unix.ERANGE) && int(n/4) > len(groups):
			// n now holds the size the kernel needs.
			groups = make([]uint32, n/4)
		case errors.Is(errno, unix.ENOPROTOOPT):
			return nil, nil
		default:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", errno)
		}
	}
}
