//go:build !linux

package vfs

import "os"

// preallocate does nothing on this platform.
func preallocate(f *os.File, off, n int64) {}
