package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/shufflefile"
	"golang.org/x/sys/unix"
)

// LockName is the file in each root dir that a serving daemon holds an
// exclusive lock (flock) on, with its pid in it. Like every name the
// daemon keeps in a root dir it starts with shufflefile.DaemonPrefix, which
// no application id may.
const LockName = shufflefile.DaemonPrefix + "shuffled.lock"

// ErrRootLocked means another process holds a root dir's lock.
var ErrRootLocked = errdefs.New(errdefs.ErrFailedPrecondition, "server: root dir in use by another daemon")

// RootLock holds the locks of a daemon's root dirs; Close releases them.
type RootLock struct {
	files []*os.File
}

// LockRoots takes an exclusive lock on every dir of cfg's Root, creating
// the dirs (0750) and their lock files as needed, and writes this
// process's pid into each. If a dir is locked already it releases what it
// took and returns ErrRootLocked naming the dir and the holder's pid: two
// daemons on one root would sweep each other's temp files and remove each
// other's outputs. The lock goes with the process, whatever ends it.
func LockRoots(cfg Config) (*RootLock, error) {
	cfg.EnsureDefaults()
	l := &RootLock{}
	for _, dir := range cfg.RootDirs() {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			l.Close()
			return nil, fmt.Errorf("server: root dir %s: %w", dir, err)
		}
		path := filepath.Join(dir, LockName)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("server: root dir lock %s: %w", path, err)
		}
		if err := flock(f); err != nil {
			pid := readPid(f)
			f.Close()
			l.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: --root %s is locked by pid %s (%s); stop that daemon or give this one another --root", ErrRootLocked, dir, pid, path)
			}
			return nil, fmt.Errorf("server: root dir lock %s: %w", path, err)
		}
		l.files = append(l.files, f)
		if err := f.Truncate(0); err == nil {
			_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("server: root dir lock %s: writing the pid: %w", path, err)
		}
	}
	return l, nil
}

func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// readPid returns the pid a lock file names, or "unknown".
func readPid(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid := strings.TrimSpace(string(b[:n]))
	if _, err := strconv.Atoi(pid); err != nil {
		return "unknown"
	}
	return pid
}

// Close releases the locks. The files stay: removing one could let a third
// daemon lock a new file while a second still holds the old one.
func (l *RootLock) Close() error {
	var errs []error
	for _, f := range l.files {
		errs = append(errs, f.Close())
	}
	l.files = nil
	return errors.Join(errs...)
}
