package server

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// requiredSeals are the seals a memfd must carry before the daemon maps it:
// with them the client can neither change nor resize the pages the daemon
// reads while the client runs on.
const requiredSeals = unix.F_SEAL_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW

// mapMemfd maps bytes [off, off+length) of a sealed memfd read-only. It
// takes ownership of fd (closed before it returns, on every path) and
// returns the bytes and the function that unmaps them.
func mapMemfd(fd int, off, length int64) ([]byte, func(), error) {
	defer unix.Close(fd)
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: memfd: F_GET_SEALS: %v (is it a memfd created with MFD_ALLOW_SEALING?)", errInvalid, err)
	}
	if seals&requiredSeals != requiredSeals {
		return nil, nil, fmt.Errorf("%w: memfd seals %#x lack F_SEAL_WRITE|F_SEAL_SHRINK|F_SEAL_GROW (%#x)", errInvalid, seals, requiredSeals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, fmt.Errorf("memfd: fstat: %w", err)
	}
	if off < 0 || length < 0 || off > st.Size || length > st.Size-off {
		return nil, nil, fmt.Errorf("%w: memfd region [%d, %d+%d) past its size %d", errInvalid, off, off, length, st.Size)
	}
	if length == 0 {
		return nil, func() {}, nil
	}
	// Reading a hole of a memfd allocates it, charged to the daemon and
	// outside the bytes-in-flight limit; a batch the client really wrote
	// has no holes. The rule is on the region's own pages: the first hole
	// at or after off must lie at or past its end.
	hole, err := unix.Seek(fd, off, unix.SEEK_HOLE)
	if err != nil {
		return nil, nil, fmt.Errorf("memfd: lseek SEEK_HOLE at %d: %w", off, err)
	}
	if hole < off+length {
		return nil, nil, fmt.Errorf("%w: memfd region [%d, %d) has holes (the first at byte %d): write every byte of a batch before sending it", errInvalid, off, off+length, hole)
	}
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	// MAP_POPULATE maps every page now, in one call, rather than one fault
	// per 4 KiB page while the encoders read.
	mem, err := unix.Mmap(fd, start, int(off-start+length), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, nil, fmt.Errorf("memfd: mmap %d bytes at %d: %w", off-start+length, start, err)
	}
	return mem[off-start:], func() { _ = unix.Munmap(mem) }, nil
}
