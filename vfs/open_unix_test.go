//go:build unix

package vfs

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/testkit"
	"golang.org/x/sys/unix"
)

// specials makes a FIFO, a socket and a directory in dir and returns
// their paths and what the refusal says each is.
func specials(t *testing.T, dir string) map[string]string {
	t.Helper()
	fifo := filepath.Join(dir, "shuffle_0_5_0.index")
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "shuffle_0_6_0.index")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	t.Cleanup(func() { l.Close() })
	sub := filepath.Join(dir, "shuffle_0_7_0.index")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	return map[string]string{fifo: "is a FIFO, not a regular file", sock: "is a socket, not a regular file", sub: "is a directory, not a regular file"}
}

// wantRefused checks that err is a refusal that names path.
func wantRefused(t *testing.T, what string, err error, path string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), path) {
		t.Errorf("%s = %v, want a refusal naming %s", what, err, path)
	}
}

// wantNotRegular checks that err refuses path for what it is.
func wantNotRegular(t *testing.T, what string, err error, path, says string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, ErrRefused) || !errors.Is(err, fs.ErrPermission) ||
		!errors.Is(err, errdefs.ErrPermissionDenied) || !strings.Contains(err.Error(), path+" "+says) {
		t.Errorf("%s = %v, want a refusal saying %q", what, err, path+" "+says)
	}
}

// checkOpens checks that open refuses, without blocking, a FIFO, a socket
// and a directory, naming each and what it is, and opens a regular file
// whose descriptor is in blocking mode.
func checkOpens(t *testing.T, dir string, open func(string) (File, error)) {
	t.Helper()
	for p, says := range specials(t, dir) {
		f, err := testkit.Promptly(t, "Open("+p+")", []string{p}, func() (File, error) { return open(p) })
		if err == nil {
			f.Close()
		}
		wantNotRegular(t, "Open of a special file", err, p, says)
	}
	reg := filepath.Join(dir, "shuffle_0_8_0.index")
	if err := os.WriteFile(reg, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := open(reg)
	if err != nil {
		t.Fatalf("Open of a regular file = %v", err)
	}
	defer f.Close()
	sc, err := f.(*os.File).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl int
	var ferr error
	if err := sc.Control(func(fd uintptr) { fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil {
		t.Fatal(err, ferr)
	}
	if fl&unix.O_NONBLOCK != 0 {
		t.Errorf("the descriptor of an opened regular file has O_NONBLOCK set (flags %#x), want it cleared", fl)
	}
	b := make([]byte, 10)
	if n, err := f.ReadAt(b, 0); n != 10 || string(b) != "0123456789" {
		t.Errorf("ReadAt = %d, %v, %q", n, err, b)
	}
}

func TestOpenRefusesNonRegular(t *testing.T) {
	checkOpens(t, t.TempDir(), Default.Open)
}

func TestOpenDir(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "0a")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := Default.OpenDir(sub)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Chmod(0o750); err != nil {
		t.Errorf("Chmod through a directory's descriptor: %v", err)
	}
	d.Close()
	if fi, err := os.Stat(sub); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("mode after Chmod = %v, %v, want 0750", fi.Mode(), err)
	}
	link := filepath.Join(dir, "0b")
	if err := os.Symlink(sub, link); err != nil {
		t.Fatal(err)
	}
	_, err = Default.OpenDir(link)
	wantRefused(t, "OpenDir of a symlink to a directory", err, link)
	fifo := filepath.Join(dir, "0c")
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	_, err = testkit.Promptly(t, "OpenDir of a FIFO", []string{fifo}, func() (File, error) { return Default.OpenDir(fifo) })
	if !errors.Is(err, syscall.ENOTDIR) || !strings.Contains(err.Error(), fifo) {
		t.Errorf("OpenDir of a FIFO = %v, want ENOTDIR naming it", err)
	}
}

// TestFileChmodFollowsTheDescriptor: File.Chmod and Chown change the file
// opened, not what its name names after a swap.
func TestFileChmodFollowsTheDescriptor(t *testing.T) {
	dir := t.TempDir()
	name, other := filepath.Join(dir, "tmp"), filepath.Join(dir, "other")
	f, err := Default.Create(name, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.WriteFile(other, []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, name); err != nil { // the swap
		t.Fatal(err)
	}
	if err := f.Chmod(0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Chown(-1, os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file swapped in got mode %v (%v), want 0600 unchanged", fi.Mode(), err)
	}
	if fi, err := f.Stat(); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file created has mode %v (%v), want 0644", fi.Mode(), err)
	}
}

func TestLstat(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	fi, err := Default.Lstat(link)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(symlink) = %v, %v, want the link described", fi, err)
	}
}
