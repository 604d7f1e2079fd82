package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/testkit"
	"golang.org/x/sys/unix"
)

// eachResolver runs f with openat2 and with the per-component walk.
func eachResolver(t *testing.T, f func(t *testing.T)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			was := noOpenat2.Load()
			noOpenat2.Store(walk)
			defer noOpenat2.Store(was)
			f(t)
		})
	}
}

func mustConfine(t *testing.T, dirs []string, owners ...uint32) Confined {
	t.Helper()
	c, err := Confine(Default, dirs, ConfineOptions{Owners: owners})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConfinedOperations(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		dir := t.TempDir()
		c := mustConfine(t, []string{dir}, uint32(os.Getuid()))
		sub := filepath.Join(dir, "0a")
		if err := c.MkdirAll(sub, 0o775); err != nil {
			t.Fatal(err)
		}
		f, err := c.Create(filepath.Join(sub, "a.tmp"), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("hello"))
		f.Close()
		if err := c.Rename(filepath.Join(sub, "a.tmp"), filepath.Join(sub, "a")); err != nil {
			t.Fatal(err)
		}
		if err := c.Link(filepath.Join(sub, "a"), filepath.Join(sub, "b")); err != nil {
			t.Fatal(err)
		}
		if err := c.Chmod(filepath.Join(sub, "a"), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := c.Stat(filepath.Join(sub, "a"))
		if err != nil || fi.Size() != 5 || fi.Mode().Perm() != 0o644 {
			t.Fatalf("Stat = %v, %v; want 5 bytes, 0644", fi, err)
		}
		ents, err := c.ReadDir(sub)
		if err != nil || len(ents) != 2 || ents[0].Name() != "a" || ents[1].Name() != "b" {
			t.Fatalf("ReadDir = %v, %v", ents, err)
		}
		if err := c.SyncDir(sub); err != nil {
			t.Fatal(err)
		}
		if err := c.Remove(filepath.Join(sub, "b")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Stat(filepath.Join(sub, "b")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat of a removed file = %v, want ErrNotExist", err)
		}
		if _, err := c.Open(filepath.Join(dir, "..", "etc", "passwd")); !errors.Is(err, ErrRefused) {
			t.Errorf("Open outside = %v, want refused", err)
		}
	})
}

func TestConfinedRefusesSymlinks(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		dir, outside := t.TempDir(), t.TempDir()
		c := mustConfine(t, []string{dir})
		link := filepath.Join(dir, "0d")
		if err := os.Symlink(outside, link); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "x"), []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := c.Create(filepath.Join(link, "f"), 0o600)
		wantRefused(t, "Create through a symlinked sub-dir", err, link)
		_, err = c.Open(filepath.Join(link, "x"))
		wantRefused(t, "Open through a symlinked sub-dir", err, link)
		wantRefused(t, "MkdirAll of a symlinked sub-dir", c.MkdirAll(link, 0o755), link)
		_, err = c.Stat(link)
		wantRefused(t, "Stat of a symlinked sub-dir", err, link)
		_, err = c.ReadDir(link)
		wantRefused(t, "ReadDir of a symlinked sub-dir", err, link)
		if err := os.Symlink(filepath.Join(outside, "x"), filepath.Join(dir, "file-link")); err != nil {
			t.Fatal(err)
		}
		_, err = c.Open(filepath.Join(dir, "file-link"))
		wantRefused(t, "Open of a symlinked file", err, filepath.Join(dir, "file-link"))
		wantRefused(t, "Chmod of a symlinked file", c.Chmod(filepath.Join(dir, "file-link"), 0o777), filepath.Join(dir, "file-link"))
		if err := c.Remove(filepath.Join(dir, "file-link")); err != nil {
			t.Errorf("Remove of a symlink itself: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(outside, "x")); err != nil || string(b) != "secret" {
			t.Errorf("the symlink's target changed: %q, %v", b, err)
		}

		// The confining dir itself swapped for a symlink after Confine:
		// operations still go to the directory opened.
		moved := dir + ".moved"
		if err := os.Rename(dir, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, dir); err != nil {
			t.Fatal(err)
		}
		f, err := c.Create(filepath.Join(dir, "after-swap"), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if _, err := os.Stat(filepath.Join(outside, "after-swap")); err == nil {
			t.Errorf("a file created after the swap landed in the symlink's target")
		}
		if _, err := os.Stat(filepath.Join(moved, "after-swap")); err != nil {
			t.Errorf("the file is not in the directory opened: %v", err)
		}
		os.Remove(dir)
		os.Rename(moved, dir)
	})
}

func TestConfinedRefusesForeignOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving a directory to another uid needs root; CI runs as root")
	}
	eachResolver(t, func(t *testing.T) {
		dir := t.TempDir()
		sub := filepath.Join(dir, "1f")
		if err := os.Mkdir(sub, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(sub, 54321, 54321); err != nil {
			t.Fatal(err)
		}
		c := mustConfine(t, []string{dir}, 0)
		_, err := c.Create(filepath.Join(sub, "f"), 0o600)
		wantRefused(t, "Create in a foreign-owned sub-dir", err, sub)
		wantRefused(t, "MkdirAll of a foreign-owned sub-dir", c.MkdirAll(sub, 0o755), sub)
	})
}

func TestConfinedCheckWritable(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "0a")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	c := mustConfine(t, []string{dir})
	wc := c.(WritableChecker)
	if err := wc.CheckWritable(sub); err != nil {
		t.Errorf("CheckWritable of an own dir: %v", err)
	}
	if err := wc.CheckWritable(dir); err != nil {
		t.Errorf("CheckWritable of the confining dir: %v", err)
	}
	if os.Geteuid() == 0 {
		return // root may write anywhere; the separate-users test covers the refusal
	}
	if err := os.Chmod(sub, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(sub, 0o755)
	if err := wc.CheckWritable(sub); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("CheckWritable of a read-only dir = %v, want a permission error", err)
	}
}

// TestConfinedOpenRefusesNonRegular: Open through the confined FS, with
// either resolver, refuses a FIFO (without blocking on it), a socket and a
// directory, naming each and what it is, and opens a regular file in
// blocking mode.
func TestConfinedOpenRefusesNonRegular(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		dir := t.TempDir()
		sub := filepath.Join(dir, "0a")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		c := mustConfine(t, []string{dir}, uint32(os.Getuid()))
		checkOpens(t, sub, c.Open)
		fifo := filepath.Join(sub, "shuffle_0_5_0.index")
		wantNotRegular(t, "Chmod of a FIFO", c.Chmod(fifo, 0o644), fifo, "is a FIFO, not a regular file")
	})
}

func TestConfinedOpenDirAndLstat(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		dir, outside := t.TempDir(), t.TempDir()
		sub := filepath.Join(dir, "0a")
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		c := mustConfine(t, []string{dir}, uint32(os.Getuid()))
		for _, name := range []string{dir, sub} {
			d, err := c.OpenDir(name)
			if err != nil {
				t.Fatalf("OpenDir(%s) = %v", name, err)
			}
			if fi, err := d.Stat(); err != nil || !fi.IsDir() {
				t.Errorf("OpenDir(%s).Stat() = %v, %v, want a directory", name, fi, err)
			}
			d.Close()
		}
		link := filepath.Join(dir, "0b")
		if err := os.Symlink(outside, link); err != nil {
			t.Fatal(err)
		}
		_, err := c.OpenDir(link)
		wantRefused(t, "OpenDir of a symlinked sub-dir", err, link)
		fifo := filepath.Join(dir, "0c")
		if err := unix.Mkfifo(fifo, 0o666); err != nil {
			t.Fatal(err)
		}
		if _, err := testkit.Promptly(t, "OpenDir of a FIFO", []string{fifo}, func() (File, error) { return c.OpenDir(fifo) }); err == nil || !strings.Contains(err.Error(), fifo) {
			t.Errorf("OpenDir of a FIFO = %v, want an error naming it", err)
		}
		fi, err := c.Lstat(link)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Lstat of a symlink = %v, %v, want the link described", fi, err)
		}
		_, err = c.Lstat(filepath.Join(link, "x"))
		wantRefused(t, "Lstat through a symlinked sub-dir", err, link)
	})
}
