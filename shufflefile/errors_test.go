package shufflefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// sweepScenario is a commit to fail at every operation in turn.
type sweepScenario struct {
	name   string
	layout string // "flat" or "hashed"
	alg    checksum.Algorithm
	sync   bool
	mode   fs.FileMode
	short  bool // fail writes as short writes
	// before commits an earlier output of the id (nil: none), with
	// algorithm beforeAlg.
	before    attemptData
	beforeAlg checksum.Algorithm
}

var sweepScenarios = []sweepScenario{
	{name: "fresh", layout: "flat", alg: checksum.Adler32, sync: true},
	{name: "fresh hashed 0640", layout: "hashed", alg: checksum.CRC32C, sync: true, mode: 0o640},
	{name: "fresh no checksum no sync", layout: "flat", alg: checksum.None},
	{name: "fresh short writes", layout: "hashed", alg: checksum.CRC32, sync: true, short: true},
	{name: "existing", layout: "hashed", alg: checksum.Adler32, sync: true,
		before: parts("committed", "", "first", "!"), beforeAlg: checksum.Adler32},
	{name: "existing without checksum file", layout: "flat", alg: checksum.Adler32, sync: true,
		before: parts("committed", "", "first", "!"), beforeAlg: checksum.None},
}

// TestCommitErrorSweep fails operation i of Commit.Do for i = 0, 1, ...
// until a run injects nothing. Every failure must surface as an error and
// leave no temp file; with no earlier output nothing is committed (not
// even after the commit point: a failed directory sync undoes the
// commit), and an earlier output stays as it was. The last run commits.
func TestCommitErrorSweep(t *testing.T) {
	attempt := parts("new attempt", "", "bytes", "")
	id := ID{Shuffle: 11, Map: 12}
	for _, sc := range sweepScenarios {
		t.Run(sc.name, func(t *testing.T) {
			for i := int64(0); ; i++ {
				root := t.TempDir()
				l := layouts(root)[sc.layout]
				if sc.before != nil {
					mustCommit(t, l, id, sc.beforeAlg, sc.before)
				}
				var inj errorfs.Injector = errorfs.OnIndex(i)
				if sc.short {
					inj = errorfs.ShortWrite(inj)
				}
				fsys := errorfs.New(vfs.Default, inj)
				c := newCommit(t, fsys, l, id, sc.alg, attempt)
				c.Sync, c.FileMode = sc.sync, sc.mode
				lengths, sums, existing, err := c.Do()
				if ts := temps(t, root); len(ts) != 0 {
					t.Fatalf("OnIndex(%d): temp files left: %v (Do() = %v)", i, ts, err)
				}
				want, wantExisting := attempt, false
				if sc.before != nil {
					want, wantExisting = sc.before, true
				}
				if fsys.Injected() == 0 {
					if err != nil || existing != wantExisting {
						t.Fatalf("OnIndex(%d), nothing injected: Do() = existing %v, %v, want existing %v, nil", i, existing, err, wantExisting)
					}
					if !slices.Equal(lengths, want.lengths()) || !slices.Equal(sums, want.sums(sc.alg)) {
						t.Errorf("Do() = %v, %x, want %v, %x", lengths, sums, want.lengths(), want.sums(sc.alg))
					}
					checkOutput(t, l, id, sc.alg, want)
					t.Logf("%d operations, each failed once", i)
					return
				}
				if !errors.Is(err, errorfs.ErrInjected) {
					t.Fatalf("OnIndex(%d): Do() = %v, want an injected error", i, err)
				}
				if sc.before == nil {
					if f := files(t, root); len(f) != 0 {
						t.Fatalf("OnIndex(%d) failed Do() with %v and left files %v, want none", i, err, f)
					}
					continue
				}
				checkOutput(t, l, id, sc.beforeAlg, sc.before)
				if sc.beforeAlg != sc.alg {
					// The rebuilt checksum file is there or not, never torn.
					if m, err := Open(vfs.Default, l, id, sc.alg); err == nil {
						if err := m.Verify(); err != nil {
							t.Errorf("OnIndex(%d): rebuilt checksum file: Verify() = %v", i, err)
						}
						m.Close()
					} else if !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("OnIndex(%d): Open with the rebuilt checksum = %v, want ok or not exist", i, err)
					}
				}
			}
		})
	}
}

// crash is the panic value that stands for a crash of the process.
type crash struct{ op errorfs.Op }

// TestCommitCrash stops Commit.Do dead at operation i, for i = 0, 1, ...:
// no clean-up runs, as in a crash of the process. What is on disk must be
// either no committed output or the attempt's complete output, and, after
// Sweep, no temp file; then a new attempt commits, or finds the output
// committed.
func TestCommitCrash(t *testing.T) {
	id := ID{Shuffle: 13, Map: 14}
	attempt := parts("ab", "cdefgh")
	retry := parts("retry", "bytes!")
	for _, layout := range []string{"flat", "hashed"} {
		t.Run(layout, func(t *testing.T) {
			for i := int64(0); ; i++ {
				root := t.TempDir()
				l := layouts(root)[layout]
				// A stale index whose last offset equals the attempt's
				// length but with other partitions, over a data file that
				// disagrees with it: not committed, and dangerous if it
				// survived the data rename.
				stale, _ := AppendIndex(nil, []int64{4, 4})
				for name, b := range map[string][]byte{IndexName(id): stale, DataName(id): []byte("old")} {
					p := Path(l, name)
					if err := os.MkdirAll(dirOf(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				fsys := errorfs.New(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
					if op.Index == i {
						panic(crash{op})
					}
					return nil
				}))
				c := newCommit(t, fsys, l, id, checksum.CRC32, attempt)
				c.Sync = true
				crashedAt, err := func() (at string, err error) {
					defer func() {
						if r := recover(); r != nil {
							cr, ok := r.(crash)
							if !ok {
								panic(r)
							}
							at = cr.op.String()
						}
					}()
					_, _, _, err = c.Do()
					return "", err
				}()
				if crashedAt == "" {
					if err != nil {
						t.Fatalf("Do() with no crash = %v", err)
					}
					checkOutput(t, l, id, checksum.CRC32, attempt)
					t.Logf("crashed at each of %d operations", i)
					return
				}
				committed := false
				if m, err := Open(vfs.Default, l, id, checksum.CRC32); err == nil {
					committed = true
					m.Close()
					checkOutput(t, l, id, checksum.CRC32, attempt)
				} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("crash at %s: Open() = %v", crashedAt, err)
				}
				if _, err := sweepLayout(l); err != nil {
					t.Fatalf("crash at %s: Sweep() = %v", crashedAt, err)
				}
				if ts := temps(t, root); len(ts) != 0 {
					t.Fatalf("crash at %s: temp files after Sweep: %v", crashedAt, ts)
				}
				r := newCommit(t, vfs.Default, l, id, checksum.CRC32, retry)
				_, _, existing, err := r.Do()
				if err != nil || existing != committed {
					t.Fatalf("crash at %s (committed %v): retry Do() = existing %v, %v", crashedAt, committed, existing, err)
				}
				if committed {
					checkOutput(t, l, id, checksum.CRC32, attempt)
				} else {
					checkOutput(t, l, id, checksum.CRC32, retry)
				}
			}
		})
	}
}

func dirOf(p string) string {
	d, _ := splitDir(p)
	return d
}

func splitDir(p string) (string, string) {
	for i := len(p) - 1; i >= 0; i-- {
		if os.IsPathSeparator(p[i]) {
			return p[:i], p[i+1:]
		}
	}
	return ".", p
}

// sweepLayout sweeps every root directory of l.
func sweepLayout(l Layout) (int, error) {
	var roots []string
	switch l := l.(type) {
	case Flat:
		roots = []string{string(l)}
	case SparkHashed:
		roots = l.LocalDirs
	default:
		return 0, fmt.Errorf("unknown layout %T", l)
	}
	total := 0
	for _, r := range roots {
		n, err := Sweep(vfs.Default, r)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no file hashed into this local dir
		}
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// TestRemoveIndexFailure: when the index cannot be removed, Remove stops
// and the output stays committed and whole.
func TestRemoveIndexFailure(t *testing.T) {
	l := Flat(t.TempDir())
	id := ID{15, 15}
	a := parts("abc", "")
	mustCommit(t, l, id, checksum.Adler32, a)
	fsys := errorfs.New(vfs.Default, errorfs.OnIndex(0))
	if err := Remove(fsys, &testLocks, l, id, checksum.Adler32); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("Remove with the index removal failed = %v, want ErrInjected", err)
	}
	if fsys.Ops() != 1 {
		t.Errorf("Remove went on after failing to remove the index: %d operations, want 1", fsys.Ops())
	}
	checkOutput(t, l, id, checksum.Adler32, a)
}
