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
// read through a Window, a buffer read ahead of the merge, or, from
// CopyBytes up, copied file to file in the kernel (vfs.CopyRange, which
// uses copy_file_range on Linux); segments are written with vectored
// writes (WriteBuffers), from a run's window or cut out of its chunks in
// memory by Cursor.
//
// Invariant: the merged data file holds exactly sum(run lengths) bytes, and
// partition p of it is the concatenation of the runs' segments for p in run
// order.
package merge

import (
	"fmt"
	"io"

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
	return mergeRuns(dst, runs, numPartitions, alg, nil)
}

// MergeEncrypted is Merge of runs under Spark's IO encryption (see
// Encryption): run 0 is already encrypted, the later runs are encrypted
// as they are merged, and the merged lengths and checksums are those of
// the bytes written (a partition that run 0 has no bytes of gains an IV).
func MergeEncrypted(dst vfs.File, runs []Run, numPartitions int, alg checksum.Algorithm, enc Encryption) (Result, error) {
	sl, err := NewSealer(enc, numPartitions, alg)
	if err != nil {
		return Result{}, err
	}
	return mergeRuns(dst, runs, numPartitions, alg, sl)
}

func mergeRuns(dst vfs.File, runs []Run, numPartitions int, alg checksum.Algorithm, sl *Sealer) (Result, error) {
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
	if err := mergeSequential(dst, runs, numPartitions, sl); err != nil {
		return Result{}, err
	}
	if sl != nil {
		res.Lengths, res.Checksums, res.Bytes = sl.Lengths(), sl.Checksums(), sum(sl.Lengths())
	}
	return res, nil
}

// mergeSequential writes the segments in order through vectored writes:
// runs in memory from their chunks, runs in files through a window read
// ahead of them (a read per window, not a system call per segment: at
// 2000 partitions a segment is a few KB), and segments too large for the
// window by range copies in the kernel. With a Sealer, the segments of
// runs after the first go through it (read into memory, never copied in
// the kernel).
func mergeSequential(dst vfs.File, runs []Run, numPartitions int, sl *Sealer) error {
	offsets := make([]int64, len(runs)) // read offset of the next segment of each run
	cursors := make([]Cursor, len(runs))
	windows := make([]Window, len(runs))
	for r := range runs {
		cursors[r] = Cursor{Chunks: runs[r].Data}
		end := runs[r].Prefix // the bytes of its file to read
		if runs[r].Prefix == 0 && runs[r].File != nil {
			end = sum(runs[r].Lengths)
		}
		windows[r] = Window{File: runs[r].File, End: end, Size: WindowBytes(len(runs))}
	}
	var pending [][]byte
	flush := func() error {
		err := WriteBuffers(dst, pending)
		clear(pending)
		pending = pending[:0]
		if sl != nil {
			sl.Reset()
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", dst.Name(), err)
		}
		return nil
	}
	// fromFile adds m bytes at off of run r's file.
	fromFile := func(r int, off, m int64) error {
		w := &windows[r]
		if sl != nil && r > 0 {
			return sealFile(w, off, m, &pending, sl, flush)
		}
		if !w.Fits(m) {
			if err := flush(); err != nil {
				return err
			}
			_, err := vfs.CopyRange(dst, runs[r].File, off, m)
			return err
		}
		b, err := w.Read(off, m, flush) // pending may hold slices of the window
		if err != nil {
			return err
		}
		pending = append(pending, b)
		return nil
	}
	// segment adds run r's segment of partition p, n bytes: from its file
	// (the whole segment, or the part of it in the file's prefix), the
	// rest from memory.
	segment := func(r int, n int64) error {
		if runs[r].File != nil && offsets[r] < windows[r].End {
			m := min(n, windows[r].End-offsets[r])
			if err := fromFile(r, offsets[r], m); err != nil {
				return err
			}
			offsets[r] += m
			n -= m
		}
		if n > 0 {
			if sl != nil && r > 0 {
				var plain [][]byte
				for _, b := range cursors[r].Take(plain, n) {
					pending = sl.Seal(pending, b)
				}
			} else {
				pending = cursors[r].Take(pending, n)
			}
			offsets[r] += n
		}
		if len(pending) >= maxPending || sl != nil && sl.Held() >= sealFlush {
			return flush()
		}
		return nil
	}
	for p := 0; p < numPartitions; p++ {
		if sl != nil {
			var s0 uint32
			if runs[0].Checksums != nil {
				s0 = runs[0].Checksums[p]
			}
			sl.Begin(p, runs[0].Lengths[p], s0)
		}
		for r := range runs {
			if n := runs[r].Lengths[p]; n > 0 {
				if err := segment(r, n); err != nil {
					return fmt.Errorf("merge: run %d partition %d: %w", r, p, err)
				}
			}
		}
		if sl != nil {
			sl.End()
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return nil
}

// sealFlush is how many encrypted bytes a merge gathers before it writes.
const sealFlush = 4 << 20

// sealFile adds m bytes at off of a run file, encrypted by sl, reading
// them through the window in pieces it holds (flush writes what pending
// holds, and sl's buffers with it).
func sealFile(w *Window, off, m int64, pending *[][]byte, sl *Sealer, flush func() error) error {
	piece := min(int64(w.Size), CopyBytes-1)
	for m > 0 {
		n := min(m, piece)
		b, err := w.Read(off, n, flush)
		if err != nil {
			return err
		}
		*pending = sl.Seal(*pending, b)
		off += n
		m -= n
		if sl.Held() >= sealFlush {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// CopyBytes is the size from which a segment of a run file is copied file
// to file in the kernel rather than read through a Window.
const CopyBytes = 256 << 10

// WindowBytes is the Window size for each of n runs in files: 1 MiB, less
// when many runs share 16 MiB, never under 64 KiB.
func WindowBytes(n int) int {
	return min(1<<20, max(64<<10, (16<<20)/max(n, 1)))
}

// A Window reads a run file ahead of a merge that takes its bytes in
// order: it holds the file's bytes [start, start+len(buf)), of the first
// End that the merge reads from it. Slices of it stay valid until the next
// Fill.
type Window struct {
	File vfs.File
	End  int64
	Size int // bytes read at once
	buf  []byte
	// start is the file offset of buf[0].
	start int64
}

// Fits reports whether a piece of n bytes goes through the window: under
// CopyBytes and within its size.
func (w *Window) Fits(n int64) bool { return n < CopyBytes && n <= int64(w.Size) }

// holds reports whether the window holds the n bytes at off.
func (w *Window) holds(off, n int64) bool {
	return w.buf != nil && off >= w.start && off+n <= w.start+int64(len(w.buf))
}

// Fill reads the window from off: Size bytes, or up to End.
func (w *Window) Fill(off int64) error {
	if cap(w.buf) < w.Size {
		w.buf = make([]byte, w.Size)
	}
	w.buf = w.buf[:min(int64(w.Size), w.End-off)]
	w.start = off
	// A full read may report io.EOF at the end of the file (io.ReaderAt).
	if n, err := w.File.ReadAt(w.buf, off); err != nil && (err != io.EOF || n < len(w.buf)) {
		w.buf = nil
		return fmt.Errorf("read %s: %w", w.File.Name(), err)
	}
	return nil
}

// Read returns the n bytes at off (n must fit: Fits), filling the window
// from off first when it does not hold them; flush runs before a fill, to
// write out whatever still holds slices of the window.
func (w *Window) Read(off, n int64, flush func() error) ([]byte, error) {
	if !w.holds(off, n) {
		if err := flush(); err != nil {
			return nil, err
		}
		if err := w.Fill(off); err != nil {
			return nil, err
		}
	}
	return w.buf[off-w.start : off-w.start+n], nil
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
