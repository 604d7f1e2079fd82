package errorfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/vfs"
)

// script runs a fixed sequence of operations, one of each counted kind,
// and returns the first error.
func script(fsys vfs.FS, dir string) error {
	sub := filepath.Join(dir, "sub")
	a, b := filepath.Join(sub, "a"), filepath.Join(sub, "b")
	if err := fsys.MkdirAll(sub, 0o755); err != nil { // 0 mkdirall
		return err
	}
	f, err := fsys.Create(a, 0o600) // 1 create
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte("hello world")); err != nil { // 2 write
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil { // 3 sync
		f.Close()
		return err
	}
	if _, err := f.Stat(); err != nil { // 4 stat
		f.Close()
		return err
	}
	if err := f.Close(); err != nil { // 5 close
		return err
	}
	if err := fsys.Chmod(a, 0o640); err != nil { // 6 chmod
		return err
	}
	if err := fsys.Link(a, b); err != nil { // 7 link
		return err
	}
	if err := fsys.Remove(b); err != nil { // 8 remove
		return err
	}
	if err := fsys.Rename(a, b); err != nil { // 9 rename
		return err
	}
	if err := fsys.SyncDir(sub); err != nil { // 10 syncdir
		return err
	}
	if _, err := fsys.ReadDir(sub); err != nil { // 11 readdir
		return err
	}
	if _, err := fsys.Stat(b); err != nil { // 12 stat
		return err
	}
	r, err := fsys.Open(b) // 13 open
	if err != nil {
		return err
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(r, buf); err != nil { // 14 read
		r.Close()
		return err
	}
	if _, err := r.ReadAt(buf, 6); err != nil { // 15 read
		r.Close()
		return err
	}
	c, err := fsys.Create(filepath.Join(sub, "c"), 0o600) // 16 create
	if err != nil {
		r.Close()
		return err
	}
	_, err = vfs.CopyRange(c, r, 0, 11)           // 17 copyrange
	return errors.Join(err, c.Close(), r.Close()) // 18, 19 close
}

var scriptKinds = []OpKind{
	OpMkdirAll, OpCreate, OpWrite, OpSync, OpStat, OpClose, OpChmod, OpLink, OpRemove, OpRename,
	OpSyncDir, OpReadDir, OpStat, OpOpen, OpRead, OpRead, OpCreate, OpCopyRange, OpClose, OpClose,
}

func TestCountsEveryOperation(t *testing.T) {
	var seen []OpKind
	fsys := New(vfs.Default, InjectorFunc(func(op Op) error {
		seen = append(seen, op.Kind)
		if op.Index != int64(len(seen)-1) {
			t.Errorf("operation %v has index %d, want %d", op, op.Index, len(seen)-1)
		}
		return nil
	}))
	if err := script(fsys, t.TempDir()); err != nil {
		t.Fatalf("script with no injection = %v, want nil", err)
	}
	if got := fsys.Ops(); got != int64(len(scriptKinds)) {
		t.Errorf("Ops() = %d, want %d", got, len(scriptKinds))
	}
	if fsys.Injected() != 0 {
		t.Errorf("Injected() = %d, want 0", fsys.Injected())
	}
	if len(seen) != len(scriptKinds) {
		t.Fatalf("injector saw %v, want %v", seen, scriptKinds)
	}
	for i := range seen {
		if seen[i] != scriptKinds[i] {
			t.Errorf("operation %d kind = %v, want %v", i, seen[i], scriptKinds[i])
		}
	}
}

// TestSweep fails each operation of the script in turn: every failure
// surfaces as an *Error naming the operation and wrapping ErrInjected.
func TestSweep(t *testing.T) {
	for i := int64(0); ; i++ {
		fsys := New(vfs.Default, OnIndex(i))
		err := script(fsys, t.TempDir())
		if fsys.Injected() == 0 {
			if err != nil {
				t.Fatalf("script with nothing injected = %v, want nil", err)
			}
			if i != int64(len(scriptKinds)) {
				t.Errorf("sweep ended at %d, want %d", i, len(scriptKinds))
			}
			return
		}
		if !errors.Is(err, ErrInjected) {
			t.Fatalf("OnIndex(%d): script = %v, want ErrInjected", i, err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Op.Index != i || e.Op.Kind != scriptKinds[i] {
			t.Errorf("OnIndex(%d): error %v, want an *Error for a %v at index %d", i, err, scriptKinds[i], i)
		}
	}
}

func TestOnOpExplicitError(t *testing.T) {
	dir := t.TempDir()
	fsys := New(vfs.Default, OnOp(OpWrite, syscall.ENOSPC))
	name := filepath.Join(dir, "f")
	f, err := fsys.Create(name, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Write([]byte("abcd"))
	if n != 0 || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrInjected) {
		t.Errorf("Write = %d, %v, want 0, ENOSPC (not ErrInjected)", n, err)
	}
	if err != nil && !strings.Contains(err.Error(), name) {
		t.Errorf("error %q does not name the file %q", err, name)
	}
	if fi, _ := os.Stat(name); fi.Size() != 0 {
		t.Errorf("failed write left %d bytes, want 0", fi.Size())
	}
	if err := fsys.Rename(name, name+"2"); err != nil {
		t.Errorf("Rename under OnOp(OpWrite) = %v, want nil", err)
	}
}

func TestOnOpRename(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fsys := New(vfs.Default, OnOp(OpRename, nil))
	err := fsys.Rename(a, b)
	var e *Error
	if !errors.As(err, &e) || e.Op.Path != a || e.Op.NewPath != b || !errors.Is(err, ErrInjected) {
		t.Fatalf("Rename(%q, %q) = %v, want an injected *Error naming both paths", a, b, err)
	}
	if _, err := os.Stat(a); err != nil {
		t.Errorf("failed Rename moved the file: Stat(%q) = %v", a, err)
	}
}

func TestShortWrite(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	fsys := New(vfs.Default, ShortWrite(OnOp(OpWrite, syscall.ENOSPC)))
	f, err := fsys.Create(name, 0o600)
	if err != nil {
		t.Fatalf("Create under ShortWrite = %v, want nil", err)
	}
	n, err := f.Write([]byte("0123456789"))
	var e *Error
	if n != 5 || !errors.As(err, &e) || !e.Short || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("short Write = %d, %v, want 5, a short ENOSPC *Error", n, err)
	}
	f.Close()
	if got, _ := os.ReadFile(name); string(got) != "01234" {
		t.Errorf("file after short write = %q, want %q", got, "01234")
	}
}

func TestShortCopyRange(t *testing.T) {
	dir := t.TempDir()
	sname, dname := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(sname, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsys := New(vfs.Default, ShortWrite(OnOp(OpCopyRange, nil)))
	s, err := fsys.Open(sname)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := fsys.Create(dname, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	n, err := vfs.CopyRange(d, s, 2, 8)
	if n != 4 || !errors.Is(err, ErrInjected) {
		t.Errorf("short CopyRange = %d, %v, want 4, ErrInjected", n, err)
	}
	d.Close()
	if got, _ := os.ReadFile(dname); string(got) != "2345" {
		t.Errorf("file after short copy = %q, want %q", got, "2345")
	}
}

func TestCopyRangeDelegates(t *testing.T) {
	dir := t.TempDir()
	sname, dname := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(sname, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsys := New(vfs.Default, nil)
	s, err := fsys.Open(sname)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := fsys.Create(dname, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	before := fsys.Ops()
	if n, err := vfs.CopyRange(d, s, 3, 4); n != 4 || err != nil {
		t.Errorf("CopyRange = %d, %v, want 4, nil", n, err)
	}
	if got := fsys.Ops() - before; got != 1 {
		t.Errorf("CopyRange counted %d operations, want 1", got)
	}
	d.Close()
	if got, _ := os.ReadFile(dname); string(got) != "3456" {
		t.Errorf("copied %q, want %q", got, "3456")
	}
}

// TestCloseFailureStillCloses checks that an injected close releases the
// descriptor: a later use of the file fails as closed.
func TestCloseFailureStillCloses(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	fsys := New(vfs.Default, OnOp(OpClose, nil))
	f, err := fsys.Create(name, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	inner := f.(*file).inner
	if err := f.Close(); !errors.Is(err, ErrInjected) {
		t.Errorf("Close = %v, want ErrInjected", err)
	}
	if _, err := inner.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write on the inner file after a failed Close = %v, want os.ErrClosed", err)
	}
}

func TestOpKindString(t *testing.T) {
	for k := OpCreate; k <= OpCopyRange; k++ {
		if s := k.String(); s == "" || strings.HasPrefix(s, "OpKind(") {
			t.Errorf("OpKind(%d).String() = %q, want a name", k, s)
		}
	}
	if got, want := OpKind(200).String(), "OpKind(200)"; got != want {
		t.Errorf("OpKind(200).String() = %q, want %q", got, want)
	}
}

// TestDescriptorOps: OpenDir counts as an open, Lstat as a stat, a File's
// Chmod and Chown as chmod and chown; each can be failed, and each passes
// through to the inner FS when not.
func TestDescriptorOps(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	run := func(fsys vfs.FS) error {
		d, err := fsys.OpenDir(dir) // 0 open
		if err != nil {
			return err
		}
		if err := d.Close(); err != nil { // 1 close
			return err
		}
		if _, err := fsys.Lstat(dir); err != nil { // 2 stat
			return err
		}
		f, err := fsys.Create(name, 0o600) // 3 create
		if err != nil {
			return err
		}
		defer os.Remove(name)
		err = f.Chmod(0o640)                             // 4 chmod
		err = errors.Join(err, f.Chown(-1, os.Getgid())) // 5 chown
		return errors.Join(err, f.Close())               // 6 close
	}
	kinds := []OpKind{OpOpen, OpClose, OpStat, OpCreate, OpChmod, OpChown, OpClose}
	var seen []OpKind
	fsys := New(vfs.Default, InjectorFunc(func(op Op) error { seen = append(seen, op.Kind); return nil }))
	if err := run(fsys); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, kinds) {
		t.Errorf("operations %v, want %v", seen, kinds)
	}
	for i := range int64(len(kinds)) {
		fsys := New(vfs.Default, OnIndex(i))
		var e *Error
		if err := run(fsys); !errors.As(err, &e) || e.Op.Kind != kinds[i] {
			t.Errorf("OnIndex(%d) = %v, want an injected %v", i, err, kinds[i])
		}
	}
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	ef, err := New(vfs.Default, nil).Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	if err := ef.Chmod(0o604); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o604 {
		t.Errorf("mode after File.Chmod through errorfs = %v, %v, want 0604", fi.Mode(), err)
	}
}
