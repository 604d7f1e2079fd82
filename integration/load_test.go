package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

const (
	// loadSessions is the number of executors that write at once.
	loadSessions = 256
	// loadVariants is the number of distinct map outputs they write (each
	// session its own copy under its own application): every codec,
	// checksum, payload kind and data plane, serialized once.
	loadVariants = 32
	// loadLimit is the daemon's bytes-in-flight limit: small, so that the
	// sessions queue on the limiter (at 8 MiB this workload peaks just
	// under the limit and never waits, which would test nothing).
	loadLimit = 4 << 20
	// loadRSSMargin is what the daemon may hold beyond the limit: the
	// runtime, 256 connections with their buffers, inline batches received
	// but not yet admitted, the encoders, and the memfd pages it maps. Its
	// peak resident set must stay under loadLimit + loadRSSMargin.
	loadRSSMargin = 256 << 20
)

// loadSession is one executor's map output, its batches serialized before
// the start (shared with the sessions of the same variant), and what it
// got.
type loadSession struct {
	o       *mapOutput
	batches []loadBatch
	res     protocol.CommitResult
	err     error
}

// loadBatch is one batch ready to send: the payload with its partition
// offsets (opaque) or layout (columnar), in a sealed-to-be memfd when the
// map output's producer writes into one.
type loadBatch struct {
	payload []byte
	offsets []int64
	layout  protocol.ColumnarLayout
	memfd   *client.Memfd
}

// prepareLoad serializes the batches of o as mapOutput.writeBatch would,
// so that the sessions' start is all sending. Memfds are sealed here, so
// that sessions may pass the same ones at once.
func prepareLoad(o *mapOutput) ([]loadBatch, error) {
	var out []loadBatch
	for _, b := range o.batches {
		var lb loadBatch
		if o.kind == protocol.KindOpaque {
			lb.payload, lb.offsets = opaquePayload(b)
		} else {
			lb.payload, lb.layout = columnar.Append(nil, b)
		}
		if o.direct {
			f, err := client.NewMemfd(len(lb.payload))
			if err != nil {
				return nil, err
			}
			copy(f.Bytes(), lb.payload)
			if err := f.Seal(); err != nil {
				f.Close()
				return nil, err
			}
			lb.memfd = f
		}
		out = append(out, lb)
	}
	return out, nil
}

// write sends the prepared batches and commits.
func (s *loadSession) write(ctx context.Context, c *client.Client) (protocol.CommitResult, error) {
	m, err := s.o.open(ctx, c)
	if err != nil {
		return protocol.CommitResult{}, err
	}
	for i, b := range s.batches {
		switch {
		case s.o.kind == protocol.KindOpaque && b.memfd != nil:
			err = m.WriteOpaqueMemfd(ctx, b.memfd, b.offsets)
		case s.o.kind == protocol.KindOpaque:
			err = m.WriteOpaque(ctx, b.payload, b.offsets)
		case b.memfd != nil:
			err = m.WriteColumnarMemfd(ctx, b.memfd, b.layout)
		default:
			err = m.WriteColumnar(ctx, b.payload, b.layout)
		}
		if err != nil {
			return protocol.CommitResult{}, fmt.Errorf("%v: batch %d: %w", s.o, i, err)
		}
	}
	return m.Commit(ctx)
}

// TestLoad has loadSessions executors, each on its own connection and
// application, open a map output at the same moment and write it (every
// codec, checksum, payload kind and data plane, one to three batches)
// against one daemon with a bytes-in-flight limit of loadLimit, and checks:
//
//   - every session commits or gets a clear error: a protocol error with
//     its code and message, never a broken connection; committed outputs
//     hold exactly what was sent (the first session of each of the
//     loadVariants is decoded and compared with its batches, the others'
//     files must be byte for byte the same as their variant's first);
//   - the limiter's high-water mark (Stats peak_bytes_in_flight) never
//     exceeded bytes_in_flight_limit (sessions wait on it: their batches
//     are serialized before the start, so the daemon is the bottleneck): no
//     record of this workload is larger than the limit (records are at
//     most the writer's 1 MiB record size), so the oversize exception
//     cannot apply;
//   - nothing is in flight and no map output is open afterwards;
//   - the daemon's peak resident set (VmHWM) stays under the limit plus
//     loadRSSMargin;
//   - no goroutine of the test process outlives the test.
func TestLoad(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	d := startDaemon(t, config{args: []string{"--limit", fmt.Sprint(loadLimit), "--log-level", "info"}})

	// Serialize the variants, connect and register every session first,
	// then start them all at once.
	prepared := make([][]loadBatch, loadVariants)
	for v := range loadVariants {
		var err error
		if prepared[v], err = prepareLoad(plan(v, "", nil, shufflefile.ID{})); err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, b := range prepared[v] {
				if b.memfd != nil {
					b.memfd.Close()
				}
			}
		}()
	}
	clients := make([]*client.Client, loadSessions)
	sessions := make([]loadSession, loadSessions)
	var sent int64
	for i := range loadSessions {
		app := fmt.Sprintf("load-%d", i)
		c, layout, err := relDial(ctx, d.socket, app, nil)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		defer c.Close()
		clients[i] = c
		sessions[i].o = plan(i%loadVariants, app, layout, shufflefile.ID{Shuffle: 1, Map: int64(i)})
		sessions[i].batches = prepared[i%loadVariants]
		for _, b := range sessions[i].batches {
			sent += int64(len(b.payload))
		}
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
			s := &sessions[i]
			s.res, s.err = s.write(ctx, clients[i])
		})
	}
	close(start)
	wg.Wait()

	var committed, refused int
	for i, oc := range sessions {
		var pe *protocol.Error
		switch {
		case oc.err == nil:
			committed++
			// The first session of each variant is read back and decoded;
			// the others sent the same bytes, so their files must be
			// byte for byte the same as its.
			first := &sessions[i%loadVariants]
			var err error
			if first == &sessions[i] || first.err != nil {
				err = oc.o.verify(&oc.res)
			} else {
				err = relSameOutput(oc.o, &oc.res, first.o, &first.res)
			}
			if err != nil {
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
