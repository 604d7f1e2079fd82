package ingest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/writer"
)

// testHeld is a Batch's frame as the server hands it over: a descriptor
// (or -1) and an inline frame whose recycling it records.
type testHeld struct {
	fd       int
	recycled atomic.Bool
}

func (h *testHeld) TakeFD() int {
	fd := h.fd
	h.fd = -1
	return fd
}

func (h *testHeld) TakeInline() func() { return func() { h.recycled.Store(true) } }

// funcSink is a writer.Sink whose Write is a function and that assembles
// no file.
type funcSink struct{ write func() }

func (s funcSink) Write(int, []byte, uint32) error { s.write(); return nil }
func (s funcSink) Close(bool) error                { return nil }
func (s funcSink) Assemble(context.Context) (string, []int64, []uint32, error) {
	return "", nil, nil, nil
}
func (s funcSink) Remove() {}

// applyHeld applies m through a Conn while the engine's one worker is
// held in another map output's sink, so that every record of m is still
// queued when the writer has admitted them all. It checks that Apply does
// not return while the worker is held (the records still read the
// payload), runs whileHeld (may be nil), then lets the worker go and
// returns Apply's result and whether released reported true when Apply
// returned. The Conn answers no batch early (Config.EarlyAnswerBytes -1):
// TestApplyEarly checks the early answer.
func applyHeld(t *testing.T, m *protocol.Batch, h Held, released func() bool, whileHeld func()) (int64, error, bool) {
	t.Helper()
	cfg := Config{EarlyAnswerBytes: -1}
	ctx := context.Background()
	e, blocker, gate := heldWorker(t)
	w, err := e.Open(ctx, writer.Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: len(m.Opaque.PartitionOffsets) - 1, Codec: codec.LZ4, Layout: shufflefile.Flat(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	c := New(cfg).NewConn(ctx, nil)
	defer c.Close()
	type result struct {
		n        int64
		err      error
		released bool
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.Apply(nil, Output{Writer: w}, m, h)
		done <- result{n, err, released()}
	}()
	select {
	case r := <-done:
		close(gate)
		t.Errorf("Apply returned (%d, %v) while every record of the batch was still queued: BatchAccepted would tell the client its memory is free while the daemon reads it", r.n, r.err)
		return r.n, r.err, r.released
	case <-time.After(100 * time.Millisecond):
	}
	if released() {
		t.Error("the payload was let go while the batch's records were still queued")
	}
	if whileHeld != nil {
		whileHeld()
	}
	close(gate)
	r := <-done
	for _, w := range []*writer.MapWriter{blocker, w} {
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := e.Limiter().Stats(); s.InFlight != 0 {
		t.Errorf("limiter holds %d bytes after the map outputs committed", s.InFlight)
	}
	return r.n, r.err, r.released
}

// heldWorker returns a writer engine of one worker, 256 MiB of limit,
// whose worker is held by blocker's first record (a map output of shuffle
// 9) until gate is closed: records queued meanwhile wait.
func heldWorker(t *testing.T) (e *writer.Engine, blocker *writer.MapWriter, gate chan struct{}) {
	t.Helper()
	e, err := writer.New(writer.WithWorkers(1), writer.WithLimit(256<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	held, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	blocker, err = e.Open(ctx, writer.Spec{ID: shufflefile.ID{Shuffle: 9}, NumPartitions: 1, Codec: codec.None, Layout: shufflefile.Flat(t.TempDir()),
		Sink: func(writer.SinkSpec) (writer.Sink, error) {
			return funcSink{write: func() { once.Do(func() { close(held); <-gate }) }}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := blocker.Write(ctx, 0, []byte("hold the worker")); err != nil {
		t.Fatal(err)
	}
	<-held
	return e, blocker, gate
}

// opaqueBatch returns an opaque Batch of data cut into parts partitions
// of records of at most 1 MiB (the writer's record size).
func opaqueBatch(plane protocol.Plane, data []byte, parts int) *protocol.Batch {
	offs := make([]int64, parts+1)
	for p := range offs {
		offs[p] = int64(p) * int64(len(data)) / int64(parts)
	}
	return &protocol.Batch{Handle: 1, Kind: protocol.KindOpaque, Plane: plane, Opaque: protocol.OpaqueLayout{PartitionOffsets: offs}}
}

// TestApplyInlineHoldsFrameUntilRead checks that an inline batch's frame
// is recycled before Apply returns (and BatchAccepted goes out, and the
// server gives the frame's share of --frame-memory back), and not while
// its records are still queued: the frame is counted until nothing reads
// it.
func TestApplyInlineHoldsFrameUntilRead(t *testing.T) {
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i / 512)
	}
	m := opaqueBatch(protocol.PlaneInline, data, 16)
	m.Inline = data
	h := &testHeld{fd: -1}
	n, err, recycled := applyHeld(t, m, h, h.recycled.Load, nil)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Apply = %d, %v; want %d, nil", n, err, len(data))
	}
	if !recycled {
		t.Error("Apply returned before the inline frame was recycled")
	}
}

// TestApplyEarly checks the early answer: a batch that fits the budget
// (Config.EarlyAnswerBytes) is answered while its records are still
// queued, its payload held (the inline frame not recycled) and counted in
// the budget until they end, so that a second batch past what is left of
// the budget is answered only once nothing reads it.
func TestApplyEarly(t *testing.T) {
	ctx := context.Background()
	e, blocker, gate := heldWorker(t)
	const size = 4 << 20
	c := New(Config{EarlyAnswerBytes: size + size/2}).NewConn(ctx, nil)
	defer c.Close()
	batch := func() (*protocol.Batch, *testHeld) {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i / 512)
		}
		m := opaqueBatch(protocol.PlaneInline, data, 8)
		m.Inline = data
		return m, &testHeld{fd: -1}
	}
	w, err := e.Open(ctx, writer.Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: 8, Codec: codec.LZ4, Layout: shufflefile.Flat(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	m1, h1 := batch()
	if n, err := c.Apply(nil, Output{Writer: w}, m1, h1); err != nil || n != size {
		t.Fatalf("Apply = %d, %v; want %d, nil", n, err, size)
	}
	if h1.recycled.Load() {
		t.Fatal("the first batch's frame was recycled while its records were queued")
	}
	m2, h2 := batch()
	second := make(chan error, 1)
	go func() {
		_, err := c.Apply(nil, Output{Writer: w}, m2, h2)
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the second batch was answered (%v) past the early budget while the first one's records were queued", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if !h1.recycled.Load() || !h2.recycled.Load() {
		t.Errorf("frames recycled: first %v, second %v; want both once their records ended", h1.recycled.Load(), h2.recycled.Load())
	}
	for _, w := range []*writer.MapWriter{blocker, w} {
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !c.p.early.TryAcquire(size + size/2) {
		t.Error("the early budget was not given back once the batches' records ended")
	}
}
