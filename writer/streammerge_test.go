package writer

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// grows is a Space that records every Grow.
type grows struct {
	mu sync.Mutex
	n  []int64
}

func (g *grows) Grow(n int64) error {
	g.mu.Lock()
	g.n = append(g.n, n)
	g.mu.Unlock()
	return nil
}

// TestStreamMergeWritesInBatches writes map outputs of many small
// partitions, held in memory, and checks that the streaming merge writes
// the data file in pieces of wakeBytes at least (the last piece aside),
// whether it runs behind the runs or keeps up with them: never a partition
// at a time.
func TestStreamMergeWritesInBatches(t *testing.T) {
	dir := t.TempDir()
	e := newEngine(t)
	rng := rand.New(rand.NewPCG(7, 7))
	for i, runs := range []int{1, 4} {
		const parts = 2000
		var ops []op
		for range runs {
			for p := range parts {
				ops = append(ops, op{p, payload(rng, 3000/runs)})
			}
		}
		g := &grows{}
		spec := Spec{ID: shufflefile.ID{Shuffle: 9, Map: int64(i)}, NumPartitions: parts, Codec: codec.None, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir), Space: g}
		res, err := writeAll(t, e, spec, ops)
		if err != nil {
			t.Fatalf("runs %d: %v", runs, err)
		}
		if runs > 1 && res.MemoryRuns != runs {
			t.Fatalf("runs %d: MemoryRuns = %d, want %d", runs, res.MemoryRuns, runs)
		}
		checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, parts))
		st, err := os.Stat(shufflefile.Path(spec.Layout, shufflefile.DataName(spec.ID)))
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for j, n := range g.n {
			sum += n
			if j < len(g.n)-1 && n < wakeBytes {
				t.Errorf("runs %d: write %d of %d is %d bytes, want >= %d", runs, j, len(g.n), n, wakeBytes)
			}
		}
		if sum != st.Size() {
			t.Errorf("runs %d: grew %d bytes, data file has %d", runs, sum, st.Size())
		}
	}
}
