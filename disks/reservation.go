package disks

import "fmt"

// Reservation is the space of one map output on one disk: the estimate it
// was reserved with, then every byte admitted by Grow. Release it exactly
// once the output is committed or aborted; a Reservation must not be
// dropped without Release, or its estimate stays reserved.
//
// Grow admits bytes before they are written, and confirms that the bytes
// of the reservation's earlier Grows are written: call Grow and write the
// bytes in turn, from one goroutine at a time. (Goroutines that share a
// reservation and write at once are still admitted exactly, but a fresh
// free-space figure may then count their in-flight bytes as written for an
// instant.)
type Reservation struct {
	d        *Disk
	app      string
	estimate int64
	// The rest is guarded by d.mu.
	grown    int64 // bytes admitted by Grow
	last     int64 // bytes of the latest Grow
	released bool
}

// Disk returns the disk the reservation is on: the map output's files go
// to its ExecutorDir.
func (r *Reservation) Disk() *Disk { return r.d }

// App returns the application the reservation was made for.
func (r *Reservation) App() string { return r.app }

// Grow admits n more bytes of the map output, about to be written. It
// fails with ErrDiskFull, and admits nothing, when they would take the
// disk's available space below its low watermark (the disk is then full);
// with ErrDiskFailed when the disk is out of rotation; and with
// ErrReleased after Release. On failure, abort the map output and Release.
func (r *Reservation) Grow(n int64) error {
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case r.released:
		return fmt.Errorf("%w: grow by %d bytes on disk %s", ErrReleased, n, d.dir)
	case n < 0:
		return fmt.Errorf("%w: grow by %d bytes is negative", ErrInvalidArgument, n)
	case d.mu.out:
		return fmt.Errorf("%w: disk %s: %s", ErrDiskFailed, d.dir, d.outReasonLocked())
	}
	// Bytes within the estimate are pending already; only the rest adds.
	covered := min(n, max(r.estimate-r.grown, 0))
	extra := n - covered
	avail, low, _ := d.figuresLocked()
	if d.staleLocked() || avail-extra < low {
		if err := d.readLocked(); err != nil {
			return fmt.Errorf("disks: grow on disk %s: statfs: %w", d.dir, err)
		}
		avail, low, _ = d.figuresLocked()
	}
	if avail-extra < low {
		d.mu.failedGrows++
		d.setFullLocked(avail-extra, low, "a write in flight reached the low watermark")
		return fmt.Errorf("%w: disk %s: %d more bytes of application %q do not fit: %s",
			ErrDiskFull, d.dir, n, r.app, d.spaceReasonLocked(avail, low))
	}
	d.mu.unwritten -= covered
	d.mu.granted += n
	d.mu.inFlight += n - r.last
	r.grown += n
	r.last = n
	return nil
}

// Release ends the reservation: its unused estimate is free again at once,
// and the bytes it wrote leave the ledger when the disk's free-space figure
// is next read (committed, they show in it; removed, they are free).
// Release is idempotent.
func (r *Reservation) Release() {
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.released {
		return
	}
	r.released = true
	d.mu.unwritten -= max(r.estimate-r.grown, 0)
	d.mu.inFlight -= r.last
	r.last = 0
}
