package server

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// TestBatchLast speaks the LAST flag frame by frame: the server announces
// it; a map output of three runs with LAST on its final batch commits the
// same lengths as one without; a Batch after a LAST one is
// FailedPrecondition and aborts only its map output; an unknown flag bit
// is malformed and aborts the map output its handle names.
func TestBatchLast(t *testing.T) {
	leakcheck.Check(t)
	// A limit of 16 record sizes or more: later runs are held in memory,
	// which the early merge streams from.
	d := startDaemon(t, func(c *Config) { c.LimitBytes = 64 << 20 })
	conn := dialRaw(t, d)
	if sh := conn.handshake("app"); sh.Features&protocol.FeatureLastBatch == 0 {
		t.Fatalf("ServerHello features %#x lack last-batch (bit 5)", uint64(sh.Features))
	}
	id := uint32(2)
	call := func(m protocol.Message) protocol.Message {
		t.Helper()
		id++
		_, resp := conn.call(id, m)
		return resp
	}
	open := func(mapID int64) uint64 {
		t.Helper()
		r := call(&protocol.OpenMapOutput{ShuffleID: 1, MapID: mapID, NumPartitions: 3, Kind: protocol.KindOpaque})
		o, ok := r.(*protocol.Opened)
		if !ok {
			t.Fatalf("Open answered %v", r)
		}
		return o.Handle
	}
	batch := func(h uint64, flags protocol.BatchFlags, data string) protocol.Message {
		t.Helper()
		n := int64(len(data))
		return call(&protocol.Batch{Handle: h, Kind: protocol.KindOpaque, Plane: protocol.PlaneInline, Flags: flags,
			Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, n / 3, 2 * n / 3, n}}, Inline: []byte(data)})
	}
	batches := []string{"aaabbbccc", "dddeeefff", "ggghhhiii"}
	commit := func(h uint64, last bool) *protocol.CommitResult {
		t.Helper()
		for i, b := range batches {
			var flags protocol.BatchFlags
			if last && i == len(batches)-1 {
				flags = protocol.BatchLast
			}
			if r := batch(h, flags, b); r.Type() != protocol.TypeBatchAccepted {
				t.Fatalf("batch %d (last %v) answered %v", i, last, r)
			}
		}
		r, ok := call(&protocol.Commit{Handle: h}).(*protocol.CommitResult)
		if !ok {
			t.Fatal("Commit did not answer CommitResult")
		}
		return r
	}
	plain, marked := commit(open(0), false), commit(open(1), true)
	if marked.Runs != 3 || !slices.Equal(plain.Lengths, marked.Lengths) || !slices.Equal(plain.Checksums, marked.Checksums) {
		t.Errorf("with LAST: runs %d lengths %v checksums %v; without: %v %v, want the same over 3 runs", marked.Runs, marked.Lengths, marked.Checksums, plain.Lengths, plain.Checksums)
	}
	got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "app", "1")), shufflefile.ID{Shuffle: 1, Map: 1}, codec.LZ4)
	if want := []string{"aaadddggg", "bbbeeehhh", "cccfffiii"}; string(got[0]) != want[0] || string(got[1]) != want[1] || string(got[2]) != want[2] {
		t.Errorf("with LAST read back %q, want %q", got, want)
	}

	// A batch after the last one.
	other := open(2)
	if r := batch(other, 0, "xxxyyyzzz"); r.Type() != protocol.TypeBatchAccepted {
		t.Fatalf("batch of the other map output answered %v", r)
	}
	h := open(3)
	if r := batch(h, protocol.BatchLast, "aaabbbccc"); r.Type() != protocol.TypeBatchAccepted {
		t.Fatalf("LAST batch answered %v", r)
	}
	r := batch(h, 0, "dddeeefff")
	if e, ok := r.(*protocol.Error); !ok || e.Code != protocol.CodeFailedPrecondition || !strings.Contains(e.Message, "after its last batch") {
		t.Errorf("Batch after a LAST batch answered %v, want FailedPrecondition naming the last batch", r)
	}
	if r := call(&protocol.Commit{Handle: h}); codeOfMsg(r) != protocol.CodeAborted {
		t.Errorf("Commit after the refused batch answered %v, want Aborted", r)
	}

	// An unknown flag bit: malformed, and the map output its handle names
	// is aborted.
	h = open(4)
	frame := mustFrame(t, 90, &protocol.Batch{Handle: h, Kind: protocol.KindOpaque, Plane: protocol.PlaneInline,
		Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, 0, 0, 1}}, Inline: []byte("q")})
	frame[protocol.HeaderSize+10] = 0x02 // handle (8), kind, plane, flags
	if _, err := conn.uc.Write(frame); err != nil {
		t.Fatal(err)
	}
	if _, r := conn.read(); codeOfMsg(r) != protocol.CodeInvalidArgument || !strings.Contains(r.(*protocol.Error).Message, "Flags") {
		t.Errorf("Batch with flags 0x02 answered %v, want InvalidArgument naming the flags", r)
	}
	if r := call(&protocol.Commit{Handle: h}); codeOfMsg(r) != protocol.CodeAborted {
		t.Errorf("Commit after the malformed batch answered %v, want Aborted", r)
	}

	// The other map output is untouched.
	if r := batch(other, protocol.BatchLast, "xyz"); r.Type() != protocol.TypeBatchAccepted {
		t.Fatalf("other map output's LAST batch answered %v", r)
	}
	if r, ok := call(&protocol.Commit{Handle: other}).(*protocol.CommitResult); !ok || r.Runs != 2 {
		t.Errorf("other map output's Commit answered %v, want 2 runs", r)
	}

	// Two marked map outputs committed, both merged from their last batch
	// on (their runs are in memory); the unmarked one counts in neither.
	stats := map[string]int64{}
	for _, st := range call(&protocol.Stats{}).(*protocol.StatsResult).Stats {
		stats[st.Name] = st.Value
	}
	if stats["marked_commits_total"] != 2 || stats["early_merges_total"] != 2 || stats["commits_total"] != 3 {
		t.Errorf("Stats marked_commits_total %d, early_merges_total %d, commits_total %d; want 2, 2, 3",
			stats["marked_commits_total"], stats["early_merges_total"], stats["commits_total"])
	}
	body := scrape(t, d.s)
	for _, want := range []string{"shuffled_marked_commits_total 2\n", "shuffled_early_merges_total 2\n", "shuffled_commits_total 3\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", strings.TrimSpace(want), grepLines(body, "shuffled_early|shuffled_marked|shuffled_commits_total"))
		}
	}
}

func grepLines(body, sub string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		for _, s := range strings.Split(sub, "|") {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
