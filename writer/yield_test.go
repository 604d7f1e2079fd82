package writer

import (
	"context"
	"testing"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
)

// TestWorkerDue: a worker yields once it has encoded for yieldEvery, or
// at once after it woke a goroutine, and each yield starts a new interval.
func TestWorkerDue(t *testing.T) {
	t0 := time.Now()
	wk := &worker{last: t0}
	if wk.due(t0.Add(yieldEvery / 2)) {
		t.Errorf("due half an interval after the last yield")
	}
	at := t0.Add(yieldEvery)
	if !wk.due(at) {
		t.Errorf("not due a whole interval after the last yield")
	}
	if wk.due(at.Add(time.Microsecond)) {
		t.Errorf("due again a microsecond after a yield")
	}
	wk.woke = true
	if !wk.due(at.Add(2 * time.Microsecond)) {
		t.Errorf("not due after waking a goroutine")
	}
	if wk.woke || wk.due(at.Add(3*time.Microsecond)) {
		t.Errorf("a yield left woke = %v; due again at once", wk.woke)
	}
}

// recordSink takes records and writes nothing.
type recordSink struct{ n int }

func (s *recordSink) Write(int, []byte, uint32) error { s.n++; return nil }
func (s *recordSink) Close(bool) error                { return nil }
func (s *recordSink) Assemble(context.Context) (string, []int64, []uint32, error) {
	return "", nil, nil, nil
}
func (s *recordSink) Remove() {}

// TestWorkerWokeMarks: putting a record that moves a run's progress marks
// it as having woken a goroutine only while a merge waits on the run, and
// the worker that ends a stream (a commit or a merge may wait for it) is
// marked too; a worker that only puts records is not.
func TestWorkerWokeMarks(t *testing.T) {
	e, err := New(WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	w, err := e.Open(ctx, Spec{ID: shufflefile.ID{Shuffle: 1}, NumPartitions: 4, Codec: codec.None,
		Checksum: checksum.None, Layout: shufflefile.Flat(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()

	ru, err := w.newRun(true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ru.close(true); ru.remove() }()
	put := func(p, waiters int) bool {
		t.Helper()
		r := &record{w: w, partition: p, out: []byte("x")}
		ru.mu.Lock()
		ru.waiters = waiters
		ru.mu.Unlock()
		if _, err := ru.put(r); err != nil {
			t.Fatal(err)
		}
		return r.woke
	}
	if put(1, 0) {
		t.Errorf("a put with no merge waiting marked its record as waking one")
	}
	if !put(2, 1) {
		t.Errorf("a put that moved progress while a merge waited did not mark its record")
	}
	if put(2, 1) {
		t.Errorf("a put that left progress where it was marked its record")
	}

	sink := &recordSink{}
	s := w.startStream(custom{sink})
	rs := []*record{{w: w, partition: 0, out: getBuffer(1)}, {w: w, partition: 1, out: getBuffer(1)}}
	for _, r := range rs {
		r.stream = s
		s.slots <- struct{}{}
	}
	s.queue(rs)
	s.close()
	first, last := &worker{}, &worker{}
	rs[0].finish(first)
	if first.woke {
		t.Errorf("the worker that put the stream's first record is marked: nothing waited on it")
	}
	rs[1].finish(last)
	select {
	case <-s.done:
	default:
		t.Fatal("the stream did not end after its last record")
	}
	if !last.woke || sink.n != 2 {
		t.Errorf("the worker that ended the stream: woke = %v, %d records put; want true, 2", last.woke, sink.n)
	}
}

// TestHandoffMutex: unlockWoke reports a goroutine that waited in Lock,
// and only that.
func TestHandoffMutex(t *testing.T) {
	var m handoffMutex
	m.Lock()
	if m.unlockWoke() {
		t.Errorf("unlockWoke with nobody waiting = true")
	}
	m.Lock()
	got := make(chan struct{})
	go func() {
		m.Lock()
		m.Unlock()
		close(got)
	}()
	for m.sleepers.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if !m.unlockWoke() {
		t.Errorf("unlockWoke with a goroutine in Lock = false")
	}
	<-got
	if m.sleepers.Load() != 0 {
		t.Errorf("%d sleepers after the waiter got the lock", m.sleepers.Load())
	}
}
