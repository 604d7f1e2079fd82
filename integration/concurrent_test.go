package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// TestConcurrentClients has many clients, each its own application, write
// many map outputs at once over every codec, checksum, payload kind and data
// plane, half into the daemon's root and half into Spark local dirs; every
// application uses the same shuffle and map ids. Every committed output is
// read back from disk and must hold exactly what its client sent.
func TestConcurrentClients(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	spark := filepath.Join(t.TempDir(), "spark")
	if err := os.Mkdir(spark, 0o755); err != nil {
		t.Fatal(err)
	}
	// A small limit, so that map outputs wait on one another.
	d := startDaemon(t, config{args: []string{"--allowed-roots", spark, "--limit", "4MiB"}})

	const clients, perClient = 8, 6
	var wg sync.WaitGroup
	var outputs []*mapOutput
	for c := range clients {
		app := fmt.Sprintf("app-%d", c)
		var local []string
		if c%2 == 1 {
			local = makeLocalDirs(t, spark, app, 2)
		}
		cl, reg := d.dial(t, app, local)
		layout := layoutOf(reg, local)
		for m := range perClient {
			o := plan(c*perClient+m, app, layout, shufflefile.ID{Shuffle: 3, Map: int64(m)})
			outputs = append(outputs, o)
			wg.Go(func() {
				res, err := o.write(ctx, cl)
				if err != nil {
					t.Errorf("%v: %v", o, err)
					return
				}
				if res.Existing {
					t.Errorf("%v: Commit says another attempt committed first", o)
				}
				if err := o.verify(&res); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	var sent int64
	for _, o := range outputs {
		sent += o.size()
	}
	t.Logf("%d map outputs of %d clients, %.1f MiB of payload", len(outputs), clients, float64(sent)/(1<<20))

	if tmp := tempFiles(t, d.root, spark); len(tmp) > 0 {
		t.Errorf("temp files left after every commit: %q", tmp)
	}
	// Each application's outputs live in its own directories: none of them
	// was overwritten by another application's output of the same ids.
	for _, o := range outputs {
		if err := o.verify(nil); err != nil {
			t.Errorf("after every commit: %v", err)
		}
	}
	if d.log.contains("level=ERROR") {
		t.Errorf("the daemon logged errors:\n%s", d.log.tail(40))
	}
	d.stop()
}
