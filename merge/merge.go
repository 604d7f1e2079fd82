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
// writes. When every run is in memory and the destination is an operating
// system file, the merge knows every segment's final offset up front and
// fills the data file through a shared mapping from several goroutines at
// once (buffered writes to one file serialize on its inode lock; page
// faults on a mapping do not), so a large merge is not bound to one core.
//
// Invariant: the merged data file holds exactly sum(run lengths) bytes, and
// partition p of it is the concatenation of the runs' segments for p in run
// order.
package merge

import (
	"fmt"
	"runtime"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// Run describes one run: its bytes, its per-partition segment lengths and,
// when the map output has a checksum algorithm, the checksum of each
// segment. Exactly one of File and Data holds the bytes.
type Run struct {
	File vfs.File // open for reading; Merge does not close it
	// Data is the run's bytes in memory, in order, cut into chunks of any
	// sizes: the concatenation of the chunks is what File would hold.
	Data      [][]byte
	Lengths   []int64  // segment length per partition
	Checksums []uint32 // segment checksum per partition; nil when Algorithm is None
}

// Result is what a merge produced.
type Result struct {
	Lengths   []int64  // merged length per partition
	Checksums []uint32 // merged checksum per partition; nil when Algorithm is None
	Bytes     int64    // bytes copied
	Copies    int      // segment copies issued (non-empty segments)
	// Parallel is the number of goroutines that filled the data file
	// through a mapping; 0 when the bytes were written sequentially.
	Parallel int
}

// MinParallel is the smallest merge that Merge spreads over several
// goroutines; below it, one vectored write costs less than a mapping.
const MinParallel = 1 << 20

// MappedMinWorkers is the fewest goroutines (GOMAXPROCS, and one per
// half MinParallel of bytes) for which a merge of runs in memory fills the
// data file through a mapping rather than writing it sequentially; 0 never
// maps. Page faults cost more than a write per page, so the mapping pays
// only when enough cores share them. Benchmarks change it; nothing else
// should.
var MappedMinWorkers = 8

// Merge appends the runs to dst, partition by partition, and returns the
// merged lengths and checksums. dst's offset must be at the start of the data
// it owns (normally a new, empty file); it is left at the end of the merged
// bytes.
func Merge(dst vfs.File, runs []Run, numPartitions int, alg checksum.Algorithm) (Result, error) {
	if numPartitions < 0 {
		return Result{}, fmt.Errorf("merge: numPartitions %d < 0", numPartitions)
	}
	memory := true
	for r, run := range runs {
		if len(run.Lengths) != numPartitions {
			return Result{}, fmt.Errorf("merge: run %d has %d segment lengths, want %d", r, len(run.Lengths), numPartitions)
		}
		if alg != checksum.None && len(run.Checksums) != numPartitions {
			return Result{}, fmt.Errorf("merge: run %d has %d segment checksums, want %d", r, len(run.Checksums), numPartitions)
		}
		if run.File != nil && run.Data != nil {
			return Result{}, fmt.Errorf("merge: run %d has both a file and in-memory data", r)
		}
		if run.File != nil {
			memory = false
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
		if run.File == nil {
			if have, want := chunksLen(run.Data), sum(run.Lengths); have != want {
				return Result{}, fmt.Errorf("merge: run %d holds %d bytes in memory, its segments %d", r, have, want)
			}
		}
	}
	if memory && MappedMinWorkers > 0 && res.Bytes >= MinParallel {
		if workers := min(runtime.GOMAXPROCS(0), int(res.Bytes/(MinParallel/2))); workers >= max(2, MappedMinWorkers) {
			ok, err := mergeMapped(dst, runs, numPartitions, res.Bytes, workers)
			if err != nil {
				return Result{}, err
			}
			if ok {
				res.Parallel = workers
				return res, nil
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
	cursors := make([]cursor, len(runs))
	for r := range runs {
		cursors[r] = cursor{chunks: runs[r].Data}
	}
	var pending [][]byte
	flush := func() error {
		err := writeBuffers(dst, pending)
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
			if runs[r].File == nil {
				pending = cursors[r].take(pending, n)
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

// cursor reads a run's in-memory bytes in order.
type cursor struct {
	chunks [][]byte
	i      int // current chunk
	off    int // offset in it
}

// take appends the next n bytes, as sub-slices of the chunks, to bufs.
func (c *cursor) take(bufs [][]byte, n int64) [][]byte {
	for n > 0 {
		ch := c.chunks[c.i][c.off:]
		if int64(len(ch)) > n {
			ch = ch[:n]
		}
		if len(ch) > 0 {
			bufs = append(bufs, ch)
		}
		n -= int64(len(ch))
		c.off += len(ch)
		if c.off == len(c.chunks[c.i]) {
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

// piece is a stretch of the merged file that comes from one run: n bytes at
// offset src of the run land at offset dst of the data file.
type piece struct {
	dst, src, n int64
	run         int
}

// maxPiece bounds a piece, so that one large segment is shared out among
// several goroutines.
const maxPiece = 1 << 20

// layout lists the pieces of the merged file in order.
func layout(runs []Run, numPartitions int) []piece {
	src := make([]int64, len(runs))
	var pieces []piece
	var dst int64
	for p := 0; p < numPartitions; p++ {
		for r := range runs {
			n := runs[r].Lengths[p]
			for n > 0 {
				m := min(n, maxPiece)
				pieces = append(pieces, piece{dst: dst, src: src[r], n: m, run: r})
				dst += m
				src[r] += m
				n -= m
			}
		}
	}
	return pieces
}
