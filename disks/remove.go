package disks

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/shuffled/shuffled/vfs"
)

// treeUsage sums the sizes of the regular files below dir and finds the
// newest modification time of anything below it.
func treeUsage(fsys vfs.FS, dir string) (bytes int64, newest time.Time, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		if notExist(err) {
			return 0, newest, nil
		}
		return 0, newest, err
	}
	var errs []error
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			if !notExist(err) {
				errs = append(errs, err)
			}
			continue
		}
		if info.ModTime().After(newest) {
			newest = info.ModTime()
		}
		switch {
		case e.IsDir():
			b, n, err := treeUsage(fsys, filepath.Join(dir, e.Name()))
			bytes += b
			if n.After(newest) {
				newest = n
			}
			if err != nil {
				errs = append(errs, err)
			}
		case info.Mode().IsRegular():
			bytes += info.Size()
		}
	}
	return bytes, newest, errors.Join(errs...)
}
