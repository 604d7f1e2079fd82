//go:build cuda

package gpu

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

const benchBytes = 256 << 20

// deviceBuffer allocates n bytes of device memory, freed when the
// benchmark ends.
func deviceBuffer(tb testing.TB, d *Device, n int64) *Buffer {
	tb.Helper()
	buf, err := d.Alloc(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { buf.Free() })
	return buf
}

// pinnedBuffer allocates n bytes of pinned host memory, freed when the
// benchmark ends.
func pinnedBuffer(tb testing.TB, d *Device, n int) *Pinned {
	tb.Helper()
	pin, err := d.AllocPinned(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pin.Free() })
	return pin
}

// BenchmarkCopyToHost is the baseline for staged copies: one plain
// cuMemcpyDtoH of benchBytes into pinned memory, and into Go memory.
func BenchmarkCopyToHost(b *testing.B) {
	d := device(b)
	src := deviceBuffer(b, d, benchBytes)
	pin := pinnedBuffer(b, d, benchBytes)
	for _, tc := range []struct {
		name string
		dst  []byte
	}{{"pinned", pin.Bytes()}, {"pageable", make([]byte, benchBytes)}} {
		b.Run("dst="+tc.name, func(b *testing.B) {
			b.SetBytes(benchBytes)
			b.ReportAllocs()
			for b.Loop() {
				if err := d.CopyToHost(unsafe.Pointer(&tc.dst[0]), src.Ptr(), benchBytes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCopyWait copies n bytes device to host from inflight
// goroutines at once, each into pinned memory of its own with
// Device.CopyAsync and a wait that polls for up to spin before it sleeps
// in the driver (Copy.Wait's is copySpin), as the daemon's copies of
// compressed batches (7 MiB of the load generator's) and its plans' reads
// (about 1 MiB) do. It reports MB/s in all and the mean time from queueing
// a copy to seeing it landed (ms/copy).
func BenchmarkCopyWait(b *testing.B) {
	d := device(b)
	const most = 8 << 20
	src := deviceBuffer(b, d, most)
	for _, n := range []int64{1 << 20, 7 << 20} {
		for _, inflight := range []int{1, 16} {
			for _, spin := range []time.Duration{0, copySpin, 2 * time.Millisecond} {
				b.Run(fmt.Sprintf("bytes=%dMiB/inflight=%d/spin=%v", n>>20, inflight, spin), func(b *testing.B) {
					pins := make([]*Pinned, inflight)
					for i := range pins {
						pins[i] = pinnedBuffer(b, d, most)
					}
					b.SetBytes(n)
					var next, waited atomic.Int64
					var wg sync.WaitGroup
					b.ResetTimer()
					for i := range inflight {
						wg.Go(func() {
							dst := unsafe.Pointer(&pins[i].Bytes()[0])
							for next.Add(1) <= int64(b.N) {
								start := time.Now()
								c, err := d.CopyAsync(dst, src.Ptr(), n)
								if err == nil {
									err = c.wait(spin)
								}
								if err != nil {
									b.Error(err)
									return
								}
								waited.Add(int64(time.Since(start)))
							}
						})
					}
					wg.Wait()
					b.ReportMetric(float64(waited.Load())/1e6/float64(b.N), "ms/copy")
				})
			}
		}
	}
}

// BenchmarkStream copies the same bytes through the staging pool, chunk
// by chunk with two copies in flight, as the daemon does.
func BenchmarkStream(b *testing.B) {
	d := device(b)
	src := deviceBuffer(b, d, benchBytes)
	for _, chunk := range []int{2 << 20, 8 << 20, 16 << 20, 32 << 20} {
		b.Run(fmt.Sprintf("chunk=%dMiB", chunk>>20), func(b *testing.B) {
			p, err := NewPool(d, WithChunkSize(chunk), WithPrime(DefaultMaxChunks))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.SetBytes(benchBytes)
			b.ReportAllocs()
			for b.Loop() {
				err := p.Stream(context.Background(), src.Ptr(), benchBytes, nil, func(off int64, s *Staged) error {
					s.Release()
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPoolStart measures what priming costs (pool ready) and buys
// (the first 32 MiB staged), primed against grown on first use.
func BenchmarkPoolStart(b *testing.B) {
	d := device(b)
	const first = 32 << 20
	src := deviceBuffer(b, d, first)
	for _, prime := range []int{0, DefaultMaxChunks} {
		b.Run(fmt.Sprintf("primed=%v", prime > 0), func(b *testing.B) {
			var ready, firstCopy time.Duration
			for b.Loop() {
				start := time.Now()
				p, err := NewPool(d, WithPrime(prime))
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				err = p.Stream(context.Background(), src.Ptr(), first, nil, func(off int64, s *Staged) error {
					s.Release()
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				ready += t1.Sub(start)
				firstCopy += time.Since(t1)
				b.StopTimer()
				p.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(ready.Microseconds())/float64(b.N), "ready-µs")
			b.ReportMetric(float64(firstCopy.Microseconds())/float64(b.N), "first-32MiB-µs")
		})
	}
}

// BenchmarkPartition partitions the same batch on the GPU (device memory
// to device memory) and on the host (partition.Partition).
func BenchmarkPartition(b *testing.B) {
	d := device(b)
	p := partitioner(b, d)
	defer p.Close()
	for _, tc := range []struct {
		schema string
		rows   int
	}{{"ints", 8 << 20}, {"lineitem", 2 << 20}} {
		batch, err := synth.Generate(tc.schema, 1, tc.rows)
		if err != nil {
			b.Fatal(err)
		}
		payload, l := gpuLayout(batch)
		keys := []int{0}
		const parts = 200
		b.Run(fmt.Sprintf("impl=gpu/schema=%s/rows=%d", tc.schema, tc.rows), func(b *testing.B) {
			src, err := d.Upload(payload)
			if err != nil {
				b.Fatal(err)
			}
			defer src.Free()
			dst, err := d.Alloc(src.Size())
			if err != nil {
				b.Fatal(err)
			}
			defer dst.Free()
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Partition(dst, src, l, keys, parts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tc.rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
		b.Run(fmt.Sprintf("impl=cpu/schema=%s/rows=%d", tc.schema, tc.rows), func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := partition.Partition(batch, keys, parts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tc.rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
