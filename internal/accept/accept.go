// Package accept is the accept loop the daemon's servers share: the
// listeners a server serves on, the check that it has not been closed, and
// the back-off on errors that pass (out of descriptors, timeouts).
package accept

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// Backoff is how long Serve waits after an error that passes before it
// accepts again: out of descriptors, it backs off rather than spin.
const Backoff = 50 * time.Millisecond

// Listeners is the set of listeners a server accepts on. It is guarded by
// the lock the server hands Serve (Loop.Mu): every method is called with it
// held. The zero value is an empty set.
type Listeners struct {
	set map[net.Listener]struct{}
}

// Len returns the number of listeners accepting.
func (l *Listeners) Len() int { return len(l.set) }

// CloseAll closes every listener; each Serve on one of them returns nil.
func (l *Listeners) CloseAll() {
	for ln := range l.set {
		ln.Close()
	}
}

func (l *Listeners) add(ln net.Listener) {
	if l.set == nil {
		l.set = make(map[net.Listener]struct{})
	}
	l.set[ln] = struct{}{}
}

// Loop is what Serve needs of a server.
type Loop struct {
	// Mu guards Listeners and what Closed reads.
	Mu sync.Locker
	// Listeners holds ln while Serve accepts on it.
	Listeners *Listeners
	// Closed reports, with Mu held, whether the server takes no more
	// connections.
	Closed func() bool
	// Warn reports an accept error that passes, before the back-off.
	Warn func(err error)
	// Handle takes each connection accepted, on Serve's goroutine: it
	// must not block.
	Handle func(net.Conn)
}

// Serve accepts connections on ln and hands them to l.Handle until ln is
// closed or l.Closed reports true; then it returns nil. A closed server's
// ln is closed at once. Timeouts, EMFILE and ENFILE are reported to l.Warn
// and retried after Backoff; any other accept error is returned as is.
func Serve(ln net.Listener, l Loop) error {
	l.Mu.Lock()
	if l.Closed() {
		l.Mu.Unlock()
		ln.Close()
		return nil
	}
	l.Listeners.add(ln)
	l.Mu.Unlock()
	defer func() {
		l.Mu.Lock()
		delete(l.Listeners.set, ln)
		l.Mu.Unlock()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if closed(l) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				l.Warn(err)
				time.Sleep(Backoff)
				continue
			}
			return err
		}
		l.Handle(nc)
	}
}

func closed(l Loop) bool {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return l.Closed()
}
