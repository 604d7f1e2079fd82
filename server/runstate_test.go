package server

import (
	"context"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/writer"
)

// TestRunStateBudget: every run of a map output after its second is
// charged to the partition-state budget when it starts, so a client whose
// partition ids go backwards batch after batch cannot make the daemon hold
// per-run tables beyond --partition-state-limit: the batch that would
// exceed it is refused (ResourceExhausted, naming the budget), its map
// output aborts, and the charge comes back.
func TestRunStateBudget(t *testing.T) {
	const parts = 4096
	const limit = 1 << 20
	d := startDaemon(t, func(c *Config) { c.PartitionStateLimit, c.PartitionStateLimitPerUID = limit, limit })
	c := dial(t, d, "app")
	ctx := context.Background()
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: parts, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatal(err)
	}
	// Every batch writes each partition, so each starts a run.
	data := make([]byte, parts)
	offsets := make([]int64, parts+1)
	for p := range offsets {
		offsets[p] = int64(p)
	}
	perRun := int64(parts * writer.RunTableBytes)
	fit := 2 + (limit-parts*PartitionStateBytes)/perRun // runs that fit the budget
	var refused error
	batches := 0
	for range fit + 2 {
		if refused = mo.WriteOpaque(ctx, data, offsets); refused != nil {
			break
		}
		batches++
	}
	if protocol.CodeOf(refused) != protocol.CodeResourceExhausted || !strings.Contains(refused.Error(), "partition-state-limit") {
		t.Fatalf("after %d batches of %d partitions each: %v, want ResourceExhausted naming --partition-state-limit", batches, parts, refused)
	}
	if int64(batches) != fit {
		t.Errorf("%d runs admitted, want %d (a budget of %d bytes, %d at Open, %d per run after the second)", batches, fit, limit, parts*PartitionStateBytes, perRun)
	}
	if _, err := mo.Commit(ctx); err == nil {
		t.Error("Commit after the refused run succeeded")
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stats {
		if (st.Name == "partition_state_bytes" || st.Name == "open_map_outputs") && st.Value != 0 {
			t.Errorf("%s = %d after the map output aborted, want 0", st.Name, st.Value)
		}
	}
}

// TestShuffleListBound: an application with more shuffles than a
// ShuffleList holds is answered ResourceExhausted, naming the bound, not
// with a list that fails to encode (Internal).
func TestShuffleListBound(t *testing.T) {
	list := make([]protocol.ShuffleInfo, protocol.MaxShuffles+1)
	for i := range list {
		list[i].ShuffleID = int32(i) // ascending, as a ShuffleList's must be
	}
	if _, err := shuffleList("app", list); codeOf(err) != protocol.CodeResourceExhausted || !strings.Contains(err.Error(), "1048576") {
		t.Errorf("a list of %d shuffles = %v, want ResourceExhausted naming the bound", len(list), err)
	}
	sl, err := shuffleList("app", list[:protocol.MaxShuffles])
	if err != nil {
		t.Fatal(err)
	}
	if err := sl.Validate(); err != nil {
		t.Errorf("a list of %d shuffles, the most one holds: %v", protocol.MaxShuffles, err)
	}
}
