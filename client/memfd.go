package client

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Seals is the set of seals the client puts on every memfd it passes:
// the daemon requires at least F_SEAL_WRITE|F_SEAL_SHRINK|F_SEAL_GROW.
const Seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL

// Memfd is an anonymous memory file for the memfd data plane, for callers
// that produce a batch straight into shared memory (a device-to-host copy,
// a serializer) and so save the copy that Write* makes. Fill Bytes, then
// pass it to WriteOpaqueMemfd or WriteColumnarMemfd, which seal it; a
// sealed Memfd can no longer change, and can be closed as soon as the
// write returns. A Memfd is not safe for concurrent use.
type Memfd struct {
	fd     int
	size   int
	data   []byte // writable shared mapping until sealed
	sealed bool
}

// NewMemfd creates a memfd of size bytes, mapped writable.
func NewMemfd(size int) (*Memfd, error) {
	if size < 0 {
		return nil, fmt.Errorf("client: memfd size %d is negative", size)
	}
	fd, err := createMemfd()
	if err != nil {
		return nil, err
	}
	f := &Memfd{fd: fd, size: size}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("client: memfd size %d: %w", size, err)
	}
	if size > 0 {
		f.data, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("client: map memfd of %d bytes: %w", size, err)
		}
	}
	return f, nil
}

func createMemfd() (int, error) {
	fd, err := unix.MemfdCreate("shuffled-batch", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("client: memfd_create: %w", err)
	}
	return fd, nil
}

// Bytes returns the writable mapping; nil once sealed.
func (f *Memfd) Bytes() []byte { return f.data }

// Size returns the file size in bytes.
func (f *Memfd) Size() int { return f.size }

// View maps the sealed memfd read-only, for reading back what was sent:
// it returns the bytes and the function that unmaps them. The pages are
// the memfd's own; a view allocates none.
func (f *Memfd) View() ([]byte, func() error, error) {
	if f.fd < 0 {
		return nil, nil, errMemfdClosed
	}
	if !f.sealed {
		return nil, nil, errors.New("client: view of a memfd not sealed yet")
	}
	if f.size == 0 {
		return nil, func() error { return nil }, nil
	}
	b, err := unix.Mmap(f.fd, 0, f.size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("client: view memfd of %d bytes: %w", f.size, err)
	}
	return b, func() error { return unix.Munmap(b) }, nil
}

// Seal unmaps the writable mapping (F_SEAL_WRITE refuses to seal a file
// with one) and adds Seals. Sealing twice is a no-op.
func (f *Memfd) Seal() error {
	if f.fd < 0 {
		return errMemfdClosed
	}
	if f.sealed {
		return nil
	}
	if f.data != nil {
		if err := unix.Munmap(f.data); err != nil {
			return fmt.Errorf("client: unmap memfd: %w", err)
		}
		f.data = nil
	}
	if err := seal(f.fd); err != nil {
		return err
	}
	f.sealed = true
	return nil
}

func seal(fd int) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, Seals); err != nil {
		return fmt.Errorf("client: seal memfd: %w", err)
	}
	return nil
}

var errMemfdClosed = errors.New("client: memfd closed")

// Close unmaps and closes the memfd. The daemon keeps its own reference
// to a memfd it was passed.
func (f *Memfd) Close() error {
	if f.fd < 0 {
		return nil
	}
	var err error
	if f.data != nil {
		err = unix.Munmap(f.data)
		f.data = nil
	}
	if cerr := unix.Close(f.fd); err == nil {
		err = cerr
	}
	f.fd = -1
	return err
}

// sealedCopy returns a sealed memfd holding a copy of data.
func sealedCopy(data []byte) (int, error) {
	fd, err := createMemfd()
	if err != nil {
		return -1, err
	}
	for p := data; len(p) > 0; {
		n, err := unix.Write(fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("client: write %d bytes to memfd: %w", len(data), err)
		}
		p = p[n:]
	}
	if err := seal(fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
