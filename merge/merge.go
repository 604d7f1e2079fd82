// Package merge concatenates the runs of a map output into its data file,
// partition by partition, without decompressing anything.
//
// A run is a file holding, for every partition in order, one segment: the
// compressed codec streams that run produced for that partition. Every codec
// stream is self-delimiting and decoders accept concatenated streams, so the
// merged partition p is simply segment(run 0, p) || segment(run 1, p) || … .
// Segments are copied file to file in the kernel (vfs.CopyRange, which uses
// copy_file_range on Linux), and the checksum of a merged partition is
// combined from the checksums of its segments instead of being recomputed
// over the bytes.
//
// Invariant: the merged data file holds exactly sum(run lengths) bytes, and
// partition p of it is the concatenation of the runs' segments for p in run
// order.
package merge

import (
	"fmt"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// Run describes one run file: its per-partition segment lengths and, when the
// map output has a checksum algorithm, the checksum of each segment.
type Run struct {
	File      vfs.File // open for reading; Merge does not close it
	Lengths   []int64  // segment length per partition
	Checksums []uint32 // segment checksum per partition; nil when Algorithm is None
}

// Result is what a merge produced.
type Result struct {
	Lengths   []int64  // merged length per partition
	Checksums []uint32 // merged checksum per partition; nil when Algorithm is None
	Bytes     int64    // bytes copied
	Copies    int      // segment copies issued (non-empty segments)
}

// Merge appends the runs to dst, partition by partition, and returns the
// merged lengths and checksums. dst's offset must be at the start of the data
// it owns (normally a new, empty file).
func Merge(dst vfs.File, runs []Run, numPartitions int, alg checksum.Algorithm) (Result, error) {
	if numPartitions < 0 {
		return Result{}, fmt.Errorf("merge: numPartitions %d < 0", numPartitions)
	}
	offsets := make([]int64, len(runs)) // read offset of the next segment of each run
	for r, run := range runs {
		if len(run.Lengths) != numPartitions {
			return Result{}, fmt.Errorf("merge: run %d has %d segment lengths, want %d", r, len(run.Lengths), numPartitions)
		}
		if alg != checksum.None && len(run.Checksums) != numPartitions {
			return Result{}, fmt.Errorf("merge: run %d has %d segment checksums, want %d", r, len(run.Checksums), numPartitions)
		}
	}
	res := Result{Lengths: make([]int64, numPartitions)}
	if alg != checksum.None {
		res.Checksums = make([]uint32, numPartitions)
	}
	for p := 0; p < numPartitions; p++ {
		sum := alg.Empty()
		var total int64
		for r := range runs {
			n := runs[r].Lengths[p]
			if n < 0 {
				return Result{}, fmt.Errorf("merge: run %d partition %d: negative segment length %d", r, p, n)
			}
			if n == 0 {
				continue
			}
			if _, err := vfs.CopyRange(dst, runs[r].File, offsets[r], n); err != nil {
				return Result{}, fmt.Errorf("merge: run %d partition %d: %w", r, p, err)
			}
			offsets[r] += n
			total += n
			res.Copies++
			if alg != checksum.None {
				sum = alg.Combine(sum, runs[r].Checksums[p], n)
			}
		}
		res.Lengths[p] = total
		if alg != checksum.None {
			res.Checksums[p] = sum
		}
		res.Bytes += total
	}
	return res, nil
}
