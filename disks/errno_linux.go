package disks

import "syscall"

// ioErrnos are the errors that mean the disk, not the request, failed.
// EUCLEAN is the file system finding itself corrupt.
var ioErrnos = []error{syscall.EIO, syscall.EROFS, syscall.ENXIO, syscall.ENODEV, syscall.EUCLEAN}
