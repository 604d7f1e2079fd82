//go:build !linux

package vfs

import "os"

// copyFileRange has no kernel copy on this platform: the caller copies.
func copyFileRange(dst, src *os.File, srcOff, n int64) (done int64, fallback bool, err error) {
	return 0, true, nil
}
