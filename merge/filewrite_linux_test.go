package merge

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/vfs"
	"golang.org/x/sys/unix"
)

// BenchmarkFileWrite asks whether several threads fill one new data file
// in the page cache faster than one: the question behind the streaming
// merge writing the data file from one goroutine. Each iteration writes a
// new 20 MiB file (a map task's data file at lineitem's compression) from
// pieces of 2,500 bytes (a segment at 2,000 partitions), then removes it:
//
//   - writev: one thread, WriteBuffers of 1 MiB (the merge's own writes);
//   - pwrite-N: N threads, each vectored writes of 1 MiB at its own offsets;
//   - mmap-N: the file sized first, then N threads copying into a shared
//     mapping of it;
//   - writev-prealloc: writev after one vfs.Preallocate of the whole file
//     (the call timed), as the merge of run files does;
//   - writev-prealloc-ahead: writev with a Preallocate of the next 4 MiB
//     each time the writes reach the end of the last, as the streaming
//     merge does.
//
// On ext4 and tmpfs buffered writes to one file take its inode's lock, so
// pwrite-N cannot beat writev; mmap-N pays a page fault per page.
func BenchmarkFileWrite(b *testing.B) {
	const total, piece = 20 << 20, 2500
	src := make([]byte, total)
	for i := range src {
		src[i] = byte(i * 7)
	}
	pieces := func(off, n int) [][]byte {
		var v [][]byte
		for o := off; o < off+n; o += piece {
			v = append(v, src[o:min(o+piece, off+n)])
		}
		return v
	}
	// parallel runs fn(start, end) on n goroutines over even shares of
	// [0, total).
	parallel := func(n int, fn func(start, end int) error) error {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for t := range n {
			wg.Go(func() { errs[t] = fn(t*total/n, (t+1)*total/n) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	modes := []struct {
		name  string
		write func(f *os.File) error
	}{{"writev", func(f *os.File) error {
		for off := 0; off < total; off += 1 << 20 {
			if err := WriteBuffers(f, pieces(off, min(1<<20, total-off))); err != nil {
				return err
			}
		}
		return nil
	}}}
	modes = append(modes, struct {
		name  string
		write func(f *os.File) error
	}{"writev-prealloc", func(f *os.File) error {
		vfs.Preallocate(f, 0, total)
		return modes[0].write(f)
	}}, struct {
		name  string
		write func(f *os.File) error
	}{"writev-prealloc-ahead", func(f *os.File) error {
		for off := 0; off < total; off += 1 << 20 {
			if off%(4<<20) == 0 {
				vfs.Preallocate(f, int64(off), min(4<<20, int64(total-off)))
			}
			if err := WriteBuffers(f, pieces(off, min(1<<20, total-off))); err != nil {
				return err
			}
		}
		return nil
	}})
	for _, n := range []int{4, 16} {
		modes = append(modes, struct {
			name  string
			write func(f *os.File) error
		}{fmt.Sprintf("pwrite-%d", n), func(f *os.File) error {
			return parallel(n, func(start, end int) error {
				for off := start; off < end; off += 1 << 20 {
					if _, err := unix.Pwritev(int(f.Fd()), pieces(off, min(1<<20, end-off)), int64(off)); err != nil {
						return err
					}
				}
				return nil
			})
		}}, struct {
			name  string
			write func(f *os.File) error
		}{fmt.Sprintf("mmap-%d", n), func(f *os.File) error {
			if err := f.Truncate(total); err != nil {
				return err
			}
			m, err := unix.Mmap(int(f.Fd()), 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				return err
			}
			defer unix.Munmap(m)
			return parallel(n, func(start, end int) error {
				for o := start; o < end; o += piece {
					copy(m[o:min(o+piece, end)], src[o:])
				}
				return nil
			})
		}})
	}
	dir := b.TempDir()
	for _, mode := range modes {
		b.Run("mode="+mode.name, func(b *testing.B) {
			b.SetBytes(total)
			path := filepath.Join(dir, "data")
			for b.Loop() {
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				if err := mode.write(f); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				if err := os.Remove(path); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
