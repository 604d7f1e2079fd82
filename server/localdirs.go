package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// allowedDir resolves a client-named local dir and checks that it is a
// directory under one of the allowed roots, after symlinks. Whether the
// peer owns it is checked on the opened directory (checkLocalDirs).
//
// Resolving runs with the daemon's rights, so what its errors say must be
// about the allowed roots' trees only, never about what lies where the peer
// cannot look: the path as given must name an allowed root (as configured
// or resolved) first, and it is then resolved beneath that root
// (resolveBeneath), where a step out of it is refused before the kernel
// looks further. A path that leads out of its root (a symbolic link to
// another allowed root aside) gets one answer, whatever is there.
func (s *Server) allowedDir(dir string) (string, error) {
	clean, root := filepath.Clean(dir), ""
	for i, r := range s.roots {
		for _, cand := range []string{r, filepath.Clean(s.cfg.AllowedRoots[i])} {
			if root == "" && underDir(clean, cand) {
				root = cand
			}
		}
	}
	if root == "" {
		return "", fmt.Errorf("%w: %q is not under an allowed root %v", errdefs.ErrPermissionDenied, dir, s.cfg.AllowedRoots)
	}
	rel, err := filepath.Rel(root, clean)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", errdefs.ErrInvalidArgument, dir, err)
	}
	resolved, err := resolveBeneath(root, rel)
	switch {
	case errors.Is(err, errEscapes):
		// Only a link into another allowed root is followed; the answer
		// is the same whether the path leads nowhere, to a file or to a
		// directory outside the roots.
		if r, err := filepath.EvalSymlinks(dir); err == nil && s.underRoots(r) {
			resolved = r
			break
		}
		return "", fmt.Errorf("%w: %q %v, to nothing under an allowed root %v", errdefs.ErrPermissionDenied, dir, errEscapes, s.cfg.AllowedRoots)
	case errors.Is(err, errNoBeneath):
		if resolved, err = filepath.EvalSymlinks(dir); err != nil {
			return "", fmt.Errorf("%w: %q: %v", errdefs.ErrInvalidArgument, dir, err)
		}
	case err != nil:
		return "", fmt.Errorf("%w: %q: %v", errdefs.ErrInvalidArgument, dir, err)
	}
	if fi, err := s.fs.Stat(resolved); err != nil {
		return "", fmt.Errorf("%w: %q: %v", errdefs.ErrInvalidArgument, dir, err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%w: %q is not a directory", errdefs.ErrInvalidArgument, dir)
	}
	if !s.underRoots(resolved) {
		return "", fmt.Errorf("%w: %q (resolved %q) is not under an allowed root %v", errdefs.ErrPermissionDenied, dir, resolved, s.roots)
	}
	return resolved, nil
}

// underRoots reports whether the resolved path p lies under an allowed
// root.
func (s *Server) underRoots(p string) bool {
	for _, root := range s.roots {
		if underDir(p, root) {
			return true
		}
	}
	return false
}

// underDir reports whether the clean path p is dir or lies below it.
func underDir(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// checkLocalDirs checks the opened local dirs of a registration: each a
// directory of the peer (root and the daemon's own user aside: a client may
// name only its own executor's dirs), and each, with the hashed sub-dirs it
// already has, writable by the daemon, so that a setup that cannot work is
// refused at registration, plainly, rather than at the first commit.
func (s *Server) checkLocalDirs(r *shufflefile.Root, uid uint32) error {
	fsys := r.FS()
	tops, _ := r.Dirs()
	for i, d := range tops {
		fi, err := fsys.Stat(d)
		if err != nil {
			return fmt.Errorf("%w: RegisterExecutor.local_dirs[%d] %q: %v", errdefs.ErrInvalidArgument, i, d, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%w: RegisterExecutor.local_dirs[%d] %q is not a directory", errdefs.ErrInvalidArgument, i, d)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && uid != 0 && uid != uint32(os.Getuid()) && st.Uid != uid {
			return fmt.Errorf("%w: RegisterExecutor.local_dirs[%d] %q belongs to uid %d, not to the peer's uid %d", errdefs.ErrPermissionDenied, i, d, st.Uid, uid)
		}
	}
	dirs, err := shufflefile.ListDirs(fsys, r)
	if err != nil {
		return fmt.Errorf("%w: RegisterExecutor.local_dirs: %v", errdefs.ErrPermissionDenied, err)
	}
	for _, d := range dirs {
		if err := probeWritable(fsys, d); err != nil {
			return fmt.Errorf("%w: the daemon (uid %d) cannot create files in %s: %v; "+
				"local dirs and their sub-dirs must be writable by a group the daemon is in "+
				"(Spark makes them so with spark.shuffle.service.removeShuffle=true)", errdefs.ErrPermissionDenied, os.Getuid(), d, err)
		}
	}
	return nil
}

// probeWritable checks that the daemon may create files in dir: by
// faccessat where the file system can, else by creating and removing a
// temp file.
func probeWritable(fsys vfs.FS, dir string) error {
	if wc, ok := fsys.(vfs.WritableChecker); ok {
		return wc.CheckWritable(dir)
	}
	name := shufflefile.TempName(filepath.Join(dir, "probe"))
	f, err := fsys.Create(name, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return fsys.Remove(name)
}
