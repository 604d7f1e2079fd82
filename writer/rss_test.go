package writer

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
)

var peakRSSBytes = flag.Int64("peak-rss", 0, "TestPeakRSS: write this many bytes (e.g. 4294967296) and check the process's peak RSS")

// TestPeakRSS writes -peak-rss bytes of lineitem batches through 4
// concurrent map outputs with a 128 MiB limit, and checks that the
// process's peak resident set stays under the limit + 64 MiB (plus the
// input batch, which the test holds). Run it alone:
//
//	go test ./writer -run '^TestPeakRSS$' -peak-rss 4294967296 -v
func TestPeakRSS(t *testing.T) {
	if *peakRSSBytes <= 0 {
		t.Skip("set -peak-rss BYTES to run")
	}
	const limit = 128 << 20
	debug.SetMemoryLimit(limit + 32<<20) // the daemon's serve sets the same kind of bound
	batch := lineitemBatch(t, 2000)
	per := serializedSize(batch)
	runtime.GC()
	base := maxRSS()
	e := newEngine(t, WithLimit(limit))
	dir := t.TempDir()
	ctx := context.Background()
	const tasks = 4
	batches := int(*peakRSSBytes / per / tasks)
	var wg sync.WaitGroup
	errs := make(chan error, tasks)
	for task := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: int64(task)}, NumPartitions: 2000, Codec: codec.LZ4, Checksum: checksum.Adler32, Layout: shufflefile.Flat(dir)}
			w, err := e.Open(ctx, spec)
			if err != nil {
				errs <- err
				return
			}
			for range batches {
				if err := w.WriteBatch(ctx, batch, nil); err != nil {
					errs <- err
					return
				}
			}
			if _, err := w.Commit(ctx); err != nil {
				errs <- err
				return
			}
			for _, name := range []string{shufflefile.DataName(spec.ID), shufflefile.IndexName(spec.ID), shufflefile.ChecksumName(spec.ID, spec.Checksum)} {
				os.Remove(shufflefile.Path(spec.Layout, name))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	peak := maxRSS()
	written := int64(tasks*batches) * per
	st := e.Limiter().Stats()
	t.Logf("wrote %s in %d runs per map output; peak RSS %s (before writing %s); limiter peak %s, limit %s",
		mib(written), batches, mib(peak), mib(base), mib(st.Peak), mib(limit))
	if peak > base+limit+64<<20 {
		t.Errorf("peak RSS %s exceeds the RSS before writing (%s) + limit (%s) + 64 MiB", mib(peak), mib(base), mib(limit))
	}
}

func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
