package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 answered ENOSYS (Linux before 5.6, or a
// seccomp filter that hides it): every later resolution walks the path one
// component at a time with O_NOFOLLOW. Tests set it to exercise the walk.
var noOpenat2 atomic.Bool

const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// oLargefile is what os.Open adds on 32-bit Linux (syscall.Open does) and
// unix.Openat does not, so that files over 2 GiB open there too.
const oLargefile = unix.O_LARGEFILE

// osConfined is the confined FS of the operating system: each confining
// directory is held as an O_PATH descriptor, and every name is resolved
// relative to one of them.
type osConfined struct {
	dirs   []string
	owners []uint32
	mu     sync.RWMutex // held shared by operations, exclusively by Close
	fds    []int        // nil once closed
}

func confineOS(dirs []string, opts ConfineOptions) (Confined, error) {
	c := &osConfined{dirs: slices.Clone(dirs), owners: slices.Clone(opts.Owners)}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathErr("open", "/", err)
	}
	defer unix.Close(root)
	for _, d := range dirs {
		var fd int
		var err error
		if d == "/" {
			fd, err = unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		} else {
			fd, err = resolve(root, "/", strings.TrimPrefix(d, "/"), unix.O_PATH|unix.O_DIRECTORY, 0)
		}
		if err != nil {
			c.Close()
			return nil, pathErr("open", d, err)
		}
		c.fds = append(c.fds, fd)
	}
	return c, nil
}

func (c *osConfined) Dirs() []string { return slices.Clone(c.dirs) }

func (c *osConfined) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, fd := range c.fds {
		if err := unix.Close(fd); err != nil {
			errs = append(errs, err)
		}
	}
	c.fds = nil
	return errors.Join(errs...)
}

// resolve opens rel below dirfd (whose path is base, for messages) without
// following a symbolic link and without leaving dirfd. rel must not be ".".
func resolve(dirfd int, base, rel string, flags int, mode uint32) (int, error) {
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: resolveFlags})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS):
			noOpenat2.Store(true)
		case errors.Is(err, unix.EPERM):
			// A seccomp filter that does not know openat2 answers EPERM
			// (systemd's SystemCallErrorNumber=): if the walk succeeds,
			// that was it.
			fd, werr := walk(dirfd, base, rel, flags, mode)
			if werr == nil {
				noOpenat2.Store(true)
			}
			return fd, werr
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOTDIR):
			return -1, refusal(dirfd, base, rel, err)
		default:
			return -1, err
		}
	}
	return walk(dirfd, base, rel, flags, mode)
}

// walk opens rel below dirfd one component at a time, each directory with
// O_NOFOLLOW|O_DIRECTORY, the last with flags (which hold O_NOFOLLOW).
func walk(dirfd int, base, rel string, flags int, mode uint32) (int, error) {
	comps := strings.Split(rel, "/")
	cur, owned := dirfd, false
	defer func() {
		if owned {
			unix.Close(cur)
		}
	}()
	for i, name := range comps {
		if name == "" || name == "." || name == ".." {
			return -1, &RefusedError{Path: filepath.Join(base, rel), Reason: "is not a clean path"}
		}
		fl := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(comps)-1 {
			fl = flags
		}
		fd, err := unix.Openat(cur, name, fl, mode)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return -1, refusal(dirfd, base, strings.Join(comps[:i+1], "/"), err)
			}
			return -1, err
		}
		if owned {
			unix.Close(cur)
		}
		cur, owned = fd, true
	}
	owned = false
	return cur, nil
}

// refusal explains a resolution that met a symbolic link (or a file where a
// directory was needed): it names the first component that is one.
func refusal(dirfd int, base, rel string, cause error) error {
	comps := strings.Split(rel, "/")
	for i := range comps {
		sub := strings.Join(comps[:i+1], "/")
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, sub, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			break
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return &RefusedError{Path: filepath.Join(base, sub), Reason: "is a symbolic link"}
		case st.Mode&unix.S_IFMT != unix.S_IFDIR && i < len(comps)-1:
			return &RefusedError{Path: filepath.Join(base, sub), Reason: "is not a directory"}
		}
	}
	if errors.Is(cause, unix.ENOTDIR) {
		return cause
	}
	return &RefusedError{Path: filepath.Join(base, rel), Reason: fmt.Sprintf("cannot be reached without a symbolic link (%v)", cause)}
}

// at locates name: the confining dir's descriptor and path, and name
// relative to it. The caller holds c.mu shared.
func (c *osConfined) at(name string) (fd int, base, rel string, err error) {
	if c.fds == nil {
		return -1, "", "", errors.New("vfs: confined file system is closed")
	}
	i, rel, err := splitUnder(c.dirs, name)
	if err != nil {
		return -1, "", "", err
	}
	return c.fds[i], c.dirs[i], rel, nil
}

// dirOf opens the directory rel (relative to the confining dir fd at
// base) with flags and checks its owner when it is not the confining dir.
func (c *osConfined) dirOf(fd int, base, rel string, flags int) (int, error) {
	if rel == "." {
		return unix.Openat(fd, ".", flags|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	dfd, err := resolve(fd, base, rel, flags|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	if err := c.checkOwner(dfd, filepath.Join(base, rel)); err != nil {
		unix.Close(dfd)
		return -1, err
	}
	return dfd, nil
}

func (c *osConfined) checkOwner(fd int, path string) error {
	if len(c.owners) == 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if !slices.Contains(c.owners, st.Uid) {
		return &RefusedError{Path: path, Reason: fmt.Sprintf("belongs to uid %d, not to one of %v", st.Uid, c.owners)}
	}
	return nil
}

// parent opens the directory that holds name (O_PATH) and returns it with
// name's last component. name must not be a confining dir.
func (c *osConfined) parent(name string) (pfd int, last string, err error) {
	fd, base, rel, err := c.at(name)
	if err != nil {
		return -1, "", err
	}
	if rel == "." {
		return -1, "", &RefusedError{Path: name, Reason: "is a confining directory"}
	}
	dir, last := filepath.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	pfd, err = c.dirOf(fd, base, dir, unix.O_PATH)
	return pfd, last, err
}

// withParent runs op on name's parent descriptor and last component.
func (c *osConfined) withParent(opName, name string, op func(pfd int, last string) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	pfd, last, err := c.parent(name)
	if err != nil {
		return pathErr(opName, name, err)
	}
	defer unix.Close(pfd)
	return pathErr(opName, name, op(pfd, last))
}

// Create makes name with O_CREAT|O_EXCL|O_NOFOLLOW: it never opens
// anything that exists (a FIFO or a symbolic link planted under the name
// fails it with EEXIST), so it cannot block on one either.
func (c *osConfined) Create(name string, perm fs.FileMode) (File, error) {
	var f File
	err := c.withParent("create", name, func(pfd int, last string) error {
		fd, err := unix.Openat(pfd, last, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err != nil {
			return err
		}
		f = os.NewFile(uintptr(fd), name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Open opens the regular file name without following it and without
// blocking (openRegular): a FIFO, a device, a socket or a directory under
// the name is refused, naming it and what it is, before anything is read.
func (c *osConfined) Open(name string) (File, error) {
	var f File
	err := c.withParent("open", name, func(pfd int, last string) error {
		of, err := openRegular(pfd, last, unix.O_NOFOLLOW, name)
		if errors.Is(err, unix.ELOOP) {
			return &RefusedError{Path: name, Reason: "is a symbolic link"}
		}
		if err != nil {
			return err
		}
		f = of
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// OpenDir opens the directory name, a confining dir or one below it
// reached without a symbolic link and owned by an allowed uid (as every
// directory of an operation is), for reading.
func (c *osConfined) OpenDir(name string) (File, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fd, base, rel, err := c.at(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	dfd, err := c.dirOf(fd, base, rel, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return os.NewFile(uintptr(dfd), name), nil
}

func (c *osConfined) Remove(name string) error {
	return c.withParent("remove", name, func(pfd int, last string) error {
		err := unix.Unlinkat(pfd, last, 0)
		if err == nil {
			return nil
		}
		err1 := unix.Unlinkat(pfd, last, unix.AT_REMOVEDIR)
		if err1 == nil {
			return nil
		}
		if !errors.Is(err1, unix.ENOTDIR) {
			return err1
		}
		return err
	})
}

func (c *osConfined) Rename(oldname, newname string) error {
	return c.twoParents("rename", oldname, newname, func(ofd int, olast string, nfd int, nlast string) error {
		return unix.Renameat(ofd, olast, nfd, nlast)
	})
}

func (c *osConfined) Link(oldname, newname string) error {
	return c.twoParents("link", oldname, newname, func(ofd int, olast string, nfd int, nlast string) error {
		return unix.Linkat(ofd, olast, nfd, nlast, 0)
	})
}

func (c *osConfined) twoParents(opName, oldname, newname string, op func(int, string, int, string) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ofd, olast, err := c.parent(oldname)
	if err != nil {
		return &os.LinkError{Op: opName, Old: oldname, New: newname, Err: err}
	}
	defer unix.Close(ofd)
	nfd, nlast, err := c.parent(newname)
	if err != nil {
		return &os.LinkError{Op: opName, Old: oldname, New: newname, Err: err}
	}
	defer unix.Close(nfd)
	if err := op(ofd, olast, nfd, nlast); err != nil {
		return &os.LinkError{Op: opName, Old: oldname, New: newname, Err: err}
	}
	return nil
}

// MkdirAll makes the missing directories of dir below its confining dir,
// each with perm less the umask, refusing a component that is a symbolic
// link or belongs to a uid not allowed.
func (c *osConfined) MkdirAll(dir string, perm fs.FileMode) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fd, base, rel, err := c.at(dir)
	if err != nil {
		return pathErr("mkdir", dir, err)
	}
	if rel == "." {
		return nil
	}
	cur, owned := fd, false
	defer func() {
		if owned {
			unix.Close(cur)
		}
	}()
	path := base
	for _, name := range strings.Split(rel, "/") {
		path = filepath.Join(path, name)
		if err := unix.Mkdirat(cur, name, syscallMode(perm)); err != nil && !errors.Is(err, unix.EEXIST) {
			return pathErr("mkdir", path, err)
		}
		next, err := unix.Openat(cur, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				err = refusal(cur, filepath.Dir(path), name, err)
			}
			return pathErr("mkdir", path, err)
		}
		if owned {
			unix.Close(cur)
		}
		cur, owned = next, true
		if err := c.checkOwner(cur, path); err != nil {
			return pathErr("mkdir", path, err)
		}
	}
	return nil
}

func (c *osConfined) ReadDir(dir string) ([]fs.DirEntry, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fd, base, rel, err := c.at(dir)
	if err != nil {
		return nil, pathErr("readdir", dir, err)
	}
	dfd, err := c.dirOf(fd, base, rel, unix.O_RDONLY)
	if err != nil {
		return nil, pathErr("readdir", dir, err)
	}
	d := os.NewFile(uintptr(dfd), dir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, pathErr("readdir", dir, err)
	}
	slices.Sort(names)
	out := make([]fs.DirEntry, 0, len(names))
	for _, name := range names {
		fi, err := statAt(dfd, name, filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, pathErr("readdir", dir, err)
		}
		out = append(out, fs.FileInfoToDirEntry(fi))
	}
	return out, nil
}

// statAt describes name in the directory dfd without following it.
func statAt(dfd int, name, path string) (fs.FileInfo, error) {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return f.Stat()
}

// Stat describes name. A name that is a symbolic link is refused.
func (c *osConfined) Stat(name string) (fs.FileInfo, error) { return c.stat("stat", name, true) }

// Lstat describes name without following it: a symbolic link as the last
// component is described; one above it is refused, as everywhere.
func (c *osConfined) Lstat(name string) (fs.FileInfo, error) { return c.stat("lstat", name, false) }

// stat describes name, its last component not followed; refuseLink
// refuses it when that is a symbolic link.
func (c *osConfined) stat(op, name string, refuseLink bool) (fs.FileInfo, error) {
	c.mu.RLock()
	fd, _, rel, err := c.at(name)
	if err == nil && rel == "." {
		defer c.mu.RUnlock()
		return statAt(fd, ".", name)
	}
	c.mu.RUnlock()
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	var fi fs.FileInfo
	err = c.withParent(op, name, func(pfd int, last string) error {
		var err error
		fi, err = statAt(pfd, last, name)
		if err == nil && refuseLink && fi.Mode()&fs.ModeSymlink != 0 {
			return &RefusedError{Path: name, Reason: "is a symbolic link"}
		}
		return err
	})
	return fi, err
}

func (c *osConfined) SyncDir(dir string) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fd, base, rel, err := c.at(dir)
	if err != nil {
		return pathErr("sync", dir, err)
	}
	dfd, err := c.dirOf(fd, base, rel, unix.O_RDONLY)
	if err != nil {
		return pathErr("sync", dir, err)
	}
	defer unix.Close(dfd)
	return pathErr("sync", dir, unix.Fsync(dfd))
}

// Chmod sets name's mode through a descriptor opened without following a
// link (fchmodat cannot refuse one) and without blocking (O_NONBLOCK); it
// refuses anything but a regular file or a directory. It acts on whatever
// name names by then: File.Chmod is the form for a file just made.
func (c *osConfined) Chmod(name string, mode fs.FileMode) error {
	return c.withParent("chmod", name, func(pfd int, last string) error {
		fd, err := unix.Openat(pfd, last, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ELOOP) {
			return &RefusedError{Path: name, Reason: "is a symbolic link"}
		}
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if typ := unixType(st.Mode); typ != fs.ModeDir {
			if err := CheckRegular(name, typ); err != nil {
				return err
			}
		}
		return unix.Fchmod(fd, syscallMode(mode))
	})
}

func (c *osConfined) Chown(name string, uid, gid int) error {
	return c.withParent("chown", name, func(pfd int, last string) error {
		return unix.Fchownat(pfd, last, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// CheckWritable reports whether the caller may create and remove files in
// dir (write and search permission, by the effective ids; faccessat with
// AT_EACCESS), without following a symbolic link.
func (c *osConfined) CheckWritable(dir string) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fd, base, rel, err := c.at(dir)
	if err != nil {
		return pathErr("access", dir, err)
	}
	dfd, err := c.dirOf(fd, base, rel, unix.O_PATH)
	if err != nil {
		return pathErr("access", dir, err)
	}
	defer unix.Close(dfd)
	return pathErr("access", dir, unix.Faccessat(dfd, ".", unix.W_OK|unix.X_OK, unix.AT_EACCESS))
}

// syscallMode converts a FileMode's permission and special bits.
func syscallMode(m fs.FileMode) uint32 {
	o := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		o |= syscall.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		o |= syscall.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		o |= syscall.S_ISVTX
	}
	return o
}
