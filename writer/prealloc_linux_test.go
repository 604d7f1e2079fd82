package writer

import (
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"golang.org/x/sys/unix"
)

// preallocFS records the Preallocate calls on the files it creates, and
// passes them on.
type preallocFS struct {
	vfs.FS
	mu    sync.Mutex
	calls map[string][][2]int64 // by base name: offset and length
}

type preallocFile struct {
	vfs.File
	fs *preallocFS
}

func (fsys *preallocFS) Create(name string, perm fs.FileMode) (vfs.File, error) {
	f, err := fsys.FS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return &preallocFile{File: f, fs: fsys}, nil
}

func (f *preallocFile) Preallocate(off, n int64) {
	f.fs.mu.Lock()
	f.fs.calls[filepath.Base(f.Name())] = append(f.fs.calls[filepath.Base(f.Name())], [2]int64{off, n})
	f.fs.mu.Unlock()
	vfs.Preallocate(f.File, off, n)
}

// TestMergePreallocates: each merge of several runs preallocates its data
// file ahead of its writes, only for bytes it then writes (the ranges
// follow one another from 0 and end within the file), and the committed
// file holds no disk beyond its size. The streaming merge, marked and at
// Commit, allocates the bytes its runs hold as it goes; the merge of run
// files knows the whole size at the start.
func TestMergePreallocates(t *testing.T) {
	for _, c := range []struct {
		name   string
		limit  int64
		marked bool
		whole  bool // one call for the whole file
	}{
		{"streaming/marked", 64 << 20, true, false},
		{"streaming/commit", 64 << 20, false, false},
		{"files", 1 << 20, false, true}, // later runs outgrow the memory budget
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := &preallocFS{FS: vfs.Default, calls: map[string][][2]int64{}}
			e := newEngine(t, WithFS(fsys), WithLimit(c.limit), WithRecordSize(16<<10), WithWorkers(2))
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(17, 3))
			const parts, runs = 40, 4
			ops := fullRuns(rng, runs, parts, func() int { return 20000 + rng.IntN(60000) }) // about 8 MB
			spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 0}, NumPartitions: parts, Codec: codec.None, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
			mark := -1
			if c.marked {
				mark = lastRunStart(ops)
			}
			w, err := writeMarked(e, spec, ops, mark)
			if err != nil {
				t.Fatal(err)
			}
			res, err := w.Commit(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Runs != runs {
				t.Fatalf("%d runs, want %d", res.Runs, runs)
			}
			checkMerged(t, e, spec, dir, ops)
			size := sum(res.Lengths)

			// The merge's temp file is the one with calls whose ranges
			// reach furthest.
			var ranges [][2]int64
			for _, rs := range fsys.calls {
				if len(rs) > 0 && (len(ranges) == 0 || rs[len(rs)-1][0]+rs[len(rs)-1][1] > ranges[len(ranges)-1][0]+ranges[len(ranges)-1][1]) {
					ranges = rs
				}
			}
			if len(ranges) == 0 {
				t.Fatalf("no Preallocate on the data file of %d bytes", size)
			}
			var end int64
			for _, r := range ranges {
				if r[0] != end || r[1] <= 0 {
					t.Fatalf("preallocated %v: each range must start where the last ended (%d)", ranges, end)
				}
				end += r[1]
			}
			if end > size {
				t.Errorf("preallocated %d bytes of a %d-byte data file: beyond what it writes", end, size)
			}
			if c.whole && (len(ranges) != 1 || end != size) {
				t.Errorf("merge of run files preallocated %v, want one range of the file's %d bytes", ranges, size)
			}
			if !c.whole && end < size/2 {
				t.Errorf("streaming merge preallocated %d of %d bytes (%v): less than half", end, size, ranges)
			}

			data, err := os.Open(shufflefile.Path(spec.Layout, shufflefile.DataName(spec.ID)))
			if err != nil {
				t.Fatal(err)
			}
			defer data.Close()
			if held := diskBytes(t, data); held > (size+4095)/4096*4096+64<<10 {
				t.Errorf("data file of %d bytes holds %d bytes of disk", size, held)
			}
		})
	}
}

// diskBytes returns the bytes of disk f holds (st_blocks).
func diskBytes(t *testing.T, f *os.File) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}
