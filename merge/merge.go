// Package merge concatenates the runs of a map output into its data file,
// partition by partition, without decompressing anything.
//
// A run holds, for every partition in order, one segment: the compressed
// codec streams that run produced for that partition. Every codec stream is
// self-delimiting and decoders accept concatenated streams, so the merged
// partition p is simply segment(run 0, p) || segment(run 1, p) || … . The
// checksum of a merged partition is combined from the checksums of its
// segments instead of being recomputed over the bytes.
//
// A run's bytes are either in a file or in memory. Segments in files are
// copied file to file in the kernel (vfs.CopyRange, which uses
// copy_file_range on Linux); segments in memory are written with vectored
// writes (WriteBuffers), which Cursor cuts out of a run's chunks.
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

// Run describes one run: its bytes, its per-partition segment lengths and,
// when the map output has a checksum algorithm, the checksum of each
// segment. The bytes are in File, or in Data, or, when Prefix is not 0,
// the first Prefix of them in File and the rest in Data (which may be
// empty).
type Run struct {
	File vfs.File // open for reading; Merge does not close it
	// Data is the run's bytes in memory, in order, cut into chunks of any
	// sizes: the concatenation of the chunks is what File would hold (with
	// a Prefix, what File holds after it).
	Data [][]byte
	// Prefix is how many of the run's first bytes are in File when Data
	// holds the rest; 0 when one of them holds all.
	Prefix    int64
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
// it owns (normally a new, empty file); it is left at the end of the merged
// bytes.
func Merge(dst vfs.File, runs []Run, numPartitions int, alg checksum.Algorithm) (Result, error) {
	if numPartitions < 0 {
		return Result{}, fmt.Errorf("merge: numPartitions %d < 0", numPartitions)
	}
	for r, run := range runs {
		if len(run.Lengths) != numPartitions {
			return Result{}, fmt.Errorf("merge: run %d has %d segment lengths, want %d", r, len(run.Lengths), numPartitions)
		}
		if alg != checksum.None && len(run.Checksums) != numPartitions {
			return Result{}, fmt.Errorf("merge: run %d has %d segment checksums, want %d", r, len(run.Checksums), numPartitions)
		}
		if run.Prefix < 0 || run.Prefix > 0 && run.File == nil {
			return Result{}, fmt.Errorf("merge: run %d: file prefix of %d bytes without a file", r, run.Prefix)
		}
		if run.File != nil && run.Prefix == 0 && run.Data != nil {
			return Result{}, fmt.Errorf("merge: run %d has both a file and in-memory data, and no file prefix", r)
		}
	}
	res := Result{Lengths: make([]int64, numPartitions)}
	if alg != checksum.None {
		res.Checksums = make([]uint32, numPartitions)
	}
	for p := 0; p < numPartitions; p++ {
		s := alg.Empty()
		var total int64
		for r := range runs {
			n := runs[r].Lengths[p]
			if n < 0 {
				return Result{}, fmt.Errorf("merge: run %d partition %d: negative segment length %d", r, p, n)
			}
			if n == 0 {
				continue
			}
			total += n
			res.Copies++
			if alg != checksum.None {
				s = alg.Combine(s, runs[r].Checksums[p], n)
			}
		}
		res.Lengths[p] = total
		if alg != checksum.None {
			res.Checksums[p] = s
		}
		res.Bytes += total
	}
	for r, run := range runs {
		if run.File == nil || run.Prefix > 0 {
			if have, want := run.Prefix+chunksLen(run.Data), sum(run.Lengths); have != want {
				return Result{}, fmt.Errorf("merge: run %d holds %d bytes in memory after a file prefix of %d, its segments %d", r, have-run.Prefix, run.Prefix, want)
			}
		}
	}
	if err := mergeSequential(dst, runs, numPartitions); err != nil {
		return Result{}, err
	}
	return res, nil
}

// mergeSequential writes the segments in order: runs in memory through
// vectored writes, runs in files by range copies.
func mergeSequential(dst vfs.File, runs []Run, numPartitions int) error {
	offsets := make([]int64, len(runs)) // read offset of the next segment of each run
	cursors := make([]Cursor, len(runs))
	for r := range runs {
		cursors[r] = Cursor{Chunks: runs[r].Data}
	}
	var pending [][]byte
	flush := func() error {
		err := WriteBuffers(dst, pending)
		clear(pending)
		pending = pending[:0]
		return err
	}
	for p := 0; p < numPartitions; p++ {
		for r := range runs {
			n := runs[r].Lengths[p]
			if n == 0 {
				continue
			}
			if offsets[r] < runs[r].Prefix {
				// The part of the segment in the file prefix, then the rest
				// from memory.
				m := min(n, runs[r].Prefix-offsets[r])
				if err := flush(); err != nil {
					return fmt.Errorf("merge: run %d partition %d: write %s: %w", r, p, dst.Name(), err)
				}
				if _, err := vfs.CopyRange(dst, runs[r].File, offsets[r], m); err != nil {
					return fmt.Errorf("merge: run %d partition %d: %w", r, p, err)
				}
				offsets[r] += m
				if n -= m; n == 0 {
					continue
				}
			}
			if runs[r].File == nil || runs[r].Prefix > 0 {
				pending = cursors[r].Take(pending, n)
				if len(pending) >= maxPending {
					if err := flush(); err != nil {
						return fmt.Errorf("merge: run %d partition %d: write %s: %w", r, p, dst.Name(), err)
					}
				}
				continue
			}
			if err := flush(); err != nil {
				return fmt.Errorf("merge: run %d partition %d: write %s: %w", r, p, dst.Name(), err)
			}
			if _, err := vfs.CopyRange(dst, runs[r].File, offsets[r], n); err != nil {
				return fmt.Errorf("merge: run %d partition %d: %w", r, p, err)
			}
			offsets[r] += n
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("merge: write %s: %w", dst.Name(), err)
	}
	return nil
}

// maxPending bounds the buffers gathered for one round of vectored writes.
const maxPending = 4096

// Cursor reads a run's in-memory bytes in order. Chunks may grow (at the
// end of the last one, or by more chunks) between calls of Take.
type Cursor struct {
	Chunks [][]byte
	i      int // current chunk
	off    int // offset in it
}

// Take appends the next n bytes, as sub-slices of the chunks, to bufs;
// the chunks must hold them.
func (c *Cursor) Take(bufs [][]byte, n int64) [][]byte {
	for n > 0 {
		ch := c.Chunks[c.i][c.off:]
		if int64(len(ch)) > n {
			ch = ch[:n]
		}
		if len(ch) > 0 {
			bufs = append(bufs, ch)
		}
		n -= int64(len(ch))
		c.off += len(ch)
		if c.off == len(c.Chunks[c.i]) && n > 0 {
			c.i++
			c.off = 0
		}
	}
	return bufs
}

func chunksLen(chunks [][]byte) int64 {
	var n int64
	for _, c := range chunks {
		n += int64(len(c))
	}
	return n
}

func sum(lengths []int64) int64 {
	var total int64
	for _, n := range lengths {
		total += n
	}
	return total
}
