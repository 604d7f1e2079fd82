package accept

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
)

// fakeListener hands out the errors and connections of script in turn,
// then net.ErrClosed; serving is called before each Accept.
type fakeListener struct {
	script  []any // error or net.Conn
	closed  bool
	accepts int
	serving func()
}

func (f *fakeListener) Accept() (net.Conn, error) {
	if f.serving != nil {
		f.serving()
	}
	f.accepts++
	if f.closed || len(f.script) == 0 {
		return nil, net.ErrClosed
	}
	next := f.script[0]
	f.script = f.script[1:]
	if err, ok := next.(error); ok {
		return nil, err
	}
	return next.(net.Conn), nil
}

func (f *fakeListener) Close() error   { f.closed = true; return nil }
func (f *fakeListener) Addr() net.Addr { return &net.UnixAddr{Name: "fake", Net: "unix"} }

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

type server struct {
	mu     sync.Mutex
	lns    Listeners
	closed bool
	warned []error
	conns  []net.Conn
}

func (s *server) loop() Loop {
	return Loop{
		Mu:        &s.mu,
		Listeners: &s.lns,
		Closed:    func() bool { return s.closed },
		Warn:      func(err error) { s.warned = append(s.warned, err) },
		Handle:    func(nc net.Conn) { s.conns = append(s.conns, nc) },
	}
}

func TestServeBacksOffAndHandles(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var s server
	emfile := &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	ln := &fakeListener{script: []any{emfile, syscall.ENFILE, timeoutError{}, a}}
	ln.serving = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.lns.Len() != 1 {
			t.Errorf("listeners while serving = %d, want 1", s.lns.Len())
		}
	}
	if err := Serve(ln, s.loop()); err != nil {
		t.Fatalf("Serve = %v, want nil once the listener is closed", err)
	}
	if len(s.warned) != 3 || !errors.Is(s.warned[0], syscall.EMFILE) || !errors.Is(s.warned[1], syscall.ENFILE) {
		t.Errorf("warned %v, want EMFILE, ENFILE, the timeout", s.warned)
	}
	if len(s.conns) != 1 || s.conns[0] != a {
		t.Errorf("handled %v, want the one connection", s.conns)
	}
	if ln.accepts != 5 {
		t.Errorf("accepts = %d, want 5", ln.accepts)
	}
	if s.lns.Len() != 0 {
		t.Errorf("listeners after Serve = %d, want 0", s.lns.Len())
	}
}

func TestServeReturnsOtherErrors(t *testing.T) {
	var s server
	want := errors.New("accept: broken")
	ln := &fakeListener{script: []any{want}}
	if err := Serve(ln, s.loop()); err != want {
		t.Fatalf("Serve = %v, want %v", err, want)
	}
	if len(s.warned) != 0 || s.lns.Len() != 0 {
		t.Errorf("warned %v, %d listeners left, want none", s.warned, s.lns.Len())
	}
}

func TestServeClosed(t *testing.T) {
	var s server
	s.closed = true
	ln := &fakeListener{script: []any{errors.New("not reached")}}
	if err := Serve(ln, s.loop()); err != nil {
		t.Fatalf("Serve on a closed server = %v, want nil", err)
	}
	if !ln.closed || ln.accepts != 0 {
		t.Errorf("listener closed %v after %d accepts, want closed before any", ln.closed, ln.accepts)
	}
}

func TestServeErrorAfterClose(t *testing.T) {
	var s server
	ln := &fakeListener{script: []any{errors.New("accept: broken")}}
	ln.serving = func() { s.mu.Lock(); s.closed = true; s.mu.Unlock() }
	if err := Serve(ln, s.loop()); err != nil {
		t.Fatalf("Serve = %v, want nil: the server was closed", err)
	}
}

func TestCloseAll(t *testing.T) {
	var l Listeners
	a, b := &fakeListener{}, &fakeListener{}
	l.add(a)
	l.add(b)
	l.CloseAll()
	if !a.closed || !b.closed || l.Len() != 2 {
		t.Errorf("closed %v %v, len %d: want both closed, still listed until their Serve returns", a.closed, b.closed, l.Len())
	}
}
