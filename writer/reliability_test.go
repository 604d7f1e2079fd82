package writer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// armedNth fails the n-th operation of the given kinds while armed, so that
// one engine sees one failure and then a healthy disk.
type armedNth struct {
	kinds []errorfs.OpKind
	err   error
	short bool // a failing write or copy writes half its bytes first
	armed atomic.Bool
	n     atomic.Int64
	seen  atomic.Int64
}

func (a *armedNth) arm(n int64) { a.n.Store(n); a.seen.Store(0); a.armed.Store(true) }

func (a *armedNth) MaybeError(op errorfs.Op) error {
	if !a.armed.Load() || !slices.Contains(a.kinds, op.Kind) {
		return nil
	}
	if a.seen.Add(1)-1 != a.n.Load() {
		return nil
	}
	if a.short {
		return errorfs.ShortWrite(errorfs.InjectorFunc(func(errorfs.Op) error { return a.err })).MaybeError(op)
	}
	return a.err
}

// everyOpButRemove is every counted operation except Remove: cleanup
// removes are best effort (a temp file they leave is what the startup
// sweep is for), so failing them is not a failure of the map output.
var everyOpButRemove = []errorfs.OpKind{
	errorfs.OpCreate, errorfs.OpOpen, errorfs.OpRead, errorfs.OpWrite, errorfs.OpSync, errorfs.OpClose,
	errorfs.OpStat, errorfs.OpRename, errorfs.OpLink, errorfs.OpMkdirAll, errorfs.OpReadDir,
	errorfs.OpSyncDir, errorfs.OpChmod, errorfs.OpCopyRange,
}

// TestSweepThenRetry complements TestErrorSweep: for each failure class of
// a sick disk it fails the i-th operation of that class, for i = 0, 1, 2,
// … until a map output passes untouched, all on one engine and one
// directory, and after each failure checks that
//
//   - the error surfaces and wraps the injected cause;
//   - nothing of the failed map output is committed (no index) and no
//     temp file remains;
//   - the limiter holds no quota;
//   - a map output committed before the sweep still reads back whole;
//   - the next map output, a retry under the same id on the now healthy
//     disk, commits and reads back exactly what was written.
func TestSweepThenRetry(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name  string
		limit int64
		kinds []errorfs.OpKind
		err   error
		short bool
	}{
		// files: an 8 KiB limit keeps every run in a file; memory: 1 MiB
		// lets later runs stay in memory until the merge.
		{"files/any-op", 8 << 10, everyOpButRemove, errorfs.ErrInjected, false},
		{"memory/any-op", 1 << 20, everyOpButRemove, errorfs.ErrInjected, false},
		{"files/write-enospc-short", 8 << 10, []errorfs.OpKind{errorfs.OpWrite, errorfs.OpCopyRange}, syscall.ENOSPC, true},
		{"memory/write-enospc-short", 1 << 20, []errorfs.OpKind{errorfs.OpWrite, errorfs.OpCopyRange}, syscall.ENOSPC, true},
		{"files/fsync-eio", 8 << 10, []errorfs.OpKind{errorfs.OpSync, errorfs.OpSyncDir}, syscall.EIO, false},
		{"files/rename-exdev", 8 << 10, []errorfs.OpKind{errorfs.OpRename, errorfs.OpLink}, syscall.EXDEV, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inj := &armedNth{kinds: tc.kinds, err: tc.err, short: tc.short}
			fsys := errorfs.New(vfs.Default, inj)
			// Fsyncs are slow; only the cases that may fail them need them.
			sync := slices.Contains(tc.kinds, errorfs.OpSync)
			e := newEngine(t, WithFS(fsys), WithLimit(tc.limit), WithRecordSize(2<<10), WithWorkers(2), WithSync(sync))
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(17, 3))
			const parts = 8
			ops := workload(rng, parts, 3, 1500)
			want := expect(ops, parts)
			spec := func(m int64) Spec {
				return Spec{ID: shufflefile.ID{Shuffle: 2, Map: m}, NumPartitions: parts, Codec: codec.LZ4, Checksum: checksum.CRC32C,
					Layout: shufflefile.Flat(dir)}
			}
			anchor := spec(0)
			if _, err := writeAll(t, e, anchor, ops); err != nil {
				t.Fatalf("map output before the sweep: %v", err)
			}

			for i := int64(0); ; i++ {
				if i > 5000 {
					t.Fatal("sweep did not converge")
				}
				s := spec(1 + i)
				before := fsys.Injected()
				inj.arm(i)
				_, err := writeAll(t, e, s, ops)
				inj.armed.Store(false)
				injected := fsys.Injected() - before
				checkQuiet(t, e)
				noTemps(t, dir)
				if injected == 0 {
					if err != nil {
						t.Fatalf("%v #%d: nothing injected, but the map output failed: %v", tc.kinds, i, err)
					}
					checkPartitions(t, readBack(t, vfs.Default, s), want)
					t.Logf("%d failure points swept, each followed by a retry that committed", i)
					return
				}
				where := fmt.Sprintf("%s failure #%d", tc.name, i)
				if err == nil {
					t.Fatalf("%s: the map output committed without error", where)
				}
				if !errors.Is(err, tc.err) {
					t.Fatalf("%s: error %v does not wrap the injected %v", where, err, tc.err)
				}
				if _, statErr := os.Stat(shufflefile.Path(s.Layout, shufflefile.IndexName(s.ID))); statErr == nil {
					t.Fatalf("%s: the failed map output left an index (error %v)", where, err)
				}
				checkPartitions(t, readBack(t, vfs.Default, anchor), want)

				res, err := writeAll(t, e, s, ops)
				if err != nil {
					t.Fatalf("%s: retry of map output %v on a healthy disk: %v", where, s.ID, err)
				}
				if res.Existing {
					t.Fatalf("%s: retry found a committed output, but the failed attempt left no index", where)
				}
				checkPartitions(t, readBack(t, vfs.Default, s), want)
				checkQuiet(t, e)
				noTemps(t, dir)
			}
		})
	}
}
