package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// errEscapes: the path leads, through a symbolic link or "..", out of the
// allowed root it names.
var errEscapes = errors.New("leads out of its allowed root")

// errNoBeneath: the kernel cannot resolve beneath a directory (openat2,
// Linux 5.6).
var errNoBeneath = errors.New("openat2 unavailable")

// resolveBeneath resolves rel (relative, clean) inside the directory root
// and returns the absolute path it names, following symbolic links that
// stay inside root. The kernel refuses, before it looks any further, a
// step that would leave root (errEscapes): so what the answer says of
// the files it meets is only ever about root's own tree.
func resolveBeneath(root, rel string) (string, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH})
	switch {
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM) && rel != "": // EPERM: a seccomp filter that does not know openat2
		return "", errNoBeneath
	case errors.Is(err, unix.EXDEV):
		return "", errEscapes
	case err != nil:
		return "", &os.PathError{Op: "open", Path: filepath.Join(root, rel), Err: err}
	}
	defer unix.Close(fd)
	resolved, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", filepath.Join(root, rel), err)
	}
	return resolved, nil
}
