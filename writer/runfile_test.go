package writer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
)

// TestMergeRefusesSwappedRunFile: the merge reopens a run's file by name,
// in a directory a client may write; a name swapped for a link to another
// file fails the commit, naming the run file, and none of that file's
// bytes reach the output.
func TestMergeRefusesSwappedRunFile(t *testing.T) {
	e := newEngine(t, WithLimit(1<<20)) // too small for runs in memory: every run has a file
	dir := t.TempDir()
	ctx := context.Background()
	w, err := e.Open(ctx, Spec{ID: shufflefile.ID{Shuffle: 1, Map: 2}, NumPartitions: 2, Codec: codec.None,
		Checksum: checksum.None, Layout: shufflefile.Flat(dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Write(ctx, 1, []byte("run one")); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, 0, []byte("run two")); err != nil { // partition ids went back: a second run
		t.Fatal(err)
	}
	w.mu.Lock()
	path := w.streams[0].sink.(*run).file.path
	w.mu.Unlock()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("another client's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, path+".swap"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".swap", path); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); err == nil || !strings.Contains(err.Error(), "no longer the run file") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Commit after the first run's file was swapped = %v, want an error naming %s as replaced", err, path)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if b, _ := os.ReadFile(filepath.Join(dir, e.Name())); e.Name() != "victim" && strings.Contains(string(b), "secret") {
			t.Errorf("%s holds the other file's bytes", e.Name())
		}
	}
}
