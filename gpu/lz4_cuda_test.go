//go:build cuda

package gpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/gpu/lz4ref"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

// compressor loads the lz4 kernels: from $SHUFFLED_LZ4_PTX when set (a
// freshly generated PTX), else those built in.
func compressor(tb testing.TB, d *Device) *Compressor {
	tb.Helper()
	return compressorSlots(tb, d, 0)
}

// compressorSlots is compressor with slots batches in flight (0: the
// default).
func compressorSlots(tb testing.TB, d *Device, slots int) *Compressor {
	tb.Helper()
	var c *Compressor
	var err error
	if path := os.Getenv("SHUFFLED_LZ4_PTX"); path != "" {
		ptx, rerr := os.ReadFile(path)
		if rerr != nil {
			tb.Fatal(rerr)
		}
		c, err = d.LoadCompressor(ptx, slots)
	} else {
		c, err = d.NewCompressor(slots)
	}
	if err != nil {
		tb.Fatalf("loading the lz4 kernels: %v", err)
	}
	return c
}

// runCompress uploads region, compresses pl's records on the device and
// returns each record's stream and the gathered payload as the host
// reference makes it.
func runCompress(t testing.TB, c *Compressor, region []byte, pl *CompressPlan, bs int) (got [][]byte, payload []byte) {
	t.Helper()
	got, payload, err := compressOnce(c, region, pl, bs)
	if err != nil {
		t.Fatal(err)
	}
	return got, payload
}

// compressOnce is runCompress, returning its error.
func compressOnce(c *Compressor, region []byte, pl *CompressPlan, bs int) (got [][]byte, payload []byte, err error) {
	got, payload, _, err = compressWithSums(c, region, pl, bs)
	return got, payload, err
}

// compressWithSums is compressOnce that also returns the device's sums of
// the streams (Compressed.Adler32: nil unless pl asks for them).
func compressWithSums(c *Compressor, region []byte, pl *CompressPlan, bs int) (got [][]byte, payload []byte, sums []uint32, err error) {
	src, err := c.d.Upload(region)
	if err != nil {
		return nil, nil, nil, err
	}
	defer src.Free()
	res, err := c.Compress(uintptr(src.ptr), int64(len(region)), pl, bs)
	if err != nil {
		return nil, nil, nil, err
	}
	defer res.Release()
	host := make([]byte, max(res.Size, 1))
	if res.Size > 0 {
		if err := c.d.CopyToHost(unsafePtr(host), res.Ptr, res.Size); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, s := range res.Streams {
		got = append(got, host[s.Offset:s.Offset+s.Length])
	}
	payload = region
	if pl.Gathered > 0 {
		payload = make([]byte, pl.Gathered)
		pl.Gather(payload, region)
	}
	return got, payload, res.Adler32, nil
}

// same fails the test unless the device's streams equal the reference's
// byte for byte and decode to the records.
func same(t *testing.T, name string, got [][]byte, pl *CompressPlan, payload []byte, bs int) {
	t.Helper()
	want := pl.Streams(payload, bs)
	if len(got) != len(want) {
		t.Fatalf("%s: %d streams, want %d", name, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			k := 0
			for k < min(len(got[i]), len(want[i])) && got[i][k] == want[i][k] {
				k++
			}
			t.Fatalf("%s: record %d (%d raw bytes): device stream of %d bytes differs from the reference's %d bytes at byte %d",
				name, i, pl.Records[i].Len, len(got[i]), len(want[i]), k)
		}
		r := pl.Records[i]
		if d, err := codec.Decode(codec.LZ4, nil, got[i]); err != nil || !bytes.Equal(d, payload[r.Off:r.Off+r.Len]) {
			t.Fatalf("%s: record %d does not decode to its bytes: %v", name, i, err)
		}
	}
}

func textData(n int, seed uint64) []byte {
	words := []string{"the", "shuffle", "quick", "partition", "block", "of", "lz4", "spark",
		"executor", "reduce", "map", "output", "and", "a", "carefully", "pending", "requests"}
	r := rand.New(rand.NewPCG(seed, 2))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(" ,.\n"[r.IntN(4)])
	}
	return b.Bytes()[:n]
}

// kernels is each compress kernel's name, for the tests to run both.
var kernels = []struct {
	name string
	smem bool
}{{"smem", true}, {"global", false}}

// Opaque payloads: random, text, zeros, short periods, and partitions of
// 0 and 1 bytes, at block sizes 32 KiB, 64 KiB and the minimum, with both
// compress kernels.
func TestLZ4OpaqueMatchesReference(t *testing.T) {
	c := compressor(t, device(t))
	defer c.Close()
	for _, k := range kernels {
		c.UseSharedMemory(k.smem)
		testOpaque(t, c, k.name)
	}
}

// opaqueRegion lays out the opaque test partitions one after another
// (text, random bytes from r, zeros, none, one byte, a short period,
// records of one to a few bytes, of several blocks, and mixed) and
// returns the region and the partitions' offsets.
func opaqueRegion(r *rand.Rand) (region []byte, offs []int64) {
	random := make([]byte, 1<<20)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	period := make([]byte, 300000)
	for i := range period {
		period[i] = byte(i % 7)
	}
	offs = []int64{0}
	for _, part := range [][]byte{textData(3<<20+5, 1), random, make([]byte, 200000), nil, {42}, period,
		textData(1, 2), textData(13, 3), textData(17, 4), textData(65537, 5), append(textData(40000, 6), random[:40000]...)} {
		region = append(region, part...)
		offs = append(offs, int64(len(region)))
	}
	return region, offs
}

func testOpaque(t *testing.T, c *Compressor, kernel string) {
	region, offs := opaqueRegion(rand.New(rand.NewPCG(3, 4)))
	for _, bs := range []int{32 << 10, 64 << 10, lz4ref.MinBlockSize} {
		for _, rs := range []int{1 << 20, 100000} {
			pl, err := PlanOpaque(offs, int64(len(region)), rs)
			if err != nil {
				t.Fatal(err)
			}
			got, payload := runCompress(t, c, region, pl, bs)
			same(t, fmt.Sprintf("%s: opaque block %d record %d", kernel, bs, rs), got, pl, payload, bs)
		}
	}
}

// SHFC and kudo payloads of every load generator schema (every type under
// "types") and of nested and void columns (nestedSchema), with and
// without nulls, records split as the writer splits
// them, with both compress kernels.
func TestLZ4ColumnarMatchesReference(t *testing.T) {
	c := compressor(t, device(t))
	defer c.Close()
	for _, k := range kernels {
		c.UseSharedMemory(k.smem)
		testColumnar(t, c, k.name)
	}
}

// columnarCase is one plan of eachColumnarPlan.
type columnarCase struct {
	name   string
	f      partition.Format
	schema string
	nulls  float64
	bs     int
	tb     *testBatch
	pl     *CompressPlan
}

// eachColumnarPlan calls fn with the columnar plans of the device tests:
// SHFC and kudo, every load generator schema and nested columns, with and
// without nulls, 32 and 64 KiB blocks.
func eachColumnarPlan(t *testing.T, fn func(cc columnarCase)) {
	for _, f := range []partition.Format{partition.SHFC, partition.Kudo} {
		for _, schema := range append(synth.Schemas, "nested") {
			for _, nulls := range []float64{0, 0.1} {
				tb := schemaTestBatch(t, schema, 50000, 20000, 13, nulls)
				for _, bs := range []int{32 << 10, 64 << 10} {
					pl, err := PlanColumnar(f, tb.l, tb.meta, tb.host, tb.prows, int64(len(tb.region)), 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("%v %s nulls %v block %d", f, schema, nulls, bs)
					fn(columnarCase{name: name, f: f, schema: schema, nulls: nulls, bs: bs, tb: tb, pl: pl})
				}
			}
		}
	}
}

func testColumnar(t *testing.T, c *Compressor, kernel string) {
	eachColumnarPlan(t, func(cc columnarCase) {
		tb, pl, f := cc.tb, cc.pl, cc.f
		got, payload := runCompress(t, c, tb.region, pl, cc.bs)
		name := kernel + ": " + cc.name
		same(t, name, got, pl, payload, cc.bs)
		for i, s := range got {
			d, _ := codec.Decode(codec.LZ4, nil, s)
			r := pl.Records[i]
			if lo, hi := tb.b.PartitionRows(r.Partition); r.Len == int64(f.Size(tb.b, lo, hi)) &&
				!bytes.Equal(d, f.Append(nil, tb.b, lo, hi)) {
				t.Fatalf("%s: record %d is not partition %d's %v serialization", name, i, r.Partition, f)
			}
		}
		if keep := os.Getenv("SHUFFLED_LZ4_KEEP"); keep != "" && cc.schema == "lineitem" && cc.bs == 32<<10 && !c.smem {
			var all []byte
			for _, s := range got {
				all = append(all, s...)
			}
			base := filepath.Join(keep, fmt.Sprintf("lineitem-nulls%v", cc.nulls))
			if f == partition.Kudo {
				base += "-kudo"
			}
			os.WriteFile(base+".lz4", all, 0o644)
			os.WriteFile(base+".raw", payload, 0o644)
		}
	})
}

// Batches compressed at the same time, more than there are slots, each
// of its own data, all come out as the reference makes them.
func TestLZ4ConcurrentMatchesReference(t *testing.T) {
	c := compressor(t, device(t))
	defer c.Close()
	if c.Slots() != DefaultCompressSlots {
		t.Fatalf("Slots() = %d, want %d", c.Slots(), DefaultCompressSlots)
	}
	var wg sync.WaitGroup
	for g := range 3 * c.Slots() {
		wg.Go(func() {
			region := textData(1<<20+g*4099, uint64(100+g))
			pl, err := PlanOpaque(evenOffsets(int64(len(region)), 7), int64(len(region)), 100000)
			if err != nil {
				t.Error(err)
				return
			}
			got, payload, err := compressOnce(c, region, pl, 32<<10)
			if err != nil {
				t.Error(err)
				return
			}
			want := pl.Streams(payload, 32<<10)
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("batch %d record %d: device stream of %d bytes differs from the reference's %d bytes", g, i, len(got[i]), len(want[i]))
				}
			}
		})
	}
	wg.Wait()
}

// Columnar batches compressed from several goroutines at once, through
// two slots, each goroutine's batches of its own and of changing sizes
// (the slots' pinned uploads grow, then serve smaller batches), gather
// and compress as the reference does.
func TestLZ4ConcurrentColumnarMatchesReference(t *testing.T) {
	c := compressorSlots(t, device(t), 2)
	defer c.Close()
	type batch struct {
		name   string
		region []byte
		pl     *CompressPlan
	}
	var batches [][]batch
	for g := range 4 {
		var bs []batch
		for k, rows := range []int{3000, 40000, 500} {
			f := []partition.Format{partition.SHFC, partition.Kudo}[(g+k)%2]
			var tb *testBatch
			if g%2 == 0 {
				tb = newTestBatch(t, synth.Schemas[(g+k)%len(synth.Schemas)], rows+g, 7+g, 0.1)
			} else {
				tb = newNestedTestBatch(t, rows/4+g, 5+g, 0.2, int64(g*10+k))
			}
			pl, err := PlanColumnar(f, tb.l, tb.meta, tb.host, tb.prows, int64(len(tb.region)), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			bs = append(bs, batch{fmt.Sprintf("goroutine %d batch %d (%v, %d rows)", g, k, f, rows), tb.region, pl})
		}
		batches = append(batches, bs)
	}
	var wg sync.WaitGroup
	for g := range batches {
		wg.Go(func() {
			for range 3 {
				for _, b := range batches[g] {
					got, payload, err := compressOnce(c, b.region, b.pl, 32<<10)
					if err != nil {
						t.Errorf("%s: %v", b.name, err)
						return
					}
					want := b.pl.Streams(payload, 32<<10)
					if len(got) != len(want) {
						t.Errorf("%s: %d streams, want %d", b.name, len(got), len(want))
						return
					}
					for i := range want {
						if !bytes.Equal(got[i], want[i]) {
							t.Errorf("%s: record %d: device stream of %d bytes differs from the reference's %d bytes", b.name, i, len(got[i]), len(want[i]))
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
}

// An empty plan and a plan with gather ops outside the region fail or
// succeed without touching the device.
func TestLZ4CompressChecks(t *testing.T) {
	c := compressor(t, device(t))
	defer c.Close()
	res, err := c.Compress(0, 0, &CompressPlan{}, 32<<10)
	if err != nil || len(res.Streams) != 0 {
		t.Fatalf("empty plan: %v, %v", res, err)
	}
	res.Release()
	if _, err := c.Compress(0, 10, &CompressPlan{Records: []Record{{0, 5, 6}}}, 32<<10); err == nil {
		t.Errorf("record past the region: no error")
	}
	bad := &CompressPlan{Gathered: 8, Records: []Record{{0, 0, 8}}, Ops: []GatherOp{{Kind: OpCopy, N: 8, Src: 5, Dst: 0}}}
	if _, err := c.Compress(0, 10, bad, 32<<10); err == nil {
		t.Errorf("gather op past the region: no error")
	}
	if _, err := c.Compress(0, 10, &CompressPlan{}, 1<<20); err == nil {
		t.Errorf("block size 1 MiB: no error")
	}
}

// BenchmarkLZ4Compress is the kernels' throughput in raw bytes: the
// gather (SHFC), every block compressed, the results compacted, on a
// batch already in device memory; per compress kernel, with 1, 4, 8, 16
// and 32 batches in flight (a compressor of 32 slots: more batches than
// the daemon's 16 default slots show whether the kernels' rate is bound
// by the device or by how many batches keep it busy). lineitem-100k is
// the load generator's batch (100,000 rows, 200 partitions), lineitem
// four times that.
func BenchmarkLZ4Compress(b *testing.B) {
	c := compressorSlots(b, device(b), 32)
	defer c.Close()
	for _, input := range []string{"lineitem", "lineitem-100k", "text", "random"} {
		var region []byte
		var pl *CompressPlan
		var err error
		switch input {
		case "lineitem":
			region, pl, err = lineitemPlan(b, 400000)
		case "lineitem-100k":
			region, pl, err = lineitemPlan(b, 100000)
		case "text":
			region = textData(64<<20, 9)
			pl, err = PlanOpaque(evenOffsets(int64(len(region)), 200), int64(len(region)), 1<<20)
		case "random":
			region = make([]byte, 64<<20)
			r := rand.New(rand.NewPCG(1, 1))
			for i := range region {
				region[i] = byte(r.Uint32())
			}
			pl, err = PlanOpaque(evenOffsets(int64(len(region)), 200), int64(len(region)), 1<<20)
		}
		if err != nil {
			b.Fatal(err)
		}
		src, err := c.d.Upload(region)
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range kernels {
			for _, inflight := range []int{1, 4, 8, 16, 32} {
				b.Run(fmt.Sprintf("%s/kernel=%s/inflight=%d", input, k.name, inflight), func(b *testing.B) {
					c.UseSharedMemory(k.smem)
					b.SetBytes(pl.RawBytes)
					size := compressSteady(b, c, src, int64(len(region)), pl, inflight)
					b.ReportMetric(float64(pl.RawBytes)/float64(size), "ratio")
					b.ReportMetric(float64(c.ResidentWarps()), "warps/SM")
				})
			}
		}
		src.Free()
	}
	c.UseSharedMemory(false)
}

// lineitemPlan is a lineitem batch of rows rows in 200 partitions, as
// the load generator makes them, and its SHFC plan.
func lineitemPlan(tb testing.TB, rows int) ([]byte, *CompressPlan, error) {
	b := newTestBatch(tb, "lineitem", rows, 200, 0)
	pl, err := PlanColumnar(partition.SHFC, b.l, b.meta, b.host, b.prows, int64(len(b.region)), 1<<20)
	return b.region, pl, err
}

// compressSteady compresses pl's records of the n bytes at src at 32 KiB
// blocks b.N times, from inflight goroutines that each start the next
// batch as soon as theirs is done (as the daemon's connections do), and
// returns the size of the streams of one of them.
func compressSteady(b *testing.B, c *Compressor, src *Buffer, n int64, pl *CompressPlan, inflight int) int64 {
	var size, next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range inflight {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				res, err := c.Compress(uintptr(src.ptr), n, pl, 32<<10)
				if err != nil {
					b.Error(err)
					return
				}
				size.Store(res.Size)
				res.Release()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	return size.Load()
}

func evenOffsets(n int64, parts int) []int64 {
	o := make([]int64, parts+1)
	for p := range o {
		o[p] = n * int64(p) / int64(parts)
	}
	return o
}

func unsafePtr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

// lz4Phases names lz4_prof's phases, in the kernel's order (PROF_* in
// kernels/lz4.cu).
var lz4Phases = []string{"clear", "find", "extend", "back", "put", "xxh32"}

// BenchmarkLZ4Phases reports where the warps of lz4_compress spend their
// clock cycles, by phase, on the load generator's batch (100,000 lineitem
// rows) at 1 and 16 batches in flight: cycles per step (32 positions
// examined) of each phase, and the share of the warps' time. It needs the
// kernels built with -DLZ4_PROF and given in $SHUFFLED_LZ4_PTX:
//
//	nvcc -ptx -arch=compute_75 -O3 -DLZ4_PROF -o lz4-prof.ptx kernels/lz4.cu
//
// The clock reads perturb the kernel a little: compare its MB/s with
// BenchmarkLZ4Compress's.
func BenchmarkLZ4Phases(b *testing.B) {
	c := compressorSlots(b, device(b), 16)
	defer c.Close()
	var prof cu.DevicePtr
	var size int64
	if err := c.d.do(func() (err error) {
		prof, size, err = c.mod.Global("lz4_prof")
		return err
	}); err != nil {
		b.Skipf("the kernels were not built with -DLZ4_PROF: %v", err)
	}
	counts := make([]uint64, len(lz4Phases)+2) // the phases, steps, blocks
	if size != int64(8*len(counts)) {
		b.Fatalf("lz4_prof has %d bytes, want %d", size, 8*len(counts))
	}
	region, pl, err := lineitemPlan(b, 100000)
	if err != nil {
		b.Fatal(err)
	}
	src, err := c.d.Upload(region)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Free()
	for _, inflight := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			clear(counts)
			if err := c.d.do(func() error { return cu.MemcpyHtoD(prof, unsafe.Pointer(&counts[0]), size) }); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(pl.RawBytes)
			compressSteady(b, c, src, int64(len(region)), pl, inflight)
			if err := c.d.do(func() error { return cu.MemcpyDtoH(unsafe.Pointer(&counts[0]), prof, size) }); err != nil {
				b.Fatal(err)
			}
			steps, blocks := counts[len(lz4Phases)], counts[len(lz4Phases)+1]
			if steps == 0 || blocks == 0 {
				b.Fatalf("lz4_prof counted %d steps in %d blocks", steps, blocks)
			}
			var total uint64
			for _, v := range counts[:len(lz4Phases)] {
				total += v
			}
			for k, name := range lz4Phases {
				b.ReportMetric(float64(counts[k])/float64(steps), name+"-cycles/step")
				b.ReportMetric(100*float64(counts[k])/float64(total), name+"-%")
			}
			b.ReportMetric(float64(steps)/float64(blocks), "steps/block")
			b.ReportMetric(float64(total)/float64(blocks), "cycles/block")
		})
	}
}
