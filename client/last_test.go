package client

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/protocol"
)

// TestMarkLast: the write after MarkLast carries LAST when the daemon
// announced last-batch, and only that one; without the feature no batch
// carries it; either way a write after it is ErrAfterLast and sends
// nothing, and Commit works. A write refused before sending, or cancelled
// before it went out, does not use the mark up.
func TestMarkLast(t *testing.T) {
	checkGoroutines(t)
	for _, announced := range []bool{true, false} {
		s := newFakeServer(t)
		s.hello = func(*protocol.Hello) protocol.Message {
			f := protocol.FeatureMemfd | protocol.FeatureColumnar
			if announced {
				f |= protocol.FeatureLastBatch
			}
			return &protocol.ServerHello{Version: 1, MaxFrame: protocol.DefaultMaxFrame, MaxInline: 16 << 20, Features: f, Server: "fake"}
		}
		var mu sync.Mutex
		var flags []protocol.BatchFlags
		s.hook = func(f protocol.Frame, m protocol.Message) protocol.Message {
			if b, ok := m.(*protocol.Batch); ok {
				mu.Lock()
				flags = append(flags, b.Flags)
				mu.Unlock()
			}
			return nil
		}
		c := dial(t, s)
		register(t, c)
		m := openOpaque(t, c, 1, 2)
		for range 2 {
			if err := m.WriteOpaque(ctx, []byte("ab"), []int64{0, 1, 2}); err != nil {
				t.Fatal(err)
			}
		}
		m.MarkLast()
		if err := m.WriteOpaque(ctx, []byte("ab"), []int64{0, 1, 3}); err == nil {
			t.Fatal("a malformed batch was accepted")
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := m.WriteOpaque(cancelled, []byte("ab"), []int64{0, 1, 2}); !errors.Is(err, context.Canceled) {
			t.Fatalf("write with a cancelled context: %v", err)
		}
		if err := m.WriteOpaque(ctx, []byte("cd"), []int64{0, 1, 2}); err != nil {
			t.Fatalf("the last write: %v", err)
		}
		if err := m.WriteOpaque(ctx, []byte("ef"), []int64{0, 1, 2}); !errors.Is(err, ErrAfterLast) {
			t.Errorf("announced %v: write after the last: %v, want ErrAfterLast", announced, err)
		}
		res, err := m.Commit(ctx)
		if err != nil || res.Runs != 3 {
			t.Fatalf("announced %v: Commit = %+v, %v, want 3 batches", announced, res, err)
		}
		mu.Lock()
		got := append([]protocol.BatchFlags(nil), flags...)
		mu.Unlock()
		want := []protocol.BatchFlags{0, 0, 0}
		if announced {
			want[2] = protocol.BatchLast
		}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("announced %v: batch flags sent %v, want %v", announced, got, want)
		}
	}
}
