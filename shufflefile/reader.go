package shufflefile

import (
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// MapOutput is a committed map output opened for reading. Its data file
// stays open until Close. Its methods other than Close are safe for
// concurrent use; Close must not overlap them.
type MapOutput struct {
	ID        ID
	Algorithm checksum.Algorithm
	// Offsets are the index file's numPartitions+1 offsets.
	Offsets []int64
	// Lengths are the partitions' on-disk lengths.
	Lengths []int64
	// Checksums are the partitions' checksums; nil with checksum.None.
	Checksums []uint32

	DataPath, IndexPath, ChecksumPath string

	data vfs.File
}

// Open opens the committed map output id, checking that its files agree:
// the index holds 8*(n+1) bytes of offsets starting at 0 and never
// decreasing, the last offset is the data file's length, and, unless alg
// is checksum.None, the checksum file holds 8*n bytes of 32-bit values.
// A missing index (nothing committed) is an error that wraps
// fs.ErrNotExist; files that disagree give an error that wraps ErrCorrupt.
// Open does not read the data; Verify does.
func Open(fsys vfs.FS, l Layout, id ID, alg checksum.Algorithm) (*MapOutput, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if alg > checksum.CRC32C {
		return nil, fmt.Errorf("shufflefile: open %v: unknown checksum algorithm %v", id, alg)
	}
	m := &MapOutput{
		ID:        id,
		Algorithm: alg,
		DataPath:  Path(l, DataName(id)),
		IndexPath: Path(l, IndexName(id)),
	}
	if alg != checksum.None {
		m.ChecksumPath = Path(l, ChecksumName(id, alg))
	}
	if err := m.open(fsys); err != nil {
		return nil, fmt.Errorf("open %v: %w", id, err)
	}
	return m, nil
}

// open reads the index and checksum files and opens the data file.
func (m *MapOutput) open(fsys vfs.FS) (err error) {
	if m.Offsets, err = readIndex(fsys, m.IndexPath); err != nil {
		return err
	}
	m.Lengths = lengthsOf(m.Offsets)
	n := len(m.Lengths)
	data, err := fsys.Open(m.DataPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: index %s has no data file: %w", ErrCorrupt, m.IndexPath, err)
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			data.Close()
		}
	}()
	fi, err := data.Stat()
	if err != nil {
		return err
	}
	if last := m.Offsets[n]; fi.Size() != last {
		return fmt.Errorf("%w: data file %s holds %d bytes, index %s says %d",
			ErrCorrupt, m.DataPath, fi.Size(), m.IndexPath, last)
	}
	if m.Algorithm != checksum.None {
		b, err := readSmallFile(fsys, m.ChecksumPath, 8*int64(n))
		if err != nil {
			return err
		}
		if len(b) != 8*n {
			return fmt.Errorf("%w: checksum file %s holds %d bytes, want %d for %d partitions",
				ErrCorrupt, m.ChecksumPath, len(b), 8*n, n)
		}
		if m.Checksums, err = ParseChecksums(b); err != nil {
			return fmt.Errorf("%s: %w", m.ChecksumPath, err)
		}
	}
	m.data = data
	return nil
}

// readIndex reads and parses the index file at path. A missing file wraps
// fs.ErrNotExist, a malformed one ErrCorrupt; other errors are I/O errors.
func readIndex(fsys vfs.FS, path string) ([]int64, error) {
	b, err := readSmallFile(fsys, path, 8*(MaxPartitions+1))
	if err != nil {
		return nil, err
	}
	offsets, err := ParseIndex(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return offsets, nil
}

// readSmallFile reads the whole file at path, which must hold at most max
// bytes (else ErrCorrupt). A file that ends before its size says wraps
// ErrCorrupt too.
func readSmallFile(fsys vfs.FS, path string, max int64) (b []byte, err error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			b, err = nil, cerr
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %s holds %d bytes, more than %d", ErrCorrupt, path, fi.Size(), max)
	}
	b = make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s ended before its %d bytes: %w", ErrCorrupt, path, fi.Size(), err)
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// NumPartitions returns the number of partitions.
func (m *MapOutput) NumPartitions() int { return len(m.Lengths) }

// Size returns the data file's length.
func (m *MapOutput) Size() int64 { return m.Offsets[len(m.Offsets)-1] }

func (m *MapOutput) checkPartition(p int) error {
	if p < 0 || p >= len(m.Lengths) {
		return fmt.Errorf("shufflefile: %v: partition %d out of range [0,%d)", m.ID, p, len(m.Lengths))
	}
	if m.data == nil {
		return fmt.Errorf("shufflefile: %v: %w", m.ID, fs.ErrClosed)
	}
	return nil
}

// Partition returns a reader of partition p's on-disk bytes.
func (m *MapOutput) Partition(p int) (*io.SectionReader, error) {
	if err := m.checkPartition(p); err != nil {
		return nil, err
	}
	return io.NewSectionReader(m.data, m.Offsets[p], m.Lengths[p]), nil
}

// ReadPartition returns partition p's on-disk bytes.
func (m *MapOutput) ReadPartition(p int) ([]byte, error) {
	r, err := m.Partition(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, m.Lengths[p])
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("shufflefile: %v: read partition %d (%d bytes at offset %d of %s): %w",
			m.ID, p, m.Lengths[p], m.Offsets[p], m.DataPath, err)
	}
	return b, nil
}

// Verify reads every partition and, unless the algorithm is
// checksum.None, checks its checksum. A mismatch wraps
// ErrChecksumMismatch and names the partition and both values.
func (m *MapOutput) Verify() error {
	sums, err := checksumData(m.data, m.DataPath, m.Offsets, m.Algorithm)
	if err != nil {
		return fmt.Errorf("shufflefile: verify %v: %w", m.ID, err)
	}
	for p, got := range sums {
		if want := m.Checksums[p]; got != want {
			return fmt.Errorf("%w: %v partition %d (%d bytes at offset %d): %v %#08x, checksum file says %#08x",
				ErrChecksumMismatch, m.ID, p, m.Lengths[p], m.Offsets[p], m.Algorithm, got, want)
		}
	}
	return nil
}

// checksumData reads every partition of data, as offsets delimit them, and
// returns their checksums (nil with checksum.None, after reading all).
func checksumData(data io.ReaderAt, name string, offsets []int64, alg checksum.Algorithm) ([]uint32, error) {
	if data == nil {
		return nil, fs.ErrClosed
	}
	buf := make([]byte, 64<<10)
	// Hide io.Discard's ReadFrom, which reads in its own small buffers.
	discard := io.Writer(struct{ io.Writer }{io.Discard})
	var sums []uint32
	if alg != checksum.None {
		sums = make([]uint32, len(offsets)-1)
	}
	for p := range len(offsets) - 1 {
		want := offsets[p+1] - offsets[p]
		r := io.NewSectionReader(data, offsets[p], want)
		var h hash.Hash32
		w := discard
		if alg != checksum.None {
			h = alg.New()
			w = h
		}
		n, err := io.CopyBuffer(w, r, buf)
		if err != nil {
			return nil, fmt.Errorf("read partition %d of %s: %w", p, name, err)
		}
		if n != want {
			return nil, fmt.Errorf("%w: partition %d of %s: read %d bytes, want %d", ErrCorrupt, p, name, n, want)
		}
		if h != nil {
			sums[p] = h.Sum32()
		}
	}
	return sums, nil
}

// File returns the open data file, for a caller that sends its byte
// ranges itself (sendfile); nil after Close. It stays the MapOutput's:
// do not close it, and do not move its offset while another goroutine
// reads through Partition.
func (m *MapOutput) File() vfs.File { return m.data }

// Close closes the data file. Later calls return nil.
func (m *MapOutput) Close() error {
	if m.data == nil {
		return nil
	}
	err := m.data.Close()
	m.data = nil
	return err
}
