package writer_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/writer"
	"github.com/shuffled/shuffled/writer/baseline"
)

// benchMode is one way BenchmarkWrite writes: its sink (nil: the writer's
// own files), and setup, when not nil, called at the start of each of its
// sub-benchmarks (undoing itself with b.Cleanup).
type benchMode struct {
	name  string
	sink  func(writer.SinkSpec) (writer.Sink, error)
	setup func(b *testing.B)
	last  bool // MarkLast before the last batch, as the clients do
	// encrypt: Spark's IO encryption (Spec.Encryption), an AES-128 key.
	encrypt bool
}

// modes are the writer's own runs and the baselines it is measured
// against (package writer/baseline); a clib build adds ceiling-c
// (clib_test.go).
var modes = []benchMode{
	{"stream", nil, nil, false, false},
	{"stream-last", nil, nil, true, false},
	{"stream-last-encrypted", nil, nil, true, true},
	{"legacy", baseline.Legacy, nil, false, false},
	{"ceiling", baseline.Ceiling, nil, false, false},
}

// BenchmarkWrite writes one map task of runs batches per iteration, through
// the streaming writer (stream-last: with the last batch marked, so that
// a merge of several runs starts there), the legacy writer (a file per partition, then a
// sequential concatenation) and the compression ceiling (the same records
// encoded on the same pool into nowhere). Throughput is of the uncompressed
// serialized input. Besides CPU time per map task it reports where a
// task's wall time goes: produce-ms (Open until Commit is called: the
// batches handed over), then Commit's phases (wait-ms, merge-tail-ms,
// files-ms: Result's EncodeWait, MergeTail and Files).
func BenchmarkWrite(b *testing.B) {
	for _, mode := range modes {
		for _, k := range []codec.Kind{codec.LZ4, codec.Zstd} {
			for _, runs := range []int{1, 4} {
				for _, n := range []int{200, 2000} {
					name := fmt.Sprintf("mode=%s/codec=%v/runs=%d/partitions=%d", mode.name, k, runs, n)
					b.Run(name, func(b *testing.B) {
						if mode.setup != nil {
							mode.setup(b)
						}
						benchWrite(b, mode, k, runs, n)
					})
				}
			}
		}
	}
}

func benchWrite(b *testing.B, mode benchMode, k codec.Kind, runs, n int) {
	sink := mode.sink
	batch := writer.LineitemBatch(b, n)
	e, err := writer.New()
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	dir := b.TempDir()
	ctx := context.Background()
	var key *iocrypt.Key
	if mode.encrypt {
		if key, err = iocrypt.NewKey([]byte("bench key 16 B.!")); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(runs) * writer.SerializedSize(batch))
	b.ReportAllocs()
	var memoryRuns, allRuns, early int
	var produce, wait, mergeTail, files time.Duration
	cpu0 := cpuTime()
	for i := 0; b.Loop(); i++ {
		opened := time.Now()
		spec := writer.Spec{ID: shufflefile.ID{Shuffle: 1, Map: int64(i)}, NumPartitions: n, Codec: k, Checksum: checksum.Adler32,
			Layout: shufflefile.Flat(dir), Sink: sink, Encryption: key}
		w, err := e.Open(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		for r := range runs {
			if mode.last && r == runs-1 {
				w.MarkLast()
			}
			if err := w.WriteBatch(ctx, batch, nil); err != nil {
				b.Fatal(err)
			}
		}
		produce += time.Since(opened)
		res, err := w.Commit(ctx)
		if err != nil {
			b.Fatal(err)
		}
		wait += res.EncodeWait
		mergeTail += res.MergeTail
		files += res.Files
		memoryRuns += res.MemoryRuns
		allRuns += res.Runs
		if res.EarlyMerge {
			early++
		}
		b.StopTimer()
		for _, name := range []string{shufflefile.DataName(spec.ID), shufflefile.IndexName(spec.ID), shufflefile.ChecksumName(spec.ID, spec.Checksum)} {
			if err := os.Remove(shufflefile.Path(spec.Layout, name)); err != nil && !os.IsNotExist(err) {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	// CPU time of the process per map task: on a machine shared with
	// other work it compares the modes more steadily than wall time.
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	// Where one map task's wall time goes: handing its batches over
	// (Open to Commit), then Commit's phases (see writer.Result).
	for _, m := range []struct {
		d    time.Duration
		unit string
	}{{produce, "produce-ms/op"}, {wait, "wait-ms/op"}, {mergeTail, "merge-tail-ms/op"}, {files, "files-ms/op"}} {
		b.ReportMetric(float64(m.d)/1e6/float64(b.N), m.unit)
	}
	if runs > 1 && sink == nil {
		b.ReportMetric(float64(memoryRuns)/float64(allRuns), "memory-runs/run")
		if mode.last {
			b.ReportMetric(float64(early)/float64(b.N), "early-merges/op")
		}
	}
}

// cpuTime returns the user and system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
