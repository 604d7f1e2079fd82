package gpu

import (
	"math/rand/v2"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/gpu/lz4ref"
)

// The streams' sums combined from their framed blocks' are the sums of
// the streams: records of no bytes, of one block and of several, laid out
// as the kernels lay them out (one job per block and one per end mark).
func TestCombineAdler32(t *testing.T) {
	const blockSize = 64 << 10
	rng := rand.New(rand.NewPCG(31, 1))
	data := make([]byte, 400000)
	for i := range data {
		data[i] = byte(rng.IntN(7)) // compressible in runs, never all alike
	}
	pl := &CompressPlan{Records: []Record{{0, 0, 0}, {1, 0, 1}, {2, 1, 3 * blockSize}, {3, 3*blockSize + 1, 100}, {4, 200000, 200000}}}
	jobs, first, _ := pl.jobs(blockSize)
	level := lz4ref.Level(blockSize)
	var out []byte
	offs := []int64{0}
	sums := make([]uint32, len(jobs))
	for j, job := range jobs {
		n := len(out)
		if job.len == 0 {
			out = lz4ref.AppendEndMark(out, level)
		} else {
			out = lz4ref.AppendBlock(out, data[job.src:job.src+int64(job.len)], level)
		}
		sums[j] = checksum.Adler32.Update(checksum.Adler32.Empty(), out[n:])
		offs = append(offs, int64(len(out)))
	}
	got := combineAdler32(sums, offs, first)
	if len(got) != len(pl.Records) {
		t.Fatalf("%d sums for %d records", len(got), len(pl.Records))
	}
	for i, r := range pl.Records {
		stream := out[offs[first[i]]:offs[first[i+1]]]
		want := checksum.Adler32.Update(checksum.Adler32.Empty(), stream)
		if got[i] != want {
			t.Errorf("record %d (%d bytes, %d blocks): sum %#x, want %#x", i, r.Len, first[i+1]-first[i], got[i], want)
		}
		if ref := lz4ref.AppendStream(nil, data[r.Off:r.Off+r.Len], blockSize); string(ref) != string(stream) {
			t.Fatalf("record %d: the blocks are not its stream", i)
		}
	}
}

// adlerKernel is kernels/lz4.cu's lz4_adler transcribed thread by thread:
// thread t sums the bytes t, t+256, ... (S in full, W with k modulo the
// base), the block adds the threads' sums reduced modulo the base, and
// thread 0 makes s1 = 1+S and s2 = n + n·S - W.
func adlerKernel(b []byte) uint32 {
	const threads, base = 256, 65521
	var ps, pw [threads]uint64
	n := len(b)
	for t := range threads {
		var s, w uint64
		km := uint32(t)
		for k := t; k < n; k += threads {
			x := uint64(b[k])
			s += x
			w += uint64(km) * x
			km += threads
			if km >= base {
				km -= base
			}
		}
		ps[t], pw[t] = s%base, w%base
	}
	for d := threads / 2; d > 0; d /= 2 {
		for t := range d {
			ps[t] += ps[t+d]
			pw[t] += pw[t+d]
		}
	}
	nm, sm, wm := uint64(n)%base, ps[0]%base, pw[0]%base
	s1 := (1 + sm) % base
	s2 := (nm + nm*sm + base - wm) % base
	return uint32(s2<<16 | s1)
}

// The kernel's arithmetic is Adler-32: empty, short, and past the
// lengths where the sums wrap the base, on bytes of 0xff (the largest
// terms) and random ones.
func TestAdlerKernelArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{0, 1, 255, 256, 257, 5552, 65521, 65536 + 21, 1 << 20, 3<<20 + 7} {
		for _, fill := range []string{"ff", "random"} {
			b := make([]byte, n)
			for i := range b {
				if fill == "ff" {
					b[i] = 0xff
				} else {
					b[i] = byte(rng.Uint32())
				}
			}
			want := checksum.Adler32.Update(checksum.Adler32.Empty(), b)
			if got := adlerKernel(b); got != want {
				t.Errorf("%d bytes of %s: %#x, want %#x", n, fill, got, want)
			}
		}
	}
}
