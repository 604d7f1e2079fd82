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
