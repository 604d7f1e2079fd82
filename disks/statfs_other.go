//go:build !unix

package disks

import (
	"errors"
	"io/fs"
)

func statfs(dir string) (free, total uint64, err error) {
	return 0, 0, &fs.PathError{Op: "statfs", Path: dir, Err: errors.ErrUnsupported}
}

func deviceOf(fs.FileInfo) (uint64, bool) { return 0, false }
