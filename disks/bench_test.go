package disks

import (
	"fmt"
	"testing"
	"time"
)

// hugeStatfs makes the real statfs call, for its cost, and reports an
// exabyte free, so that benchmarks never fill the disk's ledger.
func hugeStatfs(dir string) (free, total uint64, err error) {
	if _, _, err := statfs(dir); err != nil {
		return 0, 0, err
	}
	return 1 << 60, 1 << 60, nil
}

// BenchmarkGrow measures admitting one 64 KiB write, from parallel
// writers on one disk, with statfs read at most every refresh bound, or
// for every Grow.
func BenchmarkGrow(b *testing.B) {
	for _, refresh := range []time.Duration{DefaultRefresh, 0} {
		b.Run(fmt.Sprintf("refresh=%v", refresh), func(b *testing.B) {
			s, err := New([]string{b.TempDir()}, WithStatfs(hugeStatfs), WithRefresh(refresh))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(64 << 10)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r, err := s.Reserve("app", 0)
				if err != nil {
					b.Error(err)
					return
				}
				defer r.Release()
				for pb.Next() {
					if err := r.Grow(64 << 10); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkReserveRelease measures placing and ending one map output on
// one of four disks.
func BenchmarkReserveRelease(b *testing.B) {
	dirs := []string{b.TempDir(), b.TempDir(), b.TempDir(), b.TempDir()}
	s, err := New(dirs, WithStatfs(hugeStatfs))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := s.Reserve("app", 1<<20)
			if err != nil {
				b.Error(err)
				return
			}
			r.Release()
		}
	})
}
