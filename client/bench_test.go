package client

import (
	"fmt"
	"testing"

	"github.com/shuffled/shuffled/protocol"
)

// BenchmarkWriteOpaque measures one batch round trip per data plane
// against the in-test server, which reads inline bytes out of the socket
// and maps memfds read-only (touching every page) but keeps nothing.
// memfd-direct has the producer fill a Memfd (the zero-copy path); memfd
// copies a []byte into a fresh sealed memfd.
func BenchmarkWriteOpaque(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		for _, plane := range []string{"inline", "memfd", "memfd-direct"} {
			b.Run(fmt.Sprintf("plane=%v/size=%dKiB", plane, size>>10), func(b *testing.B) {
				s := newFakeServer(b)
				s.discard = true
				dp := PlaneInline
				if plane != "inline" {
					dp = PlaneMemfd
				}
				c, err := Dial(ctx, s.addr(), WithDataPlane(dp))
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				const parts = 200
				m, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: parts, Kind: protocol.KindOpaque})
				if err != nil {
					b.Fatal(err)
				}
				data := make([]byte, size)
				offs := make([]int64, parts+1)
				for p := range offs {
					offs[p] = int64(p * size / parts)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if plane == "memfd-direct" {
						// The producer writes into the memfd: no copy
						// beyond its own.
						f, err := NewMemfd(size)
						if err != nil {
							b.Fatal(err)
						}
						copy(f.Bytes(), data)
						err = m.WriteOpaqueMemfd(ctx, f, offs)
						f.Close()
						if err != nil {
							b.Fatal(err)
						}
						continue
					}
					if err := m.WriteOpaque(ctx, data, offs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkMemfdCreateSeal is the fixed cost of a memfd batch: create,
// size, seal, close (no payload).
func BenchmarkMemfdCreateSeal(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		f, err := NewMemfd(0)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Seal(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
