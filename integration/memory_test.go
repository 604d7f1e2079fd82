package integration

import (
	"context"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/ingest"
	"github.com/shuffled/shuffled/internal/procmem"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
)

// TestMemoryBound checks that the daemon's resident memory stays within
// its bytes-in-flight limit plus the documented constants
// (docs/operations.md, "Memory"), whatever the size of the batches, on
// the memfd and inline planes: batches of a quarter of the limit and of
// several times it (and small ones, read in whole), columnar and opaque, in memfds the client closes at
// BatchAccepted. The daemon runs with --limit 64MiB and --pool 2.
//
// The bounds, with their slack:
//   - RssShmem (the memfd pages the daemon maps): 5/4 of R, a quarter of
//     the limit and at least ingest.MemfdResidentBytes (32 MiB: 40 MiB
//     here), plus batches answered early (within R), plus, per worker, a
//     record of 1 MiB and the pages at the ends of its buffers, plus while
//     a columnar batch is checked its offsets (4 bytes a row per string
//     column): 64 MiB asserted.
//   - RssAnon (the daemon's own memory) over its idle figure: the limit
//     (records, encoded bytes, runs in memory) plus the inline frames
//     being read (--frame-memory 64MiB here) plus what Go's collector lets
//     the heap grow past its live bytes: 3 × 64 MiB + 64 MiB asserted.
//
// Before batches were held only while their records read them, the
// larger memfd batches were all mapped at once until Commit: a RssShmem
// of their sum.
func TestMemoryBound(t *testing.T) {
	const limit = 64 << 20
	d := startDaemon(t, config{args: []string{"--limit", "64MiB", "--frame-memory", "64MiB"}})
	idle, err := procmem.Read(d.pid())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := d.dial(t, "memory-bound", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitTimeout)
	defer cancel()
	const parts = 64
	// About 136 bytes a row serialized: 125,000 rows are ~16 MiB, a
	// quarter of the limit; 750,000 ~100 MiB, 1.5 times it.
	tiny, err := lineitem(30_000, parts) // ~4 MiB: read in whole
	if err != nil {
		t.Fatal(err)
	}
	small, err := lineitem(125_000, parts)
	if err != nil {
		t.Fatal(err)
	}
	large, err := lineitem(750_000, parts)
	if err != nil {
		t.Fatal(err)
	}
	opaque := make([]byte, 4*limit) // 4 times the limit, compressible
	for i := range opaque {
		opaque[i] = byte(i / 4096 % 251)
	}
	offsets := make([]int64, parts+1)
	for p := range offsets {
		offsets[p] = int64(p) * int64(len(opaque)) / parts
	}
	cases := []struct {
		name    string
		plane   client.DataPlane
		kind    protocol.PayloadKind
		batches int
		write   func(*client.MapOutput) error
	}{
		{"memfd/columnar/small", client.PlaneMemfd, protocol.KindColumnar, 4, func(m *client.MapOutput) error { return writeColumnarMemfd(ctx, m, tiny) }},
		{"memfd/columnar/quarter-limit", client.PlaneMemfd, protocol.KindColumnar, 4, func(m *client.MapOutput) error { return writeColumnarMemfd(ctx, m, small) }},
		{"memfd/columnar/1.5-limit", client.PlaneMemfd, protocol.KindColumnar, 3, func(m *client.MapOutput) error { return writeColumnarMemfd(ctx, m, large) }},
		{"memfd/opaque/4-limit", client.PlaneMemfd, protocol.KindOpaque, 2, func(m *client.MapOutput) error {
			f, err := sealedMemfd(opaque)
			if err != nil {
				return err
			}
			defer f.Close() // closed at BatchAccepted: the daemon holds nothing of it then
			return m.WriteOpaqueMemfd(ctx, f, offsets)
		}},
		{"inline/columnar/quarter-limit", client.PlaneInline, protocol.KindColumnar, 4, func(m *client.MapOutput) error {
			payload, layout := columnar.Append(nil, small)
			return m.WriteColumnar(ctx, payload, layout)
		}},
	}
	s := procmem.Sample(d.pid(), 2*time.Millisecond)
	for i, tc := range cases {
		m, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: int64(i), NumPartitions: parts, Kind: tc.kind}, client.WithPlane(tc.plane))
		if err != nil {
			t.Fatalf("%s: Open: %v", tc.name, err)
		}
		for b := range tc.batches {
			if err := tc.write(m); err != nil {
				t.Fatalf("%s: batch %d: %v", tc.name, b, err)
			}
		}
		if _, err := m.Commit(ctx); err != nil {
			t.Fatalf("%s: Commit: %v", tc.name, err)
		}
	}
	peak, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon idle: VmRSS %d MiB, RssShmem %d MiB, RssAnon %d MiB; peaks: VmRSS %d MiB, RssShmem %d MiB, RssAnon %d MiB (--limit 64MiB)",
		idle.RSS>>20, idle.Shmem>>20, idle.Anon>>20, peak.RSS>>20, peak.Shmem>>20, peak.Anon>>20)
	if want := int64(ingest.MemfdResidentBytes + 32<<20); peak.Shmem > want {
		t.Errorf("peak RssShmem %d MiB, want at most %d MiB: the daemon maps memfd pages past what its records in flight read", peak.Shmem>>20, want>>20)
	}
	if want := idle.Anon + 3*limit + 64<<20; peak.Anon > want {
		t.Errorf("peak RssAnon %d MiB, want at most %d MiB (idle %d MiB + 3 × the 64 MiB limit + 64 MiB of frames)", peak.Anon>>20, want>>20, idle.Anon>>20)
	}
}

// lineitem returns rows of the lineitem-like schema partitioned into
// parts.
func lineitem(rows, parts int) (*partition.Batch, error) {
	raw, err := synth.Generate("lineitem", 7, rows)
	if err != nil {
		return nil, err
	}
	return partition.Partition(raw, []int{0}, parts)
}

// writeColumnarMemfd sends b in a memfd of its own, closed once the daemon
// has accepted the batch.
func writeColumnarMemfd(ctx context.Context, m *client.MapOutput, b *partition.Batch) error {
	size, layout := columnar.Layout(b)
	f, err := client.NewMemfd(size)
	if err != nil {
		return err
	}
	defer f.Close()
	columnar.Fill(f.Bytes(), b, &layout)
	if err := f.Seal(); err != nil {
		return err
	}
	return m.WriteColumnarMemfd(ctx, f, layout)
}
