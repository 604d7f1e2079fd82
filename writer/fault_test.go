package writer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// switchable injects inj while on is set, so one engine can see a fault
// and then a healthy disk.
type switchable struct {
	on  bool
	inj errorfs.Injector
}

func (s *switchable) MaybeError(op errorfs.Op) error {
	if !s.on {
		return nil
	}
	return s.inj.MaybeError(op)
}

// TestFaults fails whole classes of operations as a sick disk does — every
// write with ENOSPC (also as short writes), every read and fsync with EIO,
// every rename — and checks, for a map output of several runs: the error
// surfaces and names the cause, nothing is committed, no temp file
// remains, the quota is released; then, with the disk healthy again, the
// next map output on the same engine commits.
func TestFaults(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name string
		inj  errorfs.Injector
		want error
	}{
		{"enospc-on-write", errorfs.OnOp(errorfs.OpWrite, syscall.ENOSPC), syscall.ENOSPC},
		{"short-write-enospc", errorfs.ShortWrite(errorfs.OnOp(errorfs.OpWrite, syscall.ENOSPC)), syscall.ENOSPC},
		{"eio-on-read", errorfs.OnOp(errorfs.OpRead, syscall.EIO), syscall.EIO}, // the merge reads the run files
		{"eio-on-fsync", errorfs.OnOp(errorfs.OpSync, syscall.EIO), syscall.EIO},
		{"eio-on-dir-fsync", errorfs.OnOp(errorfs.OpSyncDir, syscall.EIO), syscall.EIO},
		{"rename-fails", errorfs.OnOp(errorfs.OpRename, syscall.EXDEV), syscall.EXDEV},
		{"create-fails", errorfs.OnOp(errorfs.OpCreate, syscall.EMFILE), syscall.EMFILE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sw := &switchable{on: true, inj: tc.inj}
			fsys := errorfs.New(vfs.Default, sw)
			e := newEngine(t, WithFS(fsys), WithLimit(16<<10), WithRecordSize(2<<10), WithSync(true))
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(5, 5))
			ops := workload(rng, 20, 3, 4000)
			spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: 20, Codec: codec.LZ4, Checksum: checksum.CRC32,
				Layout: shufflefile.Flat(dir)}
			_, err := writeAll(t, e, spec, ops)
			if !errors.Is(err, tc.want) {
				t.Fatalf("write on a disk failing with %v: error %v does not wrap it", tc.want, err)
			}
			if fsys.Injected() == 0 {
				t.Fatal("no fault was injected")
			}
			if _, statErr := os.Stat(shufflefile.Path(spec.Layout, shufflefile.IndexName(spec.ID))); statErr == nil {
				t.Fatal("a failed map output left an index: committed")
			}
			noTemps(t, dir)
			checkQuiet(t, e)

			sw.on = false
			spec.ID.Map = 2
			if _, err := writeAll(t, e, spec, ops); err != nil {
				t.Fatalf("map output after the disk recovered: %v", err)
			}
			checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, 20))
			noTemps(t, dir)
			checkQuiet(t, e)
		})
	}
}

// quota is a Space of a fixed number of bytes.
type quota struct {
	mu   sync.Mutex
	left int64
}

var errNoSpace = errors.New("test: no space left in the quota")

func (q *quota) Grow(n int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n > q.left {
		return fmt.Errorf("%w: %d bytes wanted, %d left", errNoSpace, n, q.left)
	}
	q.left -= n
	return nil
}

// TestSpaceRefusal runs map outputs against a space budget that runs out
// at every point: while runs are written, at the merge, or not at all.
func TestSpaceRefusal(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	ops := workload(rng, 10, 3, 3000)
	{
		e := newEngine(t, WithLimit(16<<10), WithRecordSize(2<<10))
		dir := t.TempDir()
		spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 0}, NumPartitions: 10, Codec: codec.Snappy, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
		spec.Space = &quota{left: 1 << 40}
		res, err := writeAll(t, e, spec, ops)
		if err != nil {
			t.Fatal(err)
		}
		var out int64
		for _, n := range res.Lengths {
			out += n
		}
		needed := 2 * out // the runs, then their merged copy
		for _, budget := range []int64{0, out / 2, out, needed - 1} {
			spec.ID.Map++
			spec.Space = &quota{left: budget}
			_, err := writeAll(t, e, spec, ops)
			if !errors.Is(err, errNoSpace) {
				t.Errorf("budget %d of %d: error %v, want the space refusal", budget, needed, err)
			}
			if _, statErr := os.Stat(shufflefile.Path(spec.Layout, shufflefile.IndexName(spec.ID))); statErr == nil {
				t.Errorf("budget %d: refused map output committed", budget)
			}
			noTemps(t, dir)
			checkQuiet(t, e)
		}
		spec.ID.Map++
		spec.Space = &quota{left: needed}
		if _, err := writeAll(t, e, spec, ops); err != nil {
			t.Errorf("budget of exactly %d bytes: %v", needed, err)
		}
	}
}
