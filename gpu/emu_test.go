package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/gpu/lz4ref"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

// emuKernels builds kernels/emu, which runs kernels/lz4.cu's source on
// the CPU (each thread of a block a fiber, the warp intrinsics exchanged
// through barriers), and returns the program's path. The
// source is compiled as C++ after three rewrites: __shared__ becomes a
// static of its kernel (blocks run one after another), extern __shared__
// a plain extern, and inline PTX nothing (lz4_compress_smem, the only
// kernel with any, is not run).
func emuKernels(t *testing.T) string {
	t.Helper()
	cxx, err := exec.LookPath("c++")
	if err != nil {
		t.Fatalf("the kernels' CPU run needs a C++20 compiler (c++): %v", err)
	}
	src, err := os.ReadFile(filepath.Join("kernels", "lz4.cu"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer("extern __shared__", "extern", "__shared__", "static", "asm(", "EMU_ASM(").Replace(string(src))
	dir := t.TempDir()
	cu := filepath.Join(dir, "lz4_emu.cu")
	if err := os.WriteFile(cu, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "emu")
	cmd := exec.Command(cxx, "-std=c++20", "-O2", "-pthread", "-Wall", "-Wno-sign-compare", "-Wno-uninitialized", "-Wno-unknown-pragmas",
		fmt.Sprintf("-DKERNELS=%q", cu), "-o", bin, filepath.Join("kernels", "emu", "main.cpp"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the kernels' CPU run: %v\n%s", err, out)
	}
	return bin
}

// emuCompress runs the kernels over pl's records in payload as the
// daemon launches them (for a columnar plan the gather first, then
// compress, scan, compact, Adler-32) and returns the compacted framed
// blocks' offsets, their bytes and their sums.
func emuCompress(t *testing.T, bin string, payload []byte, pl *CompressPlan, blockSize int) (offs []int64, out []byte, sums []uint32) {
	t.Helper()
	jobs, _, slots := pl.jobs(blockSize)
	level := uint32(lz4ref.Level(blockSize))
	var in bytes.Buffer
	le := binary.LittleEndian
	in.Write(le.AppendUint64(nil, uint64(len(jobs))))
	for _, j := range jobs {
		b := le.AppendUint64(nil, uint64(j.src))
		b = le.AppendUint64(b, uint64(j.slot))
		b = le.AppendUint32(b, uint32(j.len))
		b = le.AppendUint32(b, level)
		in.Write(b)
	}
	in.Write(le.AppendUint64(nil, uint64(len(payload))))
	in.Write(payload)
	in.Write(le.AppendUint64(nil, uint64(slots)))
	in.Write(le.AppendUint64(nil, uint64(len(pl.Ops))))
	if len(pl.Ops) > 0 {
		in.Write(le.AppendUint64(nil, uint64(pl.Gathered)))
		in.Write(le.AppendUint64(nil, uint64(len(pl.Meta))))
		in.Write(pl.Meta)
		for _, o := range pl.Ops {
			fromMeta := uint64(0)
			if o.FromMeta {
				fromMeta = 1
			}
			b := le.AppendUint64(nil, uint64(o.Kind)|uint64(o.Shift&7)<<8|uint64(uint32(o.Base))<<32)
			b = le.AppendUint64(b, uint64(o.N))
			b = le.AppendUint64(b, uint64(o.Src))
			b = le.AppendUint64(b, fromMeta)
			b = le.AppendUint64(b, uint64(o.Dst))
			in.Write(b)
		}
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("kernels' CPU run: %v\n%s", err, stderr.Bytes())
	}
	n := len(jobs)
	if len(res) < 8*(n+1) {
		t.Fatalf("kernels' CPU run: %d bytes of output", len(res))
	}
	offs = make([]int64, n+1)
	for i := range offs {
		offs[i] = int64(le.Uint64(res[8*i:]))
	}
	res = res[8*(n+1):]
	if int64(len(res)) != offs[n]+4*int64(n) {
		t.Fatalf("kernels' CPU run: %d bytes after the offsets, want %d of blocks and %d of sums", len(res), offs[n], 4*n)
	}
	out, res = res[:offs[n]], res[offs[n]:]
	sums = make([]uint32, n)
	for i := range sums {
		sums[i] = le.Uint32(res[4*i:])
	}
	return offs, out, sums
}

// emuInputs are records for the kernels' CPU run: SHFC slices of the
// load generator's schema, and opaque bytes that find long matches, none,
// or only some (text, random, zeros, short periods, literal runs longer
// than 15 and 270 bytes).
func emuInputs(t *testing.T) [][]byte {
	t.Helper()
	b, err := synth.Generate("lineitem", 5, 1200, synth.WithNulls(0.05))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := partition.Partition(b, []int{0}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var in [][]byte
	for p := range pb.NumPartitions() {
		in = append(in, partition.AppendSlice(nil, pb, p))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"shuffle", "partition", "map ", "reduce", "block", "the ", "of ", "spark", "lz4 ", "data"}
	var text []byte
	for len(text) < 20000 {
		text = append(text, words[rng.IntN(len(words))]...)
		if rng.IntN(9) == 0 {
			text = append(text, byte('0'+rng.IntN(10)))
		}
	}
	random := make([]byte, 5000)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	lits := append(append([]byte{}, random[:300]...), bytes.Repeat([]byte("wxyz"), 50)...)
	return append(in, text, random, make([]byte, 5000), bytes.Repeat([]byte("abc"), 3000), lits, nil, []byte("hello world"), bytes.Repeat([]byte{'a'}, 13))
}

// The kernels' source, run on the CPU, makes lz4ref's streams byte for
// byte and sums them with Adler-32: the device tests (TestLZ4*,
// TestLZ4Adler32*) check the same on a GPU, this one on any machine.
func TestKernelsOnCPU(t *testing.T) {
	bin := emuKernels(t)
	recs := emuInputs(t)
	var payload []byte
	pl := &CompressPlan{}
	for i, r := range recs {
		pl.Records = append(pl.Records, Record{Partition: i, Off: int64(len(payload)), Len: int64(len(r))})
		payload = append(payload, r...)
	}
	for _, bs := range []int{lz4ref.MinBlockSize, 4 << 10, 32 << 10} {
		t.Run(fmt.Sprintf("block=%d", bs), func(t *testing.T) {
			offs, out, sums := emuCompress(t, bin, payload, pl, bs)
			_, first, _ := pl.jobs(bs)
			for i, r := range recs {
				got := out[offs[first[i]]:offs[first[i+1]]]
				if want := lz4ref.AppendStream(nil, r, bs); !bytes.Equal(got, want) {
					t.Errorf("record %d (%d bytes): %d stream bytes differ from lz4ref's %d", i, len(r), len(got), len(want))
				}
			}
			for j := range sums {
				if want := checksum.Adler32.Update(checksum.Adler32.Empty(), out[offs[j]:offs[j+1]]); sums[j] != want {
					t.Errorf("block %d: Adler-32 %#x, want %#x", j, sums[j], want)
				}
			}
		})
	}
}

// The kernels' source, run on the CPU, gathers a columnar batch's records
// as the plan says and makes the reference's streams of them: SHFC and
// kudo, with and without nulls, nested columns included.
func TestKernelsOnCPUColumnar(t *testing.T) {
	bin := emuKernels(t)
	for _, c := range []struct {
		f      partition.Format
		schema string
		nulls  float64
	}{{partition.SHFC, "lineitem", 0}, {partition.SHFC, "nested", 0.1}, {partition.Kudo, "lineitem", 0.1}, {partition.Kudo, "nested", 0}} {
		tb := schemaTestBatch(t, c.schema, 600, 300, 3, c.nulls)
		name := fmt.Sprintf("%v %s nulls %v", c.f, c.schema, c.nulls)
		pl, err := PlanColumnar(c.f, tb.l, tb.meta, tb.host, tb.prows, int64(len(tb.region)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(pl.Ops) == 0 {
			t.Fatalf("%s: a plan without gather ops", name)
		}
		const bs = 32 << 10
		offs, out, _ := emuCompress(t, bin, tb.region, pl, bs)
		_, first, _ := pl.jobs(bs)
		payload := make([]byte, pl.Gathered)
		pl.Gather(payload, tb.region)
		want := pl.Streams(payload, bs)
		for i := range pl.Records {
			if got := out[offs[first[i]]:offs[first[i+1]]]; !bytes.Equal(got, want[i]) {
				t.Errorf("%s: record %d: %d stream bytes differ from the reference's %d", name, i, len(got), len(want[i]))
			}
		}
	}
}
