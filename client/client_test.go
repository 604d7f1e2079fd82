package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/protocol"
	"golang.org/x/sys/unix"
)

var ctx = context.Background()

func register(t *testing.T, c *Client) {
	t.Helper()
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "app-1", ExecutorID: "1"}); err != nil {
		t.Fatalf("Register: %v", err)
	}
}

func openOpaque(t *testing.T, c *Client, mapID int64, parts int32, opts ...OutputOption) *MapOutput {
	t.Helper()
	m, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: mapID, NumPartitions: parts, Kind: protocol.KindOpaque}, opts...)
	if err != nil {
		t.Fatalf("Open(map %d): %v", mapID, err)
	}
	return m
}

// randomBatch returns a payload of parts partitions of random sizes.
func randomBatch(rng *rand.Rand, parts int, maxPart int) ([]byte, []int64) {
	offs := make([]int64, parts+1)
	var data []byte
	for p := range parts {
		n := rng.IntN(maxPart + 1)
		for range n {
			data = append(data, byte(rng.Uint32()))
		}
		offs[p+1] = int64(len(data))
	}
	return data, offs
}

func TestHandshake(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	hellos := make(chan *protocol.Hello, 1)
	s.hello = func(h *protocol.Hello) protocol.Message {
		hellos <- h
		return &protocol.ServerHello{Version: 1, MaxFrame: 1 << 20, MaxInline: 1 << 19, Features: protocol.FeatureMemfd, Server: "fake 1"}
	}
	c := dial(t, s, WithName("unit-test"))
	if got := <-hellos; got.Client != "unit-test" || got.MinVersion != protocol.MinVersion || got.MaxVersion != protocol.MaxVersion {
		t.Errorf("server saw Hello %+v", got)
	}
	if h := c.ServerHello(); h.Server != "fake 1" || h.MaxFrame != 1<<20 || h.MaxInline != 1<<19 {
		t.Errorf("ServerHello() = %+v", h)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestHandshakeRefused(t *testing.T) {
	checkGoroutines(t)
	tests := []struct {
		name   string
		answer protocol.Message
		check  func(error) bool
	}{
		{"version mismatch", protocol.Errorf(protocol.CodeVersionMismatch, "client speaks 1..1, server 2..3"),
			func(err error) bool { return protocol.CodeOf(err) == protocol.CodeVersionMismatch }},
		{"version out of range", &protocol.ServerHello{Version: 9, MaxFrame: 1 << 20},
			func(err error) bool { return errors.Is(err, ErrBadResponse) }},
		{"not a hello", &protocol.Pong{},
			func(err error) bool { return errors.Is(err, ErrBadResponse) }},
	}
	for _, tt := range tests {
		s := newFakeServer(t)
		s.hello = func(*protocol.Hello) protocol.Message { return tt.answer }
		c, err := Dial(ctx, s.addr())
		if err == nil {
			c.Close()
		}
		if err == nil || !tt.check(err) {
			t.Errorf("Dial(%s) = %v", tt.name, err)
		}
	}
	if _, err := Dial(ctx, "/nonexistent/shuffled.sock"); err == nil {
		t.Errorf("Dial(missing socket) succeeded")
	}
	if _, err := Dial(ctx, "x", WithMaxFrame(10)); err == nil {
		t.Errorf("Dial(WithMaxFrame(10)) succeeded")
	}
}

func TestHandshakeCancelled(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	release := make(chan struct{})
	s.hello = func(*protocol.Hello) protocol.Message {
		<-release
		return &protocol.ServerHello{Version: 1, MaxFrame: 1 << 20}
	}
	defer close(release)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		c, err := Dial(cctx, s.addr())
		if err == nil {
			c.Close()
		}
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Dial with a cancelled handshake = %v, want context.Canceled", err)
	}
}

func TestWriteCommit(t *testing.T) {
	checkGoroutines(t)
	for _, plane := range []DataPlane{PlaneInline, PlaneMemfd} {
		t.Run(plane.String(), func(t *testing.T) {
			s := newFakeServer(t)
			c := dial(t, s, WithDataPlane(plane))
			reg, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "app-1", ExecutorID: "7"})
			if err != nil || len(reg.Dirs) != 1 || reg.Dirs[0] != "/fake/app-1/7" {
				t.Fatalf("Register = %+v, %v", reg, err)
			}
			const parts = 5
			m := openOpaque(t, c, 3, parts)
			if m.Plane() != plane {
				t.Errorf("Plane() = %v, want %v", m.Plane(), plane)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			want := make([][]byte, parts)
			for range 4 {
				data, offs := randomBatch(rng, parts, 3000)
				if err := m.WriteOpaque(ctx, data, offs); err != nil {
					t.Fatalf("WriteOpaque: %v", err)
				}
				for p := range parts {
					want[p] = append(want[p], data[offs[p]:offs[p+1]]...)
				}
			}
			// An empty batch is fine too.
			if err := m.WriteOpaque(ctx, nil, make([]int64, parts+1)); err != nil {
				t.Fatalf("WriteOpaque(empty): %v", err)
			}
			s.mu.Lock()
			stored := s.mu.outputs[m.Handle()].parts
			s.mu.Unlock()
			for p := range parts {
				if !bytes.Equal(stored[p], want[p]) {
					t.Errorf("partition %d: server holds %d bytes, want %d", p, len(stored[p]), len(want[p]))
				}
			}
			res, err := m.Commit(ctx)
			if err != nil {
				t.Fatalf("Commit: %v", err)
			}
			for p := range parts {
				if res.Lengths[p] != int64(len(want[p])) {
					t.Errorf("Lengths[%d] = %d, want %d", p, res.Lengths[p], len(want[p]))
				}
			}
			if res.Runs != 5 {
				t.Errorf("Runs = %d, want 5", res.Runs)
			}
			if err := m.WriteOpaque(ctx, nil, make([]int64, parts+1)); !errors.Is(err, ErrFinished) {
				t.Errorf("WriteOpaque after Commit = %v, want ErrFinished", err)
			}
			if _, err := m.Commit(ctx); !errors.Is(err, ErrFinished) {
				t.Errorf("Commit twice = %v, want ErrFinished", err)
			}
			if err := m.Abort(ctx); !errors.Is(err, ErrFinished) {
				t.Errorf("Abort after Commit = %v, want ErrFinished", err)
			}
		})
	}
}

func TestWriteColumnar(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	c := dial(t, s)
	register(t, c)
	payload := make([]byte, 24)
	for i := range 4 {
		payload[8+4*i] = byte(10 + i)
	}
	payload[0] = 0b1011
	layout := protocol.ColumnarLayout{
		Rows:          4,
		Columns:       []protocol.Column{{Type: protocol.TypeInt32, Name: "k", Validity: protocol.Buffer{Offset: 0, Length: 1}, Data: protocol.Buffer{Offset: 8, Length: 16}}},
		PartitionRows: []int64{0, 1, 4},
	}
	for _, plane := range []DataPlane{PlaneInline, PlaneMemfd} {
		m, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 2, MapID: 1, NumPartitions: 2, Kind: protocol.KindColumnar}, WithPlane(plane))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.WriteColumnar(ctx, payload, layout); err != nil {
			t.Fatalf("%v: WriteColumnar: %v", plane, err)
		}
		f, err := NewMemfd(len(payload))
		if err != nil {
			t.Fatal(err)
		}
		copy(f.Bytes(), payload)
		if err := m.WriteColumnarMemfd(ctx, f, layout); err != nil {
			t.Fatalf("%v: WriteColumnarMemfd: %v", plane, err)
		}
		f.Close()
		s.mu.Lock()
		got := s.mu.outputs[m.Handle()].parts[0]
		s.mu.Unlock()
		if want := append(append([]byte(nil), payload...), payload...); !bytes.Equal(got, want) {
			t.Errorf("%v: server holds %x, want %x", plane, got, want)
		}
		if err := m.WriteOpaque(ctx, payload, []int64{0, 1, 24}); err == nil || !strings.Contains(err.Error(), "opaque batch for a columnar") {
			t.Errorf("%v: WriteOpaque on a columnar output = %v", plane, err)
		}
		if _, err := m.Commit(ctx); err != nil {
			t.Fatalf("%v: Commit: %v", plane, err)
		}
	}
}

func TestMemfdSealedAndMapped(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	c := dial(t, s)
	register(t, c)
	m := openOpaque(t, c, 1, 2)
	f, err := NewMemfd(10_000)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range f.Bytes() {
		f.Bytes()[i] = byte(i * 7)
	}
	want := bytes.Clone(f.Bytes())
	if err := m.WriteOpaqueMemfd(ctx, f, []int64{0, 4000, 10_000}); err != nil {
		t.Fatalf("WriteOpaqueMemfd: %v", err)
	}
	if f.Bytes() != nil {
		t.Errorf("Bytes() after sealing is not nil")
	}
	seals, err := unix.FcntlInt(uintptr(f.fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&Seals != Seals {
		t.Errorf("F_GET_SEALS = %#x, %v; want %#x set", seals, err, Seals)
	}
	if _, err := unix.Write(f.fd, []byte("x")); err == nil {
		t.Errorf("write to a sealed memfd succeeded")
	}
	s.mu.Lock()
	got := append(bytes.Clone(s.mu.outputs[m.Handle()].parts[0]), s.mu.outputs[m.Handle()].parts[1]...)
	s.mu.Unlock()
	if !bytes.Equal(got, want) {
		t.Errorf("server read %d bytes differing from the %d written", len(got), len(want))
	}
	// A memfd that is not sealed is refused by the daemon with a code.
	fd, err := createMemfd()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Write(fd, []byte("ab"))
	b := &protocol.Batch{Kind: protocol.KindOpaque, Plane: protocol.PlaneMemfd, Region: protocol.Region{Length: 2}, Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, 1, 2}}}
	if err := m.check(b); err != nil {
		t.Fatal(err)
	}
	err = m.send(ctx, b, fd)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidArgument || !strings.Contains(pe.Message, "seals") {
		t.Errorf("batch with an unsealed memfd = %v, want InvalidArgument about seals", err)
	}
}

func TestConcurrentMapOutputs(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	c := dial(t, s)
	register(t, c)
	const tasks, outputsPerTask, parts = 12, 6, 7
	var wg sync.WaitGroup
	errs := make(chan error, tasks)
	for task := range tasks {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(task), 9))
			for i := range outputsPerTask {
				plane := []DataPlane{PlaneInline, PlaneMemfd}[rng.IntN(2)]
				m, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: int64(task*100 + i), NumPartitions: parts, Kind: protocol.KindOpaque}, WithPlane(plane))
				if err != nil {
					errs <- err
					return
				}
				want := make([]int64, parts)
				for range 1 + rng.IntN(4) {
					data, offs := randomBatch(rng, parts, 2000)
					if err := m.WriteOpaque(ctx, data, offs); err != nil {
						errs <- err
						return
					}
					for p := range parts {
						want[p] += offs[p+1] - offs[p]
					}
					if rng.IntN(3) == 0 {
						if err := c.Ping(ctx); err != nil {
							errs <- err
							return
						}
					}
				}
				if rng.IntN(5) == 0 {
					if err := m.Abort(ctx); err != nil {
						errs <- err
						return
					}
					continue
				}
				res, err := m.Commit(ctx)
				if err != nil {
					errs <- err
					return
				}
				if fmt.Sprint(res.Lengths) != fmt.Sprint(want) {
					errs <- fmt.Errorf("map %d: Lengths = %v, want %v", task*100+i, res.Lengths, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := s.openOutputs(); n != 0 {
		t.Errorf("%d map outputs left open on the server", n)
	}
}

func TestResponsesOutOfOrder(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	release := make(chan struct{})
	arrived := make(chan struct{})
	s.hook = func(_ protocol.Frame, m protocol.Message) protocol.Message {
		if _, ok := m.(*protocol.Stats); ok {
			close(arrived)
			<-release
		}
		return nil
	}
	c := dial(t, s)
	statsc := make(chan error, 1)
	go func() {
		_, err := c.Stats(ctx)
		statsc <- err
	}()
	<-arrived
	// Ping is answered while Stats, sent first, is still held.
	for range 3 {
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	}
	close(release)
	if err := <-statsc; err != nil {
		t.Errorf("Stats: %v", err)
	}
}

func TestServerErrors(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	s.hook = func(_ protocol.Frame, m protocol.Message) protocol.Message {
		if b, ok := m.(*protocol.Batch); ok && len(b.Inline) == 13 {
			return protocol.Errorf(protocol.CodeResourceExhausted, "disk full writing shuffle_1_2_0.data")
		}
		return nil
	}
	c := dial(t, s)
	register(t, c)
	_, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 666, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodePermissionDenied || !strings.Contains(pe.Message, "ShuffleID 666") {
		t.Errorf("Open(shuffle 666) = %v, want PermissionDenied naming ShuffleID 666", err)
	}
	m := openOpaque(t, c, 2, 1)
	err = m.WriteOpaque(ctx, make([]byte, 13), []int64{0, 13})
	if protocol.CodeOf(err) != protocol.CodeResourceExhausted || !errors.Is(err, &protocol.Error{Code: protocol.CodeResourceExhausted}) {
		t.Errorf("WriteOpaque = %v, want ResourceExhausted", err)
	}
	// The first error sticks: nothing more is sent for this output.
	if err2 := m.WriteOpaque(ctx, make([]byte, 2), []int64{0, 2}); protocol.CodeOf(err2) != protocol.CodeResourceExhausted || !strings.Contains(err2.Error(), "earlier write failed") {
		t.Errorf("WriteOpaque after a failure = %v, want the earlier error", err2)
	}
	if _, err2 := m.Commit(ctx); !strings.Contains(fmt.Sprint(err2), "earlier write failed") {
		t.Errorf("Commit after a failure = %v, want the earlier error", err2)
	}
	if err := m.Abort(ctx); err != nil {
		t.Errorf("Abort after a failure = %v", err)
	}
	if err := m.Abort(ctx); err != nil {
		t.Errorf("Abort twice = %v", err)
	}
	// Unknown handle on the server: NotFound comes back as such.
	ghost := &MapOutput{c: c, req: protocol.OpenMapOutput{NumPartitions: 1, Kind: protocol.KindOpaque}, handle: 999}
	if _, err := ghost.Commit(ctx); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Errorf("Commit(unknown handle) = %v, want NotFound", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("Ping after errors: %v", err)
	}
}

func TestRefusedBeforeSending(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	s.hello = func(*protocol.Hello) protocol.Message {
		return &protocol.ServerHello{Version: 1, MaxFrame: protocol.MinMaxFrame, MaxInline: 1000, Features: protocol.FeatureMemfd}
	}
	var seen sync.Map
	s.hook = func(f protocol.Frame, _ protocol.Message) protocol.Message {
		seen.Store(f.ID, f.Type)
		return nil
	}
	c := dial(t, s)
	register(t, c)
	m := openOpaque(t, c, 1, 3)
	bigLayout := make([]int64, 10_001)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"inline over max_inline", m.WriteOpaque(ctx, make([]byte, 1001), []int64{0, 0, 0, 1001}), ErrTooLarge},
		{"wrong partition count", m.WriteOpaque(ctx, make([]byte, 10), []int64{0, 10}), nil},
		{"bad offsets", m.WriteOpaque(ctx, make([]byte, 10), []int64{0, 5, 4, 10}), protocol.ErrMalformed},
		{"columnar on an opaque output", m.WriteColumnar(ctx, nil, protocol.ColumnarLayout{}), nil},
		{"columnar not announced", func() error {
			_, err := c.Open(ctx, protocol.OpenMapOutput{NumPartitions: 1, Kind: protocol.KindColumnar})
			return err
		}(), ErrUnsupported},
		{"invalid open", func() error {
			_, err := c.Open(ctx, protocol.OpenMapOutput{NumPartitions: 0, Kind: protocol.KindOpaque})
			return err
		}(), protocol.ErrMalformed},
	}
	for _, tt := range tests {
		if tt.err == nil || (tt.want != nil && !errors.Is(tt.err, tt.want)) {
			t.Errorf("%s: error %v, want %v", tt.name, tt.err, tt.want)
		}
	}
	// A frame over max_frame is refused without breaking the connection.
	mbig := openOpaque(t, c, 2, int32(len(bigLayout)-1), WithPlane(PlaneMemfd))
	if err := mbig.WriteOpaque(ctx, nil, bigLayout); !errors.Is(err, ErrTooLarge) {
		t.Errorf("WriteOpaque with a layout over max_frame = %v, want ErrTooLarge", err)
	}
	n := 0
	seen.Range(func(_, v any) bool {
		if v == protocol.TypeBatch {
			n++
		}
		return true
	})
	if n != 0 {
		t.Errorf("server received %d batches, want 0", n)
	}
	// None of that broke anything: the output still commits.
	if err := m.WriteOpaque(ctx, []byte("abc"), []int64{0, 1, 2, 3}); err != nil {
		t.Fatalf("WriteOpaque: %v", err)
	}
	if _, err := m.Commit(ctx); err != nil {
		t.Errorf("Commit: %v", err)
	}
}

func TestCancel(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	release := make(chan struct{})
	arrived := make(chan struct{}, 2)
	aborted := make(chan uint64, 1)
	s.hook = func(_ protocol.Frame, m protocol.Message) protocol.Message {
		switch m := m.(type) {
		case *protocol.Stats, *protocol.OpenMapOutput:
			arrived <- struct{}{}
			<-release
		case *protocol.Abort:
			aborted <- m.Handle
		}
		return nil
	}
	c := dial(t, s)
	register(t, c)

	cctx, cancel := context.WithCancel(ctx)
	statsc := make(chan error, 1)
	go func() {
		_, err := c.Stats(cctx)
		statsc <- err
	}()
	openc := make(chan error, 1)
	go func() {
		_, err := c.Open(cctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque})
		openc <- err
	}()
	// Both requests reach the server, which holds its answers; then the
	// callers give up.
	<-arrived
	<-arrived
	cancel()
	if err := <-statsc; !errors.Is(err, context.Canceled) {
		t.Errorf("Stats with a cancelled context = %v, want context.Canceled", err)
	}
	if err := <-openc; !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled context = %v, want context.Canceled", err)
	}
	// The stream is intact, and the late answers are dropped...
	close(release)
	if err := c.Ping(ctx); err != nil {
		t.Errorf("Ping after cancellations: %v", err)
	}
	// ...except the late Opened, whose map output the client aborts.
	if h := <-aborted; h == 0 {
		t.Errorf("aborted handle 0")
	}
	if _, err := c.Stats(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Stats with a done context = %v, want context.Canceled", err)
	}
}

func TestConnectionLost(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	stop := make(chan struct{})
	held := make(chan struct{}, 8)
	s.hook = func(_ protocol.Frame, m protocol.Message) protocol.Message {
		if _, ok := m.(*protocol.Stats); ok {
			held <- struct{}{}
			<-stop
		}
		return nil
	}
	defer close(stop)
	c := dial(t, s)
	const n = 5
	errc := make(chan error, n)
	for range n {
		go func() {
			_, err := c.Stats(ctx)
			errc <- err
		}()
	}
	for range n {
		<-held
	}
	s.dropConns()
	for range n {
		if err := <-errc; !errors.Is(err, ErrConnLost) {
			t.Errorf("Stats when the connection drops = %v, want ErrConnLost", err)
		}
	}
	if err := c.Ping(ctx); !errors.Is(err, ErrConnLost) {
		t.Errorf("Ping after the connection dropped = %v, want ErrConnLost", err)
	}
	c.Close()
	if err := c.Ping(ctx); !errors.Is(err, ErrConnLost) {
		t.Errorf("Ping after Close of a lost connection = %v, want ErrConnLost (the first cause)", err)
	}
}

func TestConnectionLevelError(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	s.fatal = protocol.Errorf(protocol.CodeUnavailable, "draining")
	c := dial(t, s)
	err := c.Ping(ctx)
	var pe *protocol.Error
	if !errors.Is(err, ErrConnLost) || !errors.As(err, &pe) || pe.Code != protocol.CodeUnavailable {
		t.Errorf("Ping answered by a connection-level error = %v, want ErrConnLost with Unavailable", err)
	}
}

func TestClose(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	c := dial(t, s)
	register(t, c)
	m := openOpaque(t, c, 1, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close twice = %v", err)
	}
	if err := c.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Ping after Close = %v, want ErrClosed", err)
	}
	if err := m.WriteOpaque(ctx, []byte("a"), []int64{0, 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteOpaque after Close = %v, want ErrClosed", err)
	}
}

func TestLifecycle(t *testing.T) {
	checkGoroutines(t)
	s := newFakeServer(t)
	c := dial(t, s)
	if r, err := c.RemoveShuffle(ctx, "app-1", 4); r != (protocol.Removed{MapOutputs: 2, Bytes: 20}) || err != nil {
		t.Errorf("RemoveShuffle = %+v, %v, want 2 outputs, 20 bytes", r, err)
	}
	if r, err := c.RemoveApplication(ctx, "app-1"); r != (protocol.Removed{MapOutputs: 3, Bytes: 30}) || err != nil {
		t.Errorf("RemoveApplication = %+v, %v, want 3 outputs, 30 bytes", r, err)
	}
	if list, err := c.ListShuffles(ctx, "app-1"); fmt.Sprint(list) != "[{1 1 10} {4 2 20}]" || err != nil {
		t.Errorf("ListShuffles = %v, %v", list, err)
	}
	if _, err := c.RemoveShuffle(ctx, "../x", 1); !errors.Is(err, protocol.ErrMalformed) {
		t.Errorf("RemoveShuffle(../x) = %v, want ErrMalformed", err)
	}
	if st, err := c.Stats(ctx); err != nil || len(st) != 1 || st[0].Name != "open_map_outputs" {
		t.Errorf("Stats = %v, %v", st, err)
	}
}
