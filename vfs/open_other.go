//go:build !unix

package vfs

import (
	"os"
)

// Open opens name and refuses it unless it is a regular file. Without
// O_NONBLOCK on this platform, the open itself is os.Open's.
func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = CheckRegular(name, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, pathErr("open", name, err)
	}
	return f, nil
}

// OpenDir opens name and refuses it unless it is a directory, itself not
// a symbolic link.
func (osFS) OpenDir(name string) (File, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil, pathErr("open", name, &RefusedError{Path: name, Reason: "is a symbolic link"})
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err == nil && !fi.IsDir() {
		err = &RefusedError{Path: name, Reason: "is not a directory"}
	}
	if err != nil {
		f.Close()
		return nil, pathErr("open", name, err)
	}
	return f, nil
}
