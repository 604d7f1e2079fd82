package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/internal/leakcheck"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
)

const (
	// loadSessions is the number of executors that write at once.
	loadSessions = 256
	// loadLimit is the daemon's bytes-in-flight limit: small, so that the
	// sessions queue on the limiter.
	loadLimit = 8 << 20
	// loadRSSMargin is what the daemon may hold beyond the limit: the
	// runtime, 256 connections with their buffers and the inline batches
	// they have received but not yet admitted, the encoders and the page
	// cache of files being written do not count. Its peak resident set
	// must stay under loadLimit + loadRSSMargin.
	loadRSSMargin = 256 << 20
)

// loadOutcome is what one session got.
type loadOutcome struct {
	o   *mapOutput
	res protocol.CommitResult
	err error
}

// TestLoad has loadSessions executors, each on its own connection and
// application, open a map output at the same moment and write it (every
// codec, checksum, payload kind and data plane, one to three batches)
// against one daemon with a bytes-in-flight limit of loadLimit, and checks:
//
//   - every session commits or gets a clear error: a protocol error with
//     its code and message, never a broken connection; committed outputs
//     hold exactly what was sent;
//   - the limiter's high-water mark (Stats peak_bytes_in_flight) never
//     exceeded bytes_in_flight_limit: no record of this workload is larger
//     than the limit, so the oversize exception cannot apply;
//   - nothing is in flight and no map output is open afterwards;
//   - the daemon's peak resident set (VmHWM) stays under the limit plus
//     loadRSSMargin;
//   - no goroutine of the test process outlives the test.
func TestLoad(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	d := startDaemon(t, config{args: []string{"--limit", fmt.Sprint(loadLimit), "--log-level", "info"}})

	// Connect and register every session first, then start them all at
	// once.
	clients := make([]*client.Client, loadSessions)
	outcomes := make([]loadOutcome, loadSessions)
	var sent int64
	for i := range loadSessions {
		app := fmt.Sprintf("load-%d", i)
		c, layout, err := relDial(ctx, d.socket, app, nil)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		defer c.Close()
		clients[i] = c
		outcomes[i].o = plan(i, app, layout, shufflefile.ID{Shuffle: 1, Map: int64(i)})
		sent += outcomes[i].o.size()
	}
	startRSS, err := relProcStatus(d.pid(), "VmRSS")
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range loadSessions {
		wg.Go(func() {
			<-start
			oc := &outcomes[i]
			oc.res, oc.err = oc.o.write(ctx, clients[i])
		})
	}
	close(start)
	wg.Wait()

	var committed, refused int
	for i, oc := range outcomes {
		var pe *protocol.Error
		switch {
		case oc.err == nil:
			committed++
			if err := oc.o.verify(&oc.res); err != nil {
				t.Errorf("session %d: %v", i, err)
			}
		case errors.As(oc.err, &pe) && pe.Message != "":
			refused++
			t.Logf("session %d: refused: %v", i, oc.err)
		default:
			t.Errorf("session %d: %v: %v, want a commit or a protocol error", i, oc.o, oc.err)
		}
	}

	st, err := relStats(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	peak, limit := st["peak_bytes_in_flight"], st["bytes_in_flight_limit"]
	if limit != loadLimit {
		t.Errorf("Stats bytes_in_flight_limit = %d, want %d", limit, loadLimit)
	}
	if peak > limit || peak <= 0 {
		t.Errorf("Stats peak_bytes_in_flight = %d, want in (0, %d]", peak, limit)
	}
	if n := st["bytes_in_flight"]; n != 0 {
		t.Errorf("Stats bytes_in_flight = %d after every session ended, want 0", n)
	}
	if n := st["open_map_outputs"]; n != 0 {
		t.Errorf("Stats open_map_outputs = %d after every session ended, want 0", n)
	}
	hwm, err := relProcStatus(d.pid(), "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	if hwm >= loadLimit+loadRSSMargin {
		t.Errorf("daemon VmHWM = %.1f MiB, want under the limit %.0f MiB + %.0f MiB", mib(hwm), mib(loadLimit), mib(loadRSSMargin))
	}
	if tmp := tempFiles(t, d.root); len(tmp) > 0 {
		t.Errorf("temp files after every session ended: %q", tmp)
	}
	t.Logf("%d sessions (%.1f MiB of payload): %d committed and verified, %d refused; peak in flight %.2f MiB of a %.0f MiB limit, %d limiter waits; daemon VmHWM %.1f MiB (VmRSS %.1f MiB before the load)",
		loadSessions, mib(sent), committed, refused, mib(peak), mib(limit), st["limiter_waits"], mib(hwm), mib(startRSS))

	for _, c := range clients {
		c.Close()
	}
	d.stop()
}
