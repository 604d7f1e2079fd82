// Package disks manages the daemon's own root when it spans several
// directories on different disks: it picks the disk of each new map output,
// admits its bytes against a free-space watermark, takes failing disks out
// of rotation, and finds the applications' trees on the disks (the files in
// them are listed and removed by package shufflefile, which owns the
// layout).
//
// Main invariant: every byte a map output writes is admitted first, by
// Reserve and then Grow, against a per-disk ledger that is never older than
// the bytes it admitted; no reservation is granted and no Grow succeeds
// when the bytes would take the disk's free space below its low watermark,
// however many goroutines ask at once.
//
// # Layout
//
// Each disk directory holds one tree per application and executor, with
// every executor's files in one flat directory:
//
//	<disk>/<app>/<executor>/shuffle_{s}_{m}_0.data
//	<disk>/<app>/<executor>/shuffle_{s}_{m}_0.index
//	<disk>/<app>/<executor>/shuffle_{s}_{m}_0.checksum.{ALG}
//
// Application and executor ids are plain names (shufflefile.ValidateName).
// The lifecycle operations never follow a symbolic link: one in place of
// a directory is removed as itself, and nothing behind it is touched.
// RemoveShuffle, RemoveApplication, ListShuffles and Applications work on
// these trees, through shufflefile.RemoveShuffle, RemoveAll and
// ListShuffles (which serve an executor's own Spark local dirs as well).
//
// # Placement
//
// Reserve picks disks round robin, skipping the ones out of rotation and
// the ones that cannot admit the reservation. Round robin spreads the write
// bandwidth of concurrent map outputs over every disk, which placing by most
// free space would not: with estimates of 0 every output would go to the
// one disk with the most space until its figure next changed. Space stays
// safe either way, because admission, not placement, guards the watermark.
//
// # Accounting
//
// Each disk keeps the statfs figure of its free space (Bavail × Bsize) and a
// ledger of the bytes that figure does not show yet:
//
//	pending   = unwritten estimates of live reservations
//	          + bytes admitted by Grow since the figure was read
//	available = free − pending
//
// Grow admits bytes before they are written; a Grow, or the Release, of a
// reservation confirms that the bytes of its earlier Grows are written. When
// statfs is read again, the bytes confirmed written leave the ledger (the
// figure shows them now) and the bytes of each reservation's latest Grow
// stay in it (they may not be written yet), so available never counts a
// byte as free that an admitted write will take. Bytes of a reservation
// that is released stay pending until the next read, whether they were
// committed or removed.
//
// The figure is read again, synchronously and under the disk's lock, when
// it is older than the refresh bound (WithRefresh) or when the request
// would take available below the watermark, so a decision near the
// watermark is always made on a fresh figure.
//
// # Watermarks
//
// A disk whose available space falls below the low watermark becomes full:
// Reserve refuses new map outputs on it, and Grow fails for in-flight ones
// whose bytes would not fit above the low watermark, which then abort with
// nothing committed. A full disk admits new map outputs again once its
// available space is back at or above the high watermark (hysteresis).
// ENOSPC or EDQUOT reported through ReportError makes a disk full too, and
// keeps it full for at least the refresh bound, even when statfs shows
// space (inodes or a quota may be what ran out).
//
// # Failures
//
// ReportError counts I/O errors (EIO, EROFS, ENXIO, ENODEV, and EUCLEAN on
// Linux) per disk; MaxErrors consecutive ones, with no ReportSuccess in
// between, take the disk out of rotation: Reserve never picks it, and Grow
// fails on it. Only Restore brings it back.
package disks
