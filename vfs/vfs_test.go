package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateIsExclusive(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	f, err := Default.Create(name, 0o600)
	if err != nil {
		t.Fatalf("Create(%q) = %v, want nil", name, err)
	}
	if _, err := f.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Default.Create(name, 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second Create(%q) = %v, want fs.ErrExist", name, err)
	}
	got, err := os.ReadFile(name)
	if err != nil || string(got) != "first" {
		t.Errorf("after failed Create, file = %q, %v, want %q", got, err, "first")
	}
}

func TestOpenIsReadOnly(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Default.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("y")); err == nil {
		t.Errorf("Write on a file from Open(%q) = nil, want an error", name)
	}
}

func TestLinkDoesNotClobber(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, n := range []string{a, b} {
		if err := os.WriteFile(n, []byte(n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Default.Link(a, b); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Link(%q, %q) = %v, want fs.ErrExist", a, b, err)
	}
	c := filepath.Join(dir, "c")
	if err := Default.Link(a, c); err != nil {
		t.Fatalf("Link(%q, %q) = %v, want nil", a, c, err)
	}
	if got, _ := os.ReadFile(c); string(got) != a {
		t.Errorf("linked file = %q, want %q", got, a)
	}
}

func TestDirOps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x", "y")
	if err := Default.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Default.SyncDir(dir); err != nil {
		t.Errorf("SyncDir(%q) = %v, want nil", dir, err)
	}
	if err := Default.SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SyncDir(missing) = %v, want fs.ErrNotExist", err)
	}
	name := filepath.Join(dir, "f")
	f, err := Default.Create(name, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := Default.Chmod(name, 0o640); err != nil {
		t.Fatal(err)
	}
	fi, err := Default.Stat(name)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("Stat(%q) after Chmod(0640) = %v, %v, want mode 0640", name, fi.Mode(), err)
	}
	ents, err := Default.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "f" {
		t.Errorf("ReadDir(%q) = %v, %v, want [f]", dir, ents, err)
	}
	if err := Default.Rename(name, name+"2"); err != nil {
		t.Fatal(err)
	}
	if err := Default.Remove(name + "2"); err != nil {
		t.Errorf("Remove = %v, want nil", err)
	}
}

// plainFile hides the *os.File from CopyRange, forcing the buffered copy.
type plainFile struct{ File }

// pattern returns n bytes that differ at every offset modulo 251.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

func TestCopyRange(t *testing.T) {
	src := pattern(3*copyBufSize + 17)
	wrap := map[string]func(File) File{
		"os":       func(f File) File { return f },
		"buffered": func(f File) File { return plainFile{f} },
	}
	cases := []struct {
		off, n int64
	}{
		{0, 0},
		{0, 1},
		{5, 100},
		{0, int64(len(src))},
		{1, int64(len(src)) - 1},
		{copyBufSize - 3, copyBufSize + 9},
	}
	for name, w := range wrap {
		for _, c := range cases {
			dir := t.TempDir()
			sname := filepath.Join(dir, "src")
			if err := os.WriteFile(sname, src, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Default.Open(sname)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Default.Create(filepath.Join(dir, "dst"), 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Write([]byte("head")); err != nil {
				t.Fatal(err)
			}
			got, err := CopyRange(w(d), w(s), c.off, c.n)
			if err != nil || got != c.n {
				t.Errorf("%s: CopyRange(off=%d, n=%d) = %d, %v, want %d, nil", name, c.off, c.n, got, err, c.n)
			}
			if pos, _ := s.Seek(0, io.SeekCurrent); pos != 0 {
				t.Errorf("%s: CopyRange moved the source offset to %d, want 0", name, pos)
			}
			if pos, _ := d.Seek(0, io.SeekCurrent); pos != 4+c.n {
				t.Errorf("%s: destination offset after CopyRange = %d, want %d", name, pos, 4+c.n)
			}
			s.Close()
			d.Close()
			out, err := os.ReadFile(filepath.Join(dir, "dst"))
			if err != nil {
				t.Fatal(err)
			}
			want := append([]byte("head"), src[c.off:c.off+c.n]...)
			if !bytes.Equal(out, want) {
				t.Errorf("%s: CopyRange(off=%d, n=%d) wrote %d bytes that differ from the source range", name, c.off, c.n, len(out))
			}
		}
	}
}

func TestCopyRangeShort(t *testing.T) {
	for name, w := range map[string]func(File) File{
		"os":       func(f File) File { return f },
		"buffered": func(f File) File { return plainFile{f} },
	} {
		dir := t.TempDir()
		sname, dname := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		if err := os.WriteFile(sname, pattern(100), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Default.Open(sname)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Default.Create(dname, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		got, err := CopyRange(w(d), w(s), 90, 20)
		if !errors.Is(err, ErrShortCopy) || got != 10 {
			t.Errorf("%s: CopyRange past the end = %d, %v, want 10, ErrShortCopy", name, got, err)
		}
		if err != nil {
			for _, part := range []string{sname, dname, "offset 90", "20 bytes", "copied 10"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("%s: error %q does not mention %q", name, err, part)
				}
			}
		}
		s.Close()
		d.Close()
	}
}

func TestCopyRangeNegative(t *testing.T) {
	dir := t.TempDir()
	f, err := Default.Create(filepath.Join(dir, "f"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct{ off, n int64 }{{-1, 1}, {0, -1}} {
		if _, err := CopyRange(f, f, c.off, c.n); err == nil {
			t.Errorf("CopyRange(off=%d, n=%d) = nil error, want one", c.off, c.n)
		}
	}
}

// recordingCopier records that CopyRange handed it the copy.
type recordingCopier struct {
	File
	calls int
}

func (r *recordingCopier) CopyFrom(src File, srcOff, n int64) (int64, error) {
	r.calls++
	return CopyRange(r.File, src, srcOff, n)
}

func TestCopyRangeUsesRangeCopier(t *testing.T) {
	dir := t.TempDir()
	sname := filepath.Join(dir, "src")
	if err := os.WriteFile(sname, []byte("abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Default.Open(sname)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := Default.Create(filepath.Join(dir, "dst"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rc := &recordingCopier{File: d}
	if n, err := CopyRange(rc, s, 2, 3); n != 3 || err != nil || rc.calls != 1 {
		t.Errorf("CopyRange into a RangeCopier = %d, %v with %d calls, want 3, nil, 1 call", n, err, rc.calls)
	}
}

// TestCopyRangeAcrossFileSystems copies from a tmpfs file into the test's
// temp dir when those differ, where the kernel may answer EXDEV and the
// copy must fall back to the buffer.
func TestCopyRangeAcrossFileSystems(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "vfs-test-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(shm)
	src := pattern(copyBufSize + 3)
	sname := filepath.Join(shm, "src")
	if err := os.WriteFile(sname, src, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Default.Open(sname)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dname := filepath.Join(t.TempDir(), "dst")
	d, err := Default.Create(dname, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := CopyRange(d, s, 1, int64(len(src))-1); err != nil || n != int64(len(src))-1 {
		t.Errorf("CopyRange across file systems = %d, %v, want %d, nil", n, err, len(src)-1)
	}
	d.Close()
	if got, _ := os.ReadFile(dname); !bytes.Equal(got, src[1:]) {
		t.Errorf("CopyRange across file systems wrote %d bytes that differ from the source", len(got))
	}
}

func BenchmarkCopyRange(b *testing.B) {
	const size = 8 << 20
	dir := b.TempDir()
	sname := filepath.Join(dir, "src")
	if err := os.WriteFile(sname, pattern(size), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"kernel", "buffered"} {
		b.Run("mode="+mode, func(b *testing.B) {
			s, err := Default.Open(sname)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			d, err := Default.Create(filepath.Join(dir, "dst-"+mode), 0o600)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			var dst, src File = d, s
			if mode == "buffered" {
				dst, src = plainFile{d}, plainFile{s}
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Seek(0, io.SeekStart); err != nil {
					b.Fatal(err)
				}
				if _, err := CopyRange(dst, src, 0, size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
