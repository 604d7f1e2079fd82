//go:build cuda

package gpu

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/gpu/lz4ref"
)

// compressSummed is compressOnce with the streams' sums asked for: the
// streams copied to the host, the gathered payload and Compressed.Adler32.
func compressSummed(c *Compressor, region []byte, pl *CompressPlan, bs int) (got [][]byte, payload []byte, sums []uint32, err error) {
	pl.Adler32 = true
	defer func() { pl.Adler32 = false }()
	return compressWithSums(c, region, pl, bs)
}

// checkSums fails the test unless there is one sum per stream and each is
// the Adler-32 of its stream's bytes as the host has them.
func checkSums(t *testing.T, name string, got [][]byte, sums []uint32, pl *CompressPlan, bs int) {
	t.Helper()
	if len(sums) != len(got) {
		t.Fatalf("%s: %d sums for %d streams", name, len(sums), len(got))
	}
	alg := checksum.Adler32
	for i, s := range got {
		if want := alg.Update(alg.Empty(), s); sums[i] != want {
			t.Fatalf("%s: record %d (%d raw bytes, %d stream bytes, %d blocks): device Adler-32 %#08x, want %#08x",
				name, i, pl.Records[i].Len, len(s), lz4ref.Blocks(pl.Records[i].Len, bs)+1, sums[i], want)
		}
	}
}

// withEmpty returns pl with records of no bytes added first, in the middle
// and last (their streams are an end mark alone).
func withEmpty(pl *CompressPlan) *CompressPlan {
	recs := []Record{{Partition: 0, Off: 0, Len: 0}}
	mid := len(pl.Records) / 2
	recs = append(recs, pl.Records[:mid]...)
	recs = append(recs, Record{Partition: pl.Records[mid].Partition, Off: pl.Records[mid].Off, Len: 0})
	recs = append(recs, pl.Records[mid:]...)
	last := pl.Records[len(pl.Records)-1]
	recs = append(recs, Record{Partition: last.Partition, Off: last.Off + last.Len, Len: 0})
	q := *pl
	q.Records = recs
	return &q
}

// Opaque payloads (text, random, zeros, short periods, partitions of one
// to a few bytes, records of several blocks and of none) at every block
// size class, with both compress kernels: every stream's device sum is
// the Adler-32 of its bytes, and asking for sums leaves the streams as
// the reference makes them.
func TestLZ4Adler32Opaque(t *testing.T) {
	c := compressor(t, device(t))
	defer c.Close()
	region, offs := opaqueRegion(rand.New(rand.NewPCG(5, 6)))
	for _, k := range kernels {
		c.UseSharedMemory(k.smem)
		for _, bs := range []int{32 << 10, 64 << 10, lz4ref.MinBlockSize} {
			for _, rs := range []int{1 << 20, 100000} {
				pl, err := PlanOpaque(offs, int64(len(region)), rs)
				if err != nil {
					t.Fatal(err)
				}
				pl = withEmpty(pl)
				name := fmt.Sprintf("%s: opaque block %d record %d", k.name, bs, rs)
				got, payload, sums, err := compressSummed(c, region, pl, bs)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				same(t, name, got, pl, payload, bs)
				checkSums(t, name, got, sums, pl, bs)
			}
		}
	}
}

// SHFC and kudo payloads of every load generator schema and of nested
// columns, with and without nulls: every stream's device sum is the
// Adler-32 of its bytes.
func TestLZ4Adler32Columnar(t *testing.T) {
	c := compressor(t, device(t))
	defer c.Close()
	eachColumnarPlan(t, func(cc columnarCase) {
		got, payload, sums, err := compressSummed(c, cc.tb.region, cc.pl, cc.bs)
		if err != nil {
			t.Fatalf("%s: %v", cc.name, err)
		}
		same(t, cc.name, got, cc.pl, payload, cc.bs)
		checkSums(t, cc.name, got, sums, cc.pl, cc.bs)
	})
}

// A plan that does not ask for sums gets none; batches with and without
// sums, of growing and shrinking sizes, through two slots from several
// goroutines at once, each get their own streams' sums.
func TestLZ4Adler32Slots(t *testing.T) {
	c := compressorSlots(t, device(t), 2)
	defer c.Close()
	region := textData(1<<20, 9)
	pl, err := PlanOpaque(evenOffsets(int64(len(region)), 5), int64(len(region)), 100000)
	if err != nil {
		t.Fatal(err)
	}
	src, err := c.d.Upload(region)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Compress(uintptr(src.ptr), int64(len(region)), pl, 32<<10)
	src.Free()
	if err != nil {
		t.Fatal(err)
	}
	if res.Adler32 != nil {
		t.Errorf("a plan without Adler32: %d sums, want none", len(res.Adler32))
	}
	res.Release()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k, n := range []int{3000, 2<<20 + g, 70000} {
				region := textData(n, uint64(10*g+k))
				pl, err := PlanOpaque(evenOffsets(int64(len(region)), 3+g), int64(len(region)), 100000)
				if err != nil {
					t.Error(err)
					return
				}
				got, _, sums, err := compressSummed(c, region, pl, 32<<10)
				if err != nil {
					t.Error(err)
					return
				}
				alg := checksum.Adler32
				if len(sums) != len(got) {
					t.Errorf("goroutine %d batch %d: %d sums for %d streams", g, k, len(sums), len(got))
					return
				}
				for i, s := range got {
					if want := alg.Update(alg.Empty(), s); sums[i] != want {
						t.Errorf("goroutine %d batch %d record %d: device Adler-32 %#08x, want %#08x", g, k, i, sums[i], want)
					}
				}
			}
		})
	}
	wg.Wait()
}
