package unixsock

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Environment of systemd socket activation (sd_listen_fds(3)).
const (
	envListenPID     = "LISTEN_PID"
	envListenFDs     = "LISTEN_FDS"
	envListenFDNames = "LISTEN_FDNAMES"
	// listenFDsStart is the first file descriptor systemd passes.
	listenFDsStart = 3
)

// Activated returns the listening sockets systemd passed to this process
// (a .socket unit with Accept=no), in the order of the unit's Listen*=
// lines. It returns nil, nil when the process was not socket-activated, or
// when LISTEN_PID names another process (the variables were inherited). The
// activation variables are unset in every case, so that no child inherits
// them. Every passed descriptor must be a Unix stream listener: anything else
// is an error, and the descriptors are closed.
func Activated() ([]*net.UnixListener, error) {
	pidText, hasPID := os.LookupEnv(envListenPID)
	fdsText := os.Getenv(envListenFDs)
	namesText := os.Getenv(envListenFDNames)
	os.Unsetenv(envListenPID)
	os.Unsetenv(envListenFDs)
	os.Unsetenv(envListenFDNames)
	if !hasPID {
		return nil, nil
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		return nil, fmt.Errorf("unixsock: socket activation: %s=%q is not a process id", envListenPID, pidText)
	}
	if pid != os.Getpid() {
		return nil, nil
	}
	n, err := strconv.Atoi(fdsText)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("unixsock: socket activation: %s=%q is not a descriptor count", envListenFDs, fdsText)
	}
	var names []string
	if namesText != "" {
		names = strings.Split(namesText, ":")
	}

	listeners := make([]*net.UnixListener, 0, n)
	var firstErr error
	for i := range n {
		fd := listenFDsStart + i
		name := "LISTEN_FD_" + strconv.Itoa(fd)
		if i < len(names) && names[i] != "" {
			name = names[i]
		}
		syscall.CloseOnExec(fd)
		f := os.NewFile(uintptr(fd), name)
		if firstErr != nil {
			f.Close()
			continue
		}
		ln, err := net.FileListener(f) // duplicates the descriptor
		f.Close()
		if err != nil {
			firstErr = fmt.Errorf("unixsock: socket activation: descriptor %d (%s): %w", fd, name, err)
			continue
		}
		ul, ok := ln.(*net.UnixListener)
		if !ok || ln.Addr().Network() != "unix" { // not unixpacket or unixgram either
			ln.Close()
			firstErr = fmt.Errorf("unixsock: socket activation: descriptor %d (%s) is a %s listener, want a Unix stream socket",
				fd, name, ln.Addr().Network())
			continue
		}
		listeners = append(listeners, ul)
	}
	if firstErr != nil {
		for _, ln := range listeners {
			ln.Close()
		}
		return nil, firstErr
	}
	return listeners, nil
}
