//go:build !linux

package disks

import "syscall"

// ioErrnos are the errors that mean the disk, not the request, failed.
var ioErrnos = []error{syscall.EIO, syscall.EROFS, syscall.ENXIO, syscall.ENODEV}
