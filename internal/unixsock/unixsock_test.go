package unixsock

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestListenCreatesSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "shuffled", "s.sock")
	ln, err := Listen(path, 0o660)
	if err != nil {
		t.Fatalf("Listen(%q): %v", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Errorf("Listen(%q, 0660) made mode %v, want a socket with mode 0660", path, fi.Mode())
	}
	serveOnce(t, ln)
	ln.Close()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close, Lstat(%q) = %v, want not exist", path, err)
	}
}

// serveOnce checks that a client can reach ln: it accepts one connection and
// echoes a byte.
func serveOnce(t *testing.T, ln *net.UnixListener) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, err = io.Copy(c, io.LimitReader(c, 1))
			c.Close()
		}
		done <- err
	}()
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial %s: %v", ln.Addr(), err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // guards against a hang; nothing is timed
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'x' {
		t.Errorf("echo through %s = %q, %v, want %q", ln.Addr(), buf, err, "x")
	}
	if err := <-done; err != nil {
		t.Errorf("accept on %s: %v", ln.Addr(), err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false) // a crashed daemon leaves its socket file behind
	old.Close()

	ln, err := Listen(path, 0o660)
	if err != nil {
		t.Fatalf("Listen(%q) over a stale socket: %v", path, err)
	}
	defer ln.Close()
	serveOnce(t, ln)
}

func TestListenRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	live, err := Listen(path, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	ln, err := Listen(path, 0o660)
	if err == nil {
		ln.Close()
		t.Fatalf("Listen(%q) while another listener serves = nil error, want %v", path, ErrInUse)
	}
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), path) {
		t.Errorf("Listen(%q) while another listener serves = %v, want %v naming the path", path, err, ErrInUse)
	}
	// The probe connected and hung up at once; then the live daemon's
	// socket still serves.
	probe, err := live.Accept()
	if err != nil {
		t.Fatal(err)
	}
	probe.SetDeadline(time.Now().Add(30 * time.Second))
	if n, err := probe.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read from Listen's probe = %d, %v, want EOF", n, err)
	}
	probe.Close()
	serveOnce(t, live)
}

func TestListenRefusesNonSocket(t *testing.T) {
	dir := t.TempDir()
	live, err := Listen(filepath.Join(dir, "live.sock"), 0o660)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	file := filepath.Join(dir, "file")
	subdir := filepath.Join(dir, "dir")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(file, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "live.sock"), link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{file, subdir, link} {
		ln, err := Listen(path, 0o660)
		if err == nil {
			ln.Close()
		}
		if !errors.Is(err, ErrNotSocket) {
			t.Errorf("Listen(%q) = %v, want %v", path, err, ErrNotSocket)
		}
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("Listen(%q) removed it: %v", path, err)
		}
	}
}

func TestListenRefusesLongPath(t *testing.T) {
	path := "/" + strings.Repeat("d", maxPathLen)
	if _, err := Listen(path, 0o660); !errors.Is(err, ErrPathTooLong) {
		t.Errorf("Listen(<%d bytes>) = %v, want %v", len(path), err, ErrPathTooLong)
	}
}

func TestPeerCred(t *testing.T) {
	ln, err := Listen(filepath.Join(t.TempDir(), "s.sock"), 0o660)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	groups, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	want := Cred{PID: int32(os.Getpid()), UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	for _, conn := range []*net.UnixConn{server, client} {
		got, err := PeerCred(conn)
		if err != nil {
			t.Fatalf("PeerCred: %v", err)
		}
		if got.PID != want.PID || got.UID != want.UID || got.GID != want.GID {
			t.Errorf("PeerCred = %+v, want PID %d UID %d GID %d", got, want.PID, want.UID, want.GID)
		}
		if got.Groups == nil {
			continue // kernel without SO_PEERGROUPS
		}
		gotGroups := slices.Sorted(slices.Values(got.Groups))
		var wantGroups []uint32
		for _, g := range groups {
			wantGroups = append(wantGroups, uint32(g))
		}
		slices.Sort(wantGroups)
		if !slices.Equal(gotGroups, wantGroups) {
			t.Errorf("PeerCred groups = %v, want %v", gotGroups, wantGroups)
		}
	}
}

func TestAllowed(t *testing.T) {
	self := uint32(os.Geteuid())
	other := self + 1000 // neither root nor the daemon
	if other == 0 {
		other = 1000
	}
	tests := []struct {
		cred       Cred
		uids, gids []uint32
		want       bool
	}{
		{Cred{UID: 0, GID: 0}, nil, nil, true},
		{Cred{UID: self, GID: 77}, nil, nil, true},
		{Cred{UID: other, GID: 77}, nil, nil, false},
		{Cred{UID: other, GID: 77}, []uint32{other}, nil, true},
		{Cred{UID: other, GID: 77}, []uint32{other + 1}, nil, false},
		{Cred{UID: other, GID: 77}, nil, []uint32{77}, true},
		{Cred{UID: other, GID: 77}, nil, []uint32{78}, false},
		{Cred{UID: other, GID: 77, Groups: []uint32{5, 78}}, nil, []uint32{78}, true},
		{Cred{UID: other, GID: 77, Groups: []uint32{5, 79}}, []uint32{1}, []uint32{78}, false},
	}
	for _, tt := range tests {
		if got := Allowed(tt.cred, tt.uids, tt.gids); got != tt.want {
			t.Errorf("Allowed(%+v, %v, %v) = %v, want %v", tt.cred, tt.uids, tt.gids, got, tt.want)
		}
	}
}
