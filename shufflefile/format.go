package shufflefile

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/shuffled/shuffled/errdefs"
)

// Errors of this package; returned errors wrap them with the details.
var (
	// ErrInvalidID reports a negative shuffle or map id.
	ErrInvalidID = errdefs.New(errdefs.ErrInvalidArgument, "shufflefile: invalid id")
	// ErrInvalidLayout reports an unusable Layout.
	ErrInvalidLayout = errdefs.New(errdefs.ErrInternal, "shufflefile: invalid layout")
	// ErrInvalidCommit reports a Commit whose fields contradict each other
	// or the files on disk; nothing was committed.
	ErrInvalidCommit = errdefs.New(errdefs.ErrFailedPrecondition, "shufflefile: invalid commit")
	// ErrCorrupt reports index, data and checksum files that do not agree.
	ErrCorrupt = errdefs.New(errdefs.ErrDataLoss, "shufflefile: corrupt map output")
	// ErrChecksumMismatch reports a partition whose bytes do not match
	// the checksum file.
	ErrChecksumMismatch = errdefs.New(errdefs.ErrDataLoss, "shufflefile: checksum mismatch")
)

// MaxPartitions bounds the partitions of one map output: the most that
// Spark's shuffle writers accept (2^24, PackedRecordPointer's limit). It
// bounds the memory an index or checksum file can make a reader allocate.
const MaxPartitions = 1 << 24

// AppendIndex appends the index file of partitions with the given on-disk
// lengths to dst: len(lengths)+1 big-endian int64 offsets, the first 0,
// the last the data file's length. A negative length, or lengths that sum
// past MaxInt64, is an error.
func AppendIndex(dst []byte, lengths []int64) ([]byte, error) {
	if len(lengths) > MaxPartitions {
		return dst, fmt.Errorf("%w: %d partitions, more than %d", ErrInvalidCommit, len(lengths), MaxPartitions)
	}
	dst = binary.BigEndian.AppendUint64(dst, 0)
	var off int64
	for p, n := range lengths {
		if n < 0 {
			return dst, fmt.Errorf("%w: partition %d length %d is negative", ErrInvalidCommit, p, n)
		}
		if off > math.MaxInt64-n {
			return dst, fmt.Errorf("%w: partition %d length %d overflows offset %d", ErrInvalidCommit, p, n, off)
		}
		off += n
		dst = binary.BigEndian.AppendUint64(dst, uint64(off))
	}
	return dst, nil
}

// ParseIndex decodes an index file into its offsets (numPartitions+1 of
// them). It checks the format alone: a whole number of 8-byte offsets, at
// least one, the first 0, never decreasing, at most MaxPartitions
// partitions. That the last offset equals the data file's length is the
// caller's check.
func ParseIndex(b []byte) ([]int64, error) {
	switch {
	case len(b)%8 != 0:
		return nil, fmt.Errorf("%w: index of %d bytes is not a whole number of 8-byte offsets", ErrCorrupt, len(b))
	case len(b) == 0:
		return nil, fmt.Errorf("%w: index is empty", ErrCorrupt)
	case len(b)/8-1 > MaxPartitions:
		return nil, fmt.Errorf("%w: index of %d partitions, more than %d", ErrCorrupt, len(b)/8-1, MaxPartitions)
	}
	offsets := make([]int64, len(b)/8)
	var prev int64
	for i := range offsets {
		off := int64(binary.BigEndian.Uint64(b[8*i:]))
		if i == 0 && off != 0 {
			return nil, fmt.Errorf("%w: index offset 0 is %d, want 0", ErrCorrupt, off)
		}
		if off < prev {
			return nil, fmt.Errorf("%w: index offset %d is %d, below offset %d (%d)", ErrCorrupt, i, off, i-1, prev)
		}
		offsets[i] = off
		prev = off
	}
	return offsets, nil
}

// lengthsOf returns the partition lengths of valid offsets.
func lengthsOf(offsets []int64) []int64 {
	lengths := make([]int64, len(offsets)-1)
	for p := range lengths {
		lengths[p] = offsets[p+1] - offsets[p]
	}
	return lengths
}

// AppendChecksums appends the checksum file of the given per-partition
// checksums to dst: one big-endian int64 per partition, holding the 32-bit
// checksum in its low half (java.util.zip.Checksum.getValue).
func AppendChecksums(dst []byte, sums []uint32) []byte {
	for _, s := range sums {
		dst = binary.BigEndian.AppendUint64(dst, uint64(s))
	}
	return dst
}

// ParseChecksums decodes a checksum file: a whole number of big-endian
// int64 values, each a 32-bit checksum (high half zero), at most
// MaxPartitions of them.
func ParseChecksums(b []byte) ([]uint32, error) {
	switch {
	case len(b)%8 != 0:
		return nil, fmt.Errorf("%w: checksum file of %d bytes is not a whole number of 8-byte values", ErrCorrupt, len(b))
	case len(b)/8 > MaxPartitions:
		return nil, fmt.Errorf("%w: checksum file of %d partitions, more than %d", ErrCorrupt, len(b)/8, MaxPartitions)
	}
	sums := make([]uint32, len(b)/8)
	for p := range sums {
		v := binary.BigEndian.Uint64(b[8*p:])
		if v > math.MaxUint32 {
			return nil, fmt.Errorf("%w: partition %d checksum %#x does not fit 32 bits", ErrCorrupt, p, v)
		}
		sums[p] = uint32(v)
	}
	return sums, nil
}
