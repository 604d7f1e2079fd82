package merge

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// Where makeRuns puts the runs' bytes.
const (
	inFiles  = "files"
	inMemory = "memory"
	mixed    = "mixed"  // even runs in files, odd runs in memory
	prefixed = "prefix" // each run's first bytes (a random number, cutting segments anywhere) in a file, the rest in memory
)

// makeRuns writes k run files of n partitions with random segments and
// returns them with the expected merged partitions.
func makeRuns(t testing.TB, dir string, k, n, maxSeg int, alg checksum.Algorithm, seed uint64) ([]Run, [][]byte) {
	return makeRunsIn(t, dir, inFiles, k, n, maxSeg, alg, seed)
}

// makeRunsIn is makeRuns with the runs' bytes in files, in memory (in
// chunks of random sizes) or both.
func makeRunsIn(t testing.TB, dir, where string, k, n, maxSeg int, alg checksum.Algorithm, seed uint64) ([]Run, [][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	want := make([][]byte, n)
	runs := make([]Run, k)
	for r := range runs {
		var buf bytes.Buffer
		run := Run{Lengths: make([]int64, n)}
		if alg != checksum.None {
			run.Checksums = make([]uint32, n)
		}
		for p := range n {
			seg := make([]byte, rng.IntN(maxSeg+1))
			if rng.IntN(3) == 0 {
				seg = seg[:0]
			}
			for i := range seg {
				seg[i] = byte(rng.Uint32())
			}
			buf.Write(seg)
			want[p] = append(want[p], seg...)
			run.Lengths[p] = int64(len(seg))
			if alg != checksum.None {
				run.Checksums[p] = alg.Update(alg.Empty(), seg)
			}
		}
		b := buf.Bytes()
		if where == prefixed {
			// Most runs: a prefix ending anywhere, cutting a segment; some
			// with nothing after it in memory.
			run.Prefix = int64(len(b))
			if len(b) > 0 && rng.IntN(4) != 0 {
				run.Prefix = 1 + rng.Int64N(int64(len(b)))
			}
			if run.Prefix == 0 { // an empty run: in memory, with nothing
				run.Data = [][]byte{}
				runs[r] = run
				continue
			}
			run.File = writeRunFile(t, dir, r, b[:run.Prefix])
			for rest := b[run.Prefix:]; len(rest) > 0; {
				c := min(len(rest), 1+rng.IntN(4*maxSeg+1))
				run.Data = append(run.Data, rest[:c])
				rest = rest[c:]
			}
			runs[r] = run
			continue
		}
		if where == inMemory || (where == mixed && r%2 == 1) {
			for len(b) > 0 {
				c := min(len(b), 1+rng.IntN(4*maxSeg+1))
				run.Data = append(run.Data, b[:c])
				b = b[c:]
			}
			runs[r] = run
			continue
		}
		run.File = writeRunFile(t, dir, r, buf.Bytes())
		runs[r] = run
	}
	return runs, want
}

// writeRunFile writes run r's file and opens it for reading.
func writeRunFile(t testing.TB, dir string, r int, b []byte) vfs.File {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("run%d", r))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestMerge(t *testing.T) {
	for _, alg := range []checksum.Algorithm{checksum.None, checksum.Adler32, checksum.CRC32, checksum.CRC32C} {
		for _, where := range []string{inFiles, inMemory, mixed, prefixed} {
			for _, k := range []int{1, 2, 5} {
				for _, n := range []int{1, 7, 300} {
					t.Run(fmt.Sprintf("alg=%v/in=%s/runs=%d/partitions=%d", alg, where, k, n), func(t *testing.T) {
						testMerge(t, where, k, n, 500, alg)
					})
				}
			}
		}
	}
}

// TestMergeFileSegments merges runs in files whose segments take every
// path of the window read ahead of a file: segments of CopyBytes and more
// (range copies), larger than the window but under CopyBytes (range
// copies too: 300 runs share windows of 64 KiB), and windows refilled
// many times.
func TestMergeFileSegments(t *testing.T) {
	for _, tc := range []struct {
		runs, partitions, maxSeg int
	}{
		{2, 7, 3 * CopyBytes},
		{5, 40, CopyBytes / 2},
		{300, 3, 100 << 10},
	} {
		for _, where := range []string{inFiles, prefixed} {
			t.Run(fmt.Sprintf("in=%s/runs=%d/partitions=%d/maxseg=%d", where, tc.runs, tc.partitions, tc.maxSeg), func(t *testing.T) {
				testMerge(t, where, tc.runs, tc.partitions, tc.maxSeg, checksum.CRC32C)
			})
		}
	}
}

func testMerge(t *testing.T, where string, k, n, maxSeg int, alg checksum.Algorithm) Result {
	dir := t.TempDir()
	runs, want := makeRunsIn(t, dir, where, k, n, maxSeg, alg, uint64(k*n))
	dst, err := vfs.Default.Create(filepath.Join(dir, "data"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Merge(dst, runs, n, alg)
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	if off, err := dst.Seek(0, io.SeekCurrent); err != nil || off != res.Bytes {
		t.Errorf("offset after the merge %d (%v), want %d", off, err, res.Bytes)
	}
	dst.Close()
	data, err := os.ReadFile(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != res.Bytes {
		t.Fatalf("data file has %d bytes, Result.Bytes = %d", len(data), res.Bytes)
	}
	off := int64(0)
	for p := range n {
		got := data[off : off+res.Lengths[p]]
		off += res.Lengths[p]
		if !bytes.Equal(got, want[p]) {
			t.Fatalf("partition %d: merged %d bytes, want %d", p, len(got), len(want[p]))
		}
		if alg != checksum.None {
			if sum := alg.Update(alg.Empty(), want[p]); res.Checksums[p] != sum {
				t.Errorf("partition %d: checksum %#x, want %#x", p, res.Checksums[p], sum)
			}
		}
	}
	return res
}

func TestMergeBadRuns(t *testing.T) {
	dir := t.TempDir()
	runs, _ := makeRuns(t, dir, 2, 4, 10, checksum.Adler32, 1)
	dst, err := vfs.Default.Create(filepath.Join(dir, "data"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := Merge(dst, runs, 5, checksum.Adler32); err == nil {
		t.Error("Merge with 5 partitions over runs of 4: no error")
	}
	runs[1].Checksums = nil
	if _, err := Merge(dst, runs, 4, checksum.Adler32); err == nil {
		t.Error("Merge with a run missing checksums: no error")
	}
	runs[1].Checksums = runs[0].Checksums
	runs[0].Prefix = 3 // a prefix, with nothing in memory after it
	if _, err := Merge(dst, runs, 4, checksum.None); err == nil {
		t.Error("Merge of a run whose prefix and memory hold less than its segments: no error")
	}
	runs[0].Prefix = -1
	if _, err := Merge(dst, runs, 4, checksum.None); err == nil {
		t.Error("Merge of a run with a negative prefix: no error")
	}
	runs[0].Prefix = 0
	runs[0].Data = [][]byte{{1}}
	if _, err := Merge(dst, runs, 4, checksum.None); err == nil {
		t.Error("Merge of a run with a file and data but no prefix: no error")
	}
	runs[0].Data = nil
	runs[1].Lengths[2] = 1 << 40 // past the end of the run file
	if _, err := Merge(dst, runs, 4, checksum.None); err == nil {
		t.Error("Merge of a segment past the end of its run: no error")
	}
}

// BenchmarkMerge compares the two ways to get merged checksums: combining
// the per-segment checksums while the kernel copies the bytes (what Merge
// does), and reading every segment through user memory to checksum it while
// copying.
func BenchmarkMerge(b *testing.B) {
	for _, alg := range []checksum.Algorithm{checksum.Adler32, checksum.CRC32C} {
		for _, n := range []int{200, 2000} {
			for _, how := range []string{"combine", "recompute"} {
				b.Run(fmt.Sprintf("alg=%v/checksums=%s/partitions=%d", alg, how, n), func(b *testing.B) {
					benchMerge(b, alg, how, n)
				})
			}
		}
	}
}

func benchMerge(b *testing.B, alg checksum.Algorithm, how string, n int) {
	dir := b.TempDir()
	runs, _ := makeRuns(b, dir, 4, n, 64<<10, alg, 5)
	var total int64
	for _, r := range runs {
		for _, l := range r.Lengths {
			total += l
		}
	}
	b.SetBytes(total)
	b.ReportAllocs()
	buf := make([]byte, 64<<10)
	for i := 0; b.Loop(); i++ {
		path := filepath.Join(dir, fmt.Sprint("data", i))
		dst, err := vfs.Default.Create(path, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if how == "combine" {
			if _, err := Merge(dst, runs, n, alg); err != nil {
				b.Fatal(err)
			}
		} else {
			recompute(b, dst, runs, n, alg, buf)
		}
		dst.Close()
		os.Remove(path)
	}
}

func recompute(b *testing.B, dst vfs.File, runs []Run, n int, alg checksum.Algorithm, buf []byte) {
	offs := make([]int64, len(runs))
	for p := range n {
		sum := alg.Empty()
		for r := range runs {
			sr := io.NewSectionReader(runs[r].File, offs[r], runs[r].Lengths[p])
			offs[r] += runs[r].Lengths[p]
			for {
				m, err := sr.Read(buf)
				sum = alg.Update(sum, buf[:m])
				if _, werr := dst.Write(buf[:m]); werr != nil {
					b.Fatal(werr)
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		_ = sum
	}
}

// BenchmarkMergeMemory merges four runs held in memory (the writer's
// runs when they fit under its memory budget) into a new data file with
// vectored writes: the page cache's rate of taking one file's bytes.
func BenchmarkMergeMemory(b *testing.B) {
	for _, n := range []int{200, 2000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			// About 4 MiB a run, as a run of the writer's benchmark.
			runs, _ := makeRunsIn(b, dir, inMemory, 4, n, 8<<20/n, checksum.Adler32, 5)
			benchMergeRuns(b, dir, runs, n, false)
		})
	}
}

// benchMergeRuns merges runs of n partitions into a new file of dir per
// iteration, at the runs' bytes per iteration; with untimed, closing and
// removing the file stay out of the timing.
func benchMergeRuns(b *testing.B, dir string, runs []Run, n int, untimed bool) {
	var total int64
	for _, r := range runs {
		total += sum(r.Lengths)
	}
	b.SetBytes(total)
	for i := 0; b.Loop(); i++ {
		path := filepath.Join(dir, fmt.Sprint("data", i))
		dst, err := vfs.Default.Create(path, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Merge(dst, runs, n, checksum.Adler32); err != nil {
			b.Fatal(err)
		}
		if untimed {
			b.StopTimer()
		}
		dst.Close()
		os.Remove(path)
		if untimed {
			b.StartTimer()
		}
	}
}

// TestMergeReadsByWindow: runs in files of small segments are read a
// window at a time, not a system call per segment.
func TestMergeReadsByWindow(t *testing.T) {
	const k, n, maxSeg = 3, 2000, 500
	dir := t.TempDir()
	runs, want := makeRunsIn(t, dir, inFiles, k, n, maxSeg, checksum.Adler32, 9)
	var reads, copies atomic.Int64
	fsys := errorfs.New(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpRead:
			reads.Add(1)
		case errorfs.OpCopyRange:
			copies.Add(1)
		}
		return nil
	}))
	var segments, size int64
	for r := range runs {
		f, err := fsys.Open(filepath.Join(dir, fmt.Sprintf("run%d", r)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		runs[r].File = f
		for _, l := range runs[r].Lengths {
			if l > 0 {
				segments++
			}
			size += l
		}
	}
	dst, err := vfs.Default.Create(filepath.Join(dir, "data"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := Merge(dst, runs, n, checksum.Adler32); err != nil {
		t.Fatal(err)
	}
	if maxReads := int64(k) * (size/int64(k)/int64(WindowBytes(k)) + 2); copies.Load() != 0 || reads.Load() > maxReads {
		t.Errorf("%d reads and %d range copies for %d segments of %d bytes, want at most %d reads and no copy", reads.Load(), copies.Load(), segments, size, maxReads)
	}
	data, err := os.ReadFile(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, bytes.Join(want, nil)) {
		t.Errorf("merged bytes differ from the runs' partitions")
	}
}

// BenchmarkMergeSmallFiles merges 4 runs in files of 2000 partitions and
// segments up to 5 KB (2.5 KB on average, lineitem's at 2000 partitions),
// as a map output whose runs spilled: the bytes go through each run's
// window.
func BenchmarkMergeSmallFiles(b *testing.B) {
	dir := b.TempDir()
	runs, _ := makeRuns(b, dir, 4, 2000, 5000, checksum.Adler32, 5)
	benchMergeRuns(b, dir, runs, 2000, true)
}
