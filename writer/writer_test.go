package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

var allCodecs = []codec.Kind{codec.None, codec.LZ4, codec.Zstd, codec.Snappy}

// op is one Write call of a test workload.
type op struct {
	p    int
	data []byte
}

// payload returns n deterministic, somewhat compressible bytes.
func payload(rng *rand.Rand, n int) []byte {
	words := []string{"lineitem", "quantity", "0.04", "DELIVER IN PERSON", "TRUCK", "furiously", "1995-03-15", "|", "ironic"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(byte('a' + rng.IntN(26)))
	}
	return []byte(b.String()[:n])
}

// expect concatenates each partition's bytes in arrival order.
func expect(ops []op, numPartitions int) [][]byte {
	want := make([][]byte, numPartitions)
	for _, o := range ops {
		want[o.p] = append(want[o.p], o.data...)
	}
	return want
}

// runsOf counts the runs a sequence of writes forms (empty writes don't count).
func runsOf(ops []op) int {
	runs, last := 0, -1
	for _, o := range ops {
		if len(o.data) == 0 {
			continue
		}
		if runs == 0 || o.p < last {
			runs++
		}
		last = o.p
	}
	return runs
}

func newEngine(t testing.TB, opts ...Option) *Engine {
	t.Helper()
	e, err := New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

func writeAll(t testing.TB, e *Engine, spec Spec, ops []op) (Result, error) {
	t.Helper()
	ctx := context.Background()
	w, err := e.Open(ctx, spec)
	if err != nil {
		return Result{}, err
	}
	for _, o := range ops {
		if err := w.Write(ctx, o.p, o.data); err != nil {
			_ = w.Abort()
			return Result{}, err
		}
	}
	return w.Commit(ctx)
}

// readBack opens the committed map output, verifies it and decodes every
// partition.
func readBack(t testing.TB, fsys vfs.FS, spec Spec) [][]byte {
	t.Helper()
	mo, err := shufflefile.Open(fsys, spec.Layout, spec.ID, spec.Checksum)
	if err != nil {
		t.Fatalf("shufflefile.Open: %v", err)
	}
	defer mo.Close()
	if err := mo.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if mo.NumPartitions() != spec.NumPartitions {
		t.Fatalf("NumPartitions() = %d, want %d", mo.NumPartitions(), spec.NumPartitions)
	}
	got := make([][]byte, spec.NumPartitions)
	for p := range got {
		raw, err := mo.ReadPartition(p)
		if err != nil {
			t.Fatalf("ReadPartition(%d): %v", p, err)
		}
		if len(raw) == 0 {
			continue
		}
		if spec.Encryption != nil {
			raw = decrypt(t, spec.Encryption, p, raw)
		}
		got[p], err = codec.Decode(spec.Codec, nil, raw)
		if err != nil {
			t.Fatalf("partition %d: Decode: %v", p, err)
		}
	}
	return got
}

func checkPartitions(t testing.TB, got, want [][]byte) {
	t.Helper()
	for p := range want {
		if !bytes.Equal(got[p], want[p]) {
			t.Fatalf("partition %d: decoded %d bytes, want %d (first difference at %d)", p, len(got[p]), len(want[p]), firstDiff(got[p], want[p]))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// noTemps fails if any temp file remains under dir.
func noTemps(t testing.TB, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, shufflefile.TempSuffix) {
			t.Errorf("temp file left behind: %s", path)
		}
		return nil
	})
}

// checkQuiet checks that the engine holds no quota.
func checkQuiet(t testing.TB, e *Engine) {
	t.Helper()
	if s := e.Limiter().Stats(); s.InFlight != 0 {
		t.Errorf("limiter holds %d bytes after the map output ended, want 0", s.InFlight)
	}
}

// fullRuns builds runs runs of one write per partition, each of size()
// bytes.
func fullRuns(rng *rand.Rand, runs, parts int, size func() int) []op {
	var ops []op
	for range runs {
		for p := range parts {
			ops = append(ops, op{p, payload(rng, size())})
		}
	}
	return ops
}

// fixed returns a size function of n bytes.
func fixed(n int) func() int { return func() int { return n } }

// workload builds writes over numPartitions: some partitions empty, some
// repeated, in runs ascending partition sequences.
func workload(rng *rand.Rand, numPartitions, runs, maxLen int) []op {
	var ops []op
	for r := 0; r < runs; r++ {
		p := 0
		for p < numPartitions {
			if rng.IntN(4) != 0 { // a quarter of the partitions stay empty in this run
				for k := 1 + rng.IntN(2); k > 0; k-- { // repeated ids
					ops = append(ops, op{p, payload(rng, rng.IntN(maxLen+1))})
				}
			}
			p += 1 + rng.IntN(max(1, numPartitions/50))
		}
	}
	return ops
}

func TestRoundTrip(t *testing.T) {
	for _, numPartitions := range []int{1, 200, 10000} {
		for _, runs := range []int{1, 4} {
			for _, k := range allCodecs {
				name := fmt.Sprintf("codec=%v/runs=%d/partitions=%d", k, runs, numPartitions)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					rng := rand.New(rand.NewPCG(uint64(numPartitions), uint64(runs)))
					maxLen := 4000
					if numPartitions == 10000 {
						maxLen = 100
					}
					ops := workload(rng, numPartitions, runs, maxLen)
					if numPartitions == 1 {
						ops = ops[:0]
						for range runs {
							ops = append(ops, op{0, payload(rng, 3000)})
						}
					}
					dir := t.TempDir()
					e := newEngine(t, WithLimit(64<<10), WithWorkers(3), WithRecordSize(4<<10))
					spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: int64(numPartitions)}, NumPartitions: numPartitions,
						Codec: k, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
					res, err := writeAll(t, e, spec, ops)
					if err != nil {
						t.Fatalf("write: %v", err)
					}
					if wantRuns := runsOf(ops); res.Runs != wantRuns {
						t.Errorf("Runs = %d, want %d", res.Runs, wantRuns)
					}
					checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, numPartitions))
					noTemps(t, dir)
					checkQuiet(t, e)
				})
			}
		}
	}
}

// TestRoundTripProperty writes random partition sequences (ids in any
// order, including backwards within what would be a run) with every
// checksum algorithm and compares what decodes.
func TestRoundTripProperty(t *testing.T) {
	algs := []checksum.Algorithm{checksum.None, checksum.Adler32, checksum.CRC32, checksum.CRC32C}
	for seed := range uint64(24) {
		rng := rand.New(rand.NewPCG(seed, 99))
		numPartitions := 1 + rng.IntN(64)
		ops := make([]op, rng.IntN(200))
		for i := range ops {
			ops[i] = op{rng.IntN(numPartitions), payload(rng, rng.IntN(3000))}
		}
		k := allCodecs[rng.IntN(len(allCodecs))]
		alg := algs[rng.IntN(len(algs))]
		dir := t.TempDir()
		e := newEngine(t, WithLimit(int64(1+rng.IntN(32<<10))), WithWorkers(1+rng.IntN(4)), WithRecordSize(1<<10+rng.IntN(4<<10)))
		spec := Spec{ID: shufflefile.ID{Shuffle: 7, Map: int64(seed)}, NumPartitions: numPartitions, Codec: k, Checksum: alg, Layout: shufflefile.Flat(dir)}
		res, err := writeAll(t, e, spec, ops)
		if err != nil {
			t.Fatalf("seed %d: write: %v", seed, err)
		}
		if wantRuns := runsOf(ops); res.Runs != wantRuns {
			t.Errorf("seed %d: Runs = %d, want %d", seed, res.Runs, wantRuns)
		}
		want := expect(ops, numPartitions)
		checkPartitions(t, readBack(t, vfs.Default, spec), want)
		var in int64
		for _, w := range want {
			in += int64(len(w))
		}
		if res.BytesIn != in {
			t.Errorf("seed %d: BytesIn = %d, want %d", seed, res.BytesIn, in)
		}
		noTemps(t, dir)
		checkQuiet(t, e)
	}
}

// TestOversizeRecord writes one record larger than the whole limit: it is
// admitted alone, and the peak exceeds the limit only by that record.
func TestOversizeRecord(t *testing.T) {
	const limit = 8 << 10
	e := newEngine(t, WithLimit(limit), WithRecordSize(64<<10), WithWorkers(2))
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	ops := []op{{0, payload(rng, 100)}, {1, payload(rng, 40<<10)}, {2, payload(rng, 100)}, {1, payload(rng, 3000)}}
	spec := Spec{ID: shufflefile.ID{Shuffle: 2, Map: 3}, NumPartitions: 3, Codec: codec.LZ4, Checksum: checksum.CRC32, Layout: shufflefile.Flat(dir)}
	if _, err := writeAll(t, e, spec, ops); err != nil {
		t.Fatalf("write: %v", err)
	}
	checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, 3))
	s := e.Limiter().Stats()
	if s.Oversize != 1 {
		t.Errorf("Oversize = %d, want 1", s.Oversize)
	}
	if s.Peak != 40<<10 {
		t.Errorf("Peak = %d, want %d (the oversize record alone)", s.Peak, 40<<10)
	}
	checkQuiet(t, e)
}

func TestFirstCommitWins(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	spec := Spec{ID: shufflefile.ID{Shuffle: 4, Map: 4}, NumPartitions: 2, Codec: codec.Zstd, Checksum: checksum.CRC32C, Layout: shufflefile.Flat(dir)}
	first, err := writeAll(t, e, spec, []op{{0, []byte("first attempt")}})
	if err != nil {
		t.Fatal(err)
	}
	second, err := writeAll(t, e, spec, []op{{1, []byte("second attempt, longer")}})
	if err != nil {
		t.Fatal(err)
	}
	if !second.Existing {
		t.Errorf("second commit: Existing = false, want true")
	}
	if fmt.Sprint(second.Lengths) != fmt.Sprint(first.Lengths) {
		t.Errorf("second commit: Lengths = %v, want the first's %v", second.Lengths, first.Lengths)
	}
	checkPartitions(t, readBack(t, vfs.Default, spec), [][]byte{[]byte("first attempt"), nil})
	noTemps(t, dir)
}

func TestEmptyMapOutput(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	spec := Spec{ID: shufflefile.ID{Shuffle: 5, Map: 0}, NumPartitions: 5, Codec: codec.LZ4, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
	res, err := writeAll(t, e, spec, []op{{3, nil}})
	if err != nil {
		t.Fatal(err)
	}
	for p := range 5 {
		if res.Lengths[p] != 0 || res.Checksums[p] != 1 {
			t.Errorf("partition %d: length %d checksum %d, want 0 and 1 (Adler32 of nothing)", p, res.Lengths[p], res.Checksums[p])
		}
	}
	checkPartitions(t, readBack(t, vfs.Default, spec), make([][]byte, 5))
}

func TestSparkHashedLayout(t *testing.T) {
	e := newEngine(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	spec := Spec{ID: shufflefile.ID{Shuffle: 6, Map: 9}, NumPartitions: 3, Codec: codec.Snappy, Checksum: checksum.Adler32,
		Layout: shufflefile.SparkHashed{LocalDirs: dirs, SubDirs: 64}}
	ops := []op{{2, []byte("x")}, {0, []byte("y")}}
	if _, err := writeAll(t, e, spec, ops); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{shufflefile.DataName(spec.ID), shufflefile.IndexName(spec.ID)} {
		if _, err := os.Stat(shufflefile.Path(spec.Layout, name)); err != nil {
			t.Errorf("%s not where the layout puts it: %v", name, err)
		}
	}
	checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, 3))
	noTemps(t, dirs[0])
	noTemps(t, dirs[1])
}

func TestBadInput(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	ctx := context.Background()
	good := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: 4, Codec: codec.LZ4, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
	bad := []struct {
		name   string
		mutate func(*Spec)
		want   string
	}{
		{"negative shuffle", func(s *Spec) { s.ID.Shuffle = -1 }, "shuffle id -1"},
		{"negative map", func(s *Spec) { s.ID.Map = -7 }, "map id -7"},
		{"zero partitions", func(s *Spec) { s.NumPartitions = 0 }, "partitions 0"},
		{"too many partitions", func(s *Spec) { s.NumPartitions = MaxPartitions + 1 }, fmt.Sprint(MaxPartitions + 1)},
		{"unknown codec", func(s *Spec) { s.Codec = 9 }, "codec"},
		{"unknown checksum", func(s *Spec) { s.Checksum = 9 }, "checksum"},
		{"no layout", func(s *Spec) { s.Layout = nil }, "layout"},
	}
	for _, tc := range bad {
		spec := good
		tc.mutate(&spec)
		_, err := e.Open(ctx, spec)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open error = %v, want ErrInvalid naming %q", tc.name, err, tc.want)
		}
	}

	w, err := e.Open(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{-1, 4, 1 << 30} {
		err := w.Write(ctx, p, []byte("x"))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("partition %d", p)) {
			t.Errorf("Write(%d) error = %v, want ErrInvalid naming partition %d", p, err, p)
		}
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if err := w.Write(ctx, 0, []byte("x")); !errors.Is(err, ErrAborted) {
		t.Errorf("Write after Abort = %v, want ErrAborted", err)
	}
	if _, err := w.Commit(ctx); !errors.Is(err, ErrAborted) {
		t.Errorf("Commit after Abort = %v, want ErrAborted", err)
	}
	if err := w.Abort(); err != nil {
		t.Errorf("second Abort = %v, want nil", err)
	}

	w, err = e.Open(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, 1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, 0, []byte("x")); !errors.Is(err, ErrCommitted) {
		t.Errorf("Write after Commit = %v, want ErrCommitted", err)
	}
	if err := w.Abort(); !errors.Is(err, ErrCommitted) {
		t.Errorf("Abort after Commit = %v, want ErrCommitted", err)
	}
	noTemps(t, dir)
	checkQuiet(t, e)
}

// TestAbortRemovesEverything aborts map outputs with several runs in flight.
func TestAbortRemovesEverything(t *testing.T) {
	// 16 KiB: every run in a file; 1 MiB: later runs in memory.
	for _, limit := range []int64{16 << 10, 1 << 20} {
		e := newEngine(t, WithLimit(limit), WithRecordSize(2<<10))
		dir := t.TempDir()
		ctx := context.Background()
		spec := Spec{ID: shufflefile.ID{Shuffle: 8, Map: 8}, NumPartitions: 50, Codec: codec.LZ4, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
		w, err := e.Open(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(8, 8))
		for _, o := range workload(rng, 50, 3, 5000) {
			if err := w.Write(ctx, o.p, o.data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("limit %d: %d files left after Abort, want 0", limit, len(ents))
		}
		checkQuiet(t, e)
	}
}

// TestAbortUnblocksWrite aborts from another goroutine while Write waits for
// quota held by another map output.
func TestAbortUnblocksWrite(t *testing.T) {
	e := newEngine(t, WithLimit(4<<10), WithRecordSize(4<<10))
	ctx := context.Background()
	if err := e.Limiter().Acquire(ctx, 4<<10); err != nil { // someone else holds everything
		t.Fatal(err)
	}
	spec := Spec{ID: shufflefile.ID{Shuffle: 9, Map: 9}, NumPartitions: 2, Codec: codec.LZ4, Layout: shufflefile.Flat(t.TempDir())}
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- w.Write(ctx, 0, make([]byte, 1000)) }()
	for e.Limiter().Stats().Waiting == 0 {
		runtime.Gosched()
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrAborted) {
		t.Errorf("blocked Write returned %v, want ErrAborted", err)
	}
	e.Limiter().Release(4 << 10)
	checkQuiet(t, e)
}

// TestCancelWrite cancels the caller's context while Write waits for quota.
func TestCancelWrite(t *testing.T) {
	e := newEngine(t, WithLimit(4<<10), WithRecordSize(4<<10))
	if err := e.Limiter().Acquire(context.Background(), 4<<10); err != nil {
		t.Fatal(err)
	}
	spec := Spec{ID: shufflefile.ID{Shuffle: 9, Map: 10}, NumPartitions: 2, Codec: codec.Zstd, Layout: shufflefile.Flat(t.TempDir())}
	w, err := e.Open(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := w.Write(ctx, 0, make([]byte, 1000)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Write = %v, want DeadlineExceeded", err)
	}
	e.Limiter().Release(4 << 10)
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	checkQuiet(t, e)
}

// TestDirMode checks that a directory the writer makes for the files lets
// in whoever may read them, whatever the umask.
func TestDirMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, mode := range []os.FileMode{0o640, 0o644} {
		e := newEngine(t, WithFileMode(mode))
		root := t.TempDir()
		spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: 1, Codec: codec.None,
			Layout: shufflefile.SparkHashed{LocalDirs: []string{root}, SubDirs: 64}}
		if _, err := writeAll(t, e, spec, []op{{0, []byte("x")}}); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(shufflefile.Path(spec.Layout, shufflefile.DataName(spec.ID)))
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := shufflefile.DirMode(mode)
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("file mode %#o: sub-directory mode %#o, want %#o", mode, got, want)
		}
	}
}

// TestTooManyRuns refuses a map output whose partition ids go backwards
// more than MaxRuns times, and releases everything.
func TestTooManyRuns(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	ctx := context.Background()
	w, err := e.Open(ctx, Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: 2, Codec: codec.None, Layout: shufflefile.Flat(dir)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxRuns {
		if err := w.Write(ctx, 1, []byte("a")); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		if err := w.Write(ctx, 0, []byte("b")); err != nil && i < MaxRuns-1 {
			t.Fatalf("run %d: %v", i+2, err)
		} else if i == MaxRuns-1 && !errors.Is(err, ErrTooManyRuns) {
			t.Fatalf("run %d: %v, want ErrTooManyRuns", MaxRuns+1, err)
		}
	}
	if _, err := w.Commit(ctx); !errors.Is(err, ErrTooManyRuns) {
		t.Errorf("Commit after too many runs = %v, want ErrTooManyRuns", err)
	}
	noTemps(t, dir)
	checkQuiet(t, e)
}

// TestRunsInMemory checks where a map output's runs go: later runs stay in
// memory while the engine's budget allows (the merge then takes them from
// there), a map output larger than its share spills them to run files,
// and either way the data reads back whole and the limiter holds nothing
// once the map output is committed.
func TestRunsInMemory(t *testing.T) {
	for _, c := range []struct {
		name    string
		limit   int64
		maxLen  int
		inMem   func(memoryRuns, runs int) bool
		explain string
	}{
		// The first run's bytes before the second started stay in its
		// file: it may have none in memory.
		{"fits", 8 << 20, 3000, func(m, r int) bool { return m >= r-1 }, "every run after the first"},
		{"spills", 1 << 20, 30000, func(m, r int) bool { return m < r-1 }, "fewer than every run after the first"},
		{"no budget", 48 << 10, 3000, func(m, r int) bool { return m == 0 }, "no run"}, // under 16 records
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, WithLimit(c.limit), WithRecordSize(4<<10), WithWorkers(2))
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(21, 5))
			const parts = 40
			ops := workload(rng, parts, 4, c.maxLen)
			spec := Spec{ID: shufflefile.ID{Shuffle: 5, Map: 1}, NumPartitions: parts, Codec: codec.None, Checksum: checksum.CRC32C, Layout: shufflefile.Flat(dir)}
			res, err := writeAll(t, e, spec, ops)
			if err != nil {
				t.Fatal(err)
			}
			if res.Runs < 2 || !c.inMem(res.MemoryRuns, res.Runs) {
				t.Errorf("limit %d: %d of %d runs merged from memory, want %s", c.limit, res.MemoryRuns, res.Runs, c.explain)
			}
			checkMerged(t, e, spec, dir, ops)
		})
	}
}

// checkMerged checks a committed map output of several runs: it reads back
// as ops wrote it, no temp file remains in dir, and the engine holds no
// quota and nothing of its memory budget.
func checkMerged(t *testing.T, e *Engine, spec Spec, dir string, ops []op) {
	t.Helper()
	checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, spec.NumPartitions))
	noTemps(t, dir)
	checkQuiet(t, e)
	if used := e.memory.used.Load(); used != 0 {
		t.Errorf("memory budget holds %d bytes after the commit, want 0", used)
	}
}

// TestLastRunSpills merges small runs held in memory with a last run that
// outgrows the map output's share of the budget while it is written
// (often after Commit has begun to merge it): a run goes to its run file
// and the merge takes the rest of it from there.
func TestLastRunSpills(t *testing.T) {
	for i := range 5 {
		e := newEngine(t, WithLimit(8<<20), WithRecordSize(4<<10), WithWorkers(1))
		dir := t.TempDir()
		rng := rand.New(rand.NewPCG(31, uint64(i)))
		const parts = 40
		ops := fullRuns(rng, 3, parts, fixed(100))
		for p := range parts {
			ops = append(ops, op{p, payload(rng, 40<<10)})
		}
		spec := Spec{ID: shufflefile.ID{Shuffle: 6, Map: int64(i)}, NumPartitions: parts, Codec: codec.None, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
		res, err := writeAll(t, e, spec, ops)
		if err != nil {
			t.Fatal(err)
		}
		// The last run spills, or, when the workers take the last run's
		// early partitions before the first run's late ones, the first run
		// drops its copy.
		if res.Runs != 4 || res.MemoryRuns < 2 || res.MemoryRuns > 3 {
			t.Errorf("%d runs, %d merged from memory, want 4 with one spilled", res.Runs, res.MemoryRuns)
		}
		checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, parts))
		noTemps(t, dir)
		checkQuiet(t, e)
	}
}

// TestFirstRunPrefix merges a first run whose bytes are partly in its file
// and partly in memory: it streamed to its file (its batch was marked as
// the last) until the second run started and keeps the rest in memory, or
// spills it. Its file part ends after the
// whole run, after some of it (anywhere, also inside a partition of
// several records), or at nothing; it holds pieces of a partition large
// enough to be copied file to file and small ones read back through the
// merge's buffer. The data reads back whole whichever way the runs are
// merged (while written, or after they end).
func TestFirstRunPrefix(t *testing.T) {
	const parts = 30
	for _, c := range []struct {
		name  string
		wait  int // partitions of the first run written to its file before the rest of it is written
		limit int64
		key   *iocrypt.Key
	}{
		{"all in the file", parts, 64 << 20, nil},
		{"part in the file", parts / 2, 64 << 20, nil},
		{"nothing waited for", 0, 64 << 20, nil},
		{"part in the file, then spills", parts / 2, 2 << 20, nil}, // an eighth: 256 KiB per map output
		{"encrypted, part in the file", parts / 2, 64 << 20, testKey},
		{"encrypted, part in the file, then spills", parts / 2, 2 << 20, testKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range 3 {
				e := newEngine(t, WithLimit(c.limit), WithRecordSize(4<<10), WithWorkers(2))
				dir := t.TempDir()
				spec, ops, res, err := writeFirstRunPrefix(t, e, dir, parts, c.wait, uint64(i), c.key)
				if err != nil {
					t.Fatal(err)
				}
				if res.Runs != 3 {
					t.Errorf("%d runs, want 3", res.Runs)
				}
				checkMerged(t, e, spec, dir, ops)
			}
		})
	}
}

// TestFirstRunPrefixFaults fails the merge's reads of the first run's file
// prefix (through its buffer, and file to file for large pieces): the
// commit fails with the cause, nothing is committed, no temp file remains
// and nothing is held.
func TestFirstRunPrefixFaults(t *testing.T) {
	const parts = 30
	for _, op := range []errorfs.OpKind{errorfs.OpRead, errorfs.OpCopyRange} {
		t.Run(fmt.Sprint(op), func(t *testing.T) {
			e := newEngine(t, WithFS(errorfs.New(vfs.Default, errorfs.OnOp(op, syscall.EIO))), WithLimit(64<<20), WithRecordSize(4<<10), WithWorkers(2))
			dir := t.TempDir()
			spec, _, _, err := writeFirstRunPrefix(t, e, dir, parts, parts, 1, nil)
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("commit = %v, want EIO", err)
			}
			if _, err := os.Stat(shufflefile.Path(spec.Layout, shufflefile.IndexName(spec.ID))); !os.IsNotExist(err) {
				t.Errorf("index file after a failed commit: %v", err)
			}
			noTemps(t, dir)
			checkQuiet(t, e)
		})
	}
}

// writeFirstRunPrefix writes three runs of parts partitions and commits
// them: the first run's first wait partitions are put (in its file) before
// the rest of its records are written, partition wait-1 being one record,
// and every seventh partition of it over prefixCopyBytes.
func writeFirstRunPrefix(t *testing.T, e *Engine, dir string, parts, wait int, seed uint64, key *iocrypt.Key) (Spec, []op, Result, error) {
	t.Helper()
	rng := rand.New(rand.NewPCG(51, seed))
	var ops []op
	for p := range parts {
		n := 1 + rng.IntN(9000) // up to three records
		switch {
		case p == wait-1:
			n = 100 // one record: once it is put, so is every earlier one
		case p%7 == 3:
			n = 1 << 20 // a piece over prefixCopyBytes, compressed
		}
		ops = append(ops, op{p, payload(rng, n)})
	}
	ops = append(ops, fullRuns(rng, 2, parts, func() int { return 1 + rng.IntN(2000) })...)
	spec := Spec{ID: shufflefile.ID{Shuffle: 8, Map: int64(seed)}, NumPartitions: parts, Codec: codec.LZ4, Checksum: checksum.CRC32, Layout: shufflefile.Flat(dir), Encryption: key}
	ctx := context.Background()
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// Marked as the last batch at its first record, the first run streams
	// to its file, as a client's only batch does; the runs that follow all
	// the same (the mark was wrong) leave it a prefix there.
	w.MarkLast()
	write := func(ops []op) {
		for _, o := range ops {
			if err := w.Write(ctx, o.p, o.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(ops[:wait])
	if wait > 0 { // until the first run has put its records
		ru := w.streams[0].sink.(*run)
		for {
			ru.mu.Lock()
			done := ru.progress == wait-1 && ru.lengths[wait-1] > 0
			ru.mu.Unlock()
			if done {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	write(ops[wait:])
	res, err := w.Commit(ctx)
	return spec, ops, res, err
}

// TestMapOutputsGoOneAfterAnother checks that, with no turns due, the
// workers encode the map output queued first before the next one: both are
// queued while the one worker is held in a third map output's sink, and
// then the order in which their records reach their sinks (one worker
// puts each record as it is encoded) is the order they were encoded in.
//
// It used to count the second map output's records still queued when the
// first one's Commit returned: under load the worker went on with the
// second one's records while the test's goroutine waited to run again
// after the first's last record (or before the queue filled at all), and
// the count fell below the bound although the order was right.
func TestMapOutputsGoOneAfterAnother(t *testing.T) {
	e := newEngine(t, WithLimit(256<<20), WithWorkers(1))
	e.jobs.mu.Lock()
	e.jobs.clock = func() int64 { return 1 }
	e.jobs.mu.Unlock()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(43, 1))
	const n = 100
	data := make([][]byte, 2*n)
	for i := range data {
		data[i] = payload(rng, 64<<10) // a pop each
	}
	var (
		mu    sync.Mutex
		order []int64 // map ids, as their sinks got records
	)
	held, gate := make(chan struct{}), make(chan struct{})
	open := func(m int64) *MapWriter {
		var once sync.Once
		w, err := e.Open(ctx, Spec{ID: shufflefile.ID{Shuffle: 8, Map: m}, NumPartitions: n, Codec: codec.LZ4, Layout: shufflefile.Flat(t.TempDir()),
			Sink: func(SinkSpec) (Sink, error) {
				return &funcSink{write: func(int, []byte, uint32) error {
					if m == 0 {
						once.Do(func() {
							close(held)
							<-gate
						})
					}
					mu.Lock()
					order = append(order, m)
					mu.Unlock()
					return nil
				}}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	write := func(w *MapWriter, d [][]byte) {
		for p := range d {
			if err := w.Write(ctx, p, d[p]); err != nil {
				t.Fatal(err)
			}
		}
	}
	blocker := open(0)
	write(blocker, data[:1])
	<-held // the one worker waits in the blocker's sink
	a, b := open(1), open(2)
	write(a, data[:n])
	write(b, data[n:])
	close(gate)
	for _, w := range []*MapWriter{blocker, a, b} {
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	lastA, beforeA := -1, 0
	for i, m := range order {
		if m == 1 {
			lastA = i
		}
	}
	for _, m := range order[:lastA+1] {
		if m == 2 {
			beforeA++
		}
	}
	if len(order) != 2*n+1 || beforeA > 0 {
		t.Errorf("records reached their sinks in the order %v: want the blocker's, then the %d of map output 1, then the %d of map output 2 (%d of 2 came before 1's last)", order, n, n, beforeA)
	}
	checkQuiet(t, e)
}

// funcSink is a Sink whose Write is a function and that assembles no
// file.
type funcSink struct {
	write func(p int, b []byte, sum uint32) error
}

func (s *funcSink) Write(p int, b []byte, sum uint32) error { return s.write(p, b, sum) }
func (s *funcSink) Close(bool) error                        { return nil }
func (s *funcSink) Assemble(context.Context) (string, []int64, []uint32, error) {
	return "", nil, nil, nil
}
func (s *funcSink) Remove() {}

// TestMapOutputsTakeTurns checks that a map output with a long queue of
// records does not hold back another one: it has a turn once it has
// waited turnWait, so a small map output commits while most of a large
// one's queued records still wait (in arrival order it would wait for
// them all).
func TestMapOutputsTakeTurns(t *testing.T) {
	e := newEngine(t, WithLimit(256<<20), WithWorkers(1))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(41, 1))
	const big = 400
	data := make([][]byte, big)
	for p := range data {
		data[p] = payload(rng, 64<<10)
	}
	a, err := e.Open(ctx, Spec{ID: shufflefile.ID{Shuffle: 7, Map: 1}, NumPartitions: big, Codec: codec.LZ4, Layout: shufflefile.Flat(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	for p := range big {
		if err := a.Write(ctx, p, data[p]); err != nil {
			t.Fatal(err)
		}
	}
	queued := func() int {
		e.jobs.mu.Lock()
		defer e.jobs.mu.Unlock()
		e.jobs.takeInbox() // what is pushed counts as queued
		return len(a.jobs)
	}
	b, err := e.Open(ctx, Spec{ID: shufflefile.ID{Shuffle: 7, Map: 2}, NumPartitions: 1, Codec: codec.LZ4, Layout: shufflefile.Flat(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	before := queued()
	if err := b.Write(ctx, 0, payload(rng, 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if after := queued(); before < 50 || before-after > before/2 {
		t.Errorf("the large map output had %d records queued when the small one wrote and %d when it had committed: want at least 50, and fewer than half of them taken first", before, after)
	}
	if _, err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkQuiet(t, e)
}

// TestFirstRunWhere checks where a map output's first run goes, by the
// temp files of its data file that the writer creates: kept in memory
// with the runs after it (the merge's temp file only) unless its batch is
// marked as the last at its first record (its own file, which becomes the
// data file), or the marked batch continues it (it goes to its file
// then); a single run never marked is written to its file at Commit. The
// data reads back whole every time, plain and encrypted.
func TestFirstRunWhere(t *testing.T) {
	const parts = 20
	type shape struct {
		runs    int
		mark    func(ops []op) int // the op MarkLast precedes, -1 for none
		creates int
		merged  bool // the commit wrote the data file (MergeTail may be above 0)
	}
	for _, c := range []struct {
		name string
		shape
	}{
		{"two runs, the last marked", shape{2, lastRunStart, 1, true}},
		{"two runs, none marked", shape{2, func([]op) int { return -1 }, 1, true}},
		{"one run, marked at its start", shape{1, func([]op) int { return 0 }, 1, false}},
		{"one run, marked in its middle", shape{1, func(ops []op) int { return len(ops) / 2 }, 1, false}},
		{"one run, none marked", shape{1, func([]op) int { return -1 }, 1, true}},
	} {
		for _, key := range []*iocrypt.Key{nil, testKey} {
			name := c.name
			if key != nil {
				name += ", encrypted"
			}
			t.Run(name, func(t *testing.T) {
				spec := Spec{ID: shufflefile.ID{Shuffle: 9, Map: 1}, NumPartitions: parts, Codec: codec.LZ4, Checksum: checksum.CRC32, Encryption: key}
				var creates atomic.Int64
				count := errorfs.InjectorFunc(func(op errorfs.Op) error {
					if name := filepath.Base(op.Path); op.Kind == errorfs.OpCreate && shufflefile.IsTempName(name) &&
						strings.HasPrefix(name, shufflefile.DataName(spec.ID)+".") {
						creates.Add(1)
					}
					return nil
				})
				e := newEngine(t, WithFS(errorfs.New(vfs.Default, count)), WithLimit(64<<20), WithRecordSize(4<<10), WithWorkers(2))
				dir := t.TempDir()
				spec.Layout = shufflefile.Flat(dir)
				rng := rand.New(rand.NewPCG(61, uint64(c.runs)))
				ops := fullRuns(rng, c.runs, parts, func() int { return 1 + rng.IntN(6000) })
				w, err := writeMarked(e, spec, ops, c.mark(ops))
				if err != nil {
					t.Fatal(err)
				}
				res, err := w.Commit(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if res.Runs != c.runs {
					t.Fatalf("%d runs, want %d", res.Runs, c.runs)
				}
				if n := creates.Load(); n != int64(c.creates) {
					t.Errorf("%d temp files of the data file created, want %d", n, c.creates)
				}
				if c.runs == 2 && res.MemoryRuns != 2 {
					t.Errorf("%d runs merged from memory, want both", res.MemoryRuns)
				}
				if !c.merged && res.MergeTail != 0 {
					t.Errorf("MergeTail %v for a run streamed to its file, want 0", res.MergeTail)
				}
				checkMerged(t, e, spec, dir, ops)
			})
		}
	}
}
