package client

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shuffled/shuffled/protocol"
	"golang.org/x/sys/unix"
)

// fakeServer speaks the protocol on a Unix socket: enough of the daemon
// for the client's tests. Each request is handled on its own goroutine,
// so responses come back in any order; a hook can replace or delay any
// answer.
type fakeServer struct {
	t     testing.TB
	path  string
	ln    *net.UnixListener
	wg    sync.WaitGroup
	start sync.Once

	// hello overrides the handshake answer when set.
	hello func(*protocol.Hello) protocol.Message
	// hook, when it returns a message, answers the request with it; nil
	// means the default handling. It may block.
	hook func(f protocol.Frame, m protocol.Message) protocol.Message
	// fatal, when set, answers a Ping with this connection-level error
	// (request id 0) and closes the connection.
	fatal *protocol.Error
	// discard drops batch bytes instead of keeping them (benchmarks).
	discard bool

	mu struct {
		sync.Mutex
		conns   []*net.UnixConn
		next    uint64
		outputs map[uint64]*fakeOutput
		aborted []uint64
	}
}

type fakeOutput struct {
	open    protocol.OpenMapOutput
	parts   [][]byte // opaque: bytes per partition; columnar: payloads appended to parts[0]
	batches int
}

// newFakeServer listens on a fresh socket; t's cleanup stops it and waits
// for its goroutines.
func newFakeServer(t testing.TB) *fakeServer {
	t.Helper()
	// A short directory: socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "shc")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, path: filepath.Join(dir, "s.sock")}
	s.mu.outputs = make(map[uint64]*fakeOutput)
	s.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: s.path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.ln.Close()
		s.dropConns()
		s.wg.Wait()
		os.RemoveAll(dir)
	})
	return s
}

// addr starts serving, once, and returns the socket path. The fields
// that configure the server must be set before the first call.
func (s *fakeServer) addr() string {
	s.start.Do(func() {
		s.wg.Add(1)
		go s.accept()
	})
	return s.path
}

// dropConns closes every connection, as a crashing daemon would.
func (s *fakeServer) dropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.mu.conns {
		c.Close()
	}
	s.mu.conns = nil
}

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.mu.conns = append(s.mu.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

type fakeConn struct {
	c   *net.UnixConn
	wmu sync.Mutex
}

func (fc *fakeConn) send(id uint32, m protocol.Message) {
	b, err := protocol.AppendFrame(nil, id, m)
	if err != nil {
		panic(fmt.Sprintf("fake server: %v", err))
	}
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	fc.c.Write(b)
}

func (s *fakeServer) serve(c *net.UnixConn) {
	defer s.wg.Done()
	defer c.Close()
	fc := &fakeConn{c: c}
	r := protocol.NewReader(c, protocol.DefaultMaxFrame)
	defer r.Close()
	f, err := r.ReadFrame(nil)
	if err != nil {
		return
	}
	m, err := protocol.DecodeFrame(&f)
	hello, ok := m.(*protocol.Hello)
	if err != nil || !ok {
		fc.send(f.ID, protocol.Errorf(protocol.CodeFailedPrecondition, "want Hello first, got %v (%v)", f.Type, err))
		return
	}
	var answer protocol.Message = &protocol.ServerHello{Version: 1, MaxFrame: protocol.DefaultMaxFrame, MaxInline: 16 << 20,
		Features: protocol.FeatureMemfd | protocol.FeatureColumnar | protocol.FeatureLifecycle, Server: "fake"}
	if s.hello != nil {
		answer = s.hello(hello)
	}
	fc.send(f.ID, answer)
	if _, ok := answer.(*protocol.Error); ok {
		return
	}
	var handlers sync.WaitGroup
	defer handlers.Wait()
	var buf []byte // reused for batches when discarding
	for {
		if !s.discard {
			buf = nil
		}
		f, err := r.ReadFrame(buf)
		if s.discard && cap(f.Payload) > cap(buf) {
			buf = f.Payload
		}
		if err != nil {
			return
		}
		m, err := protocol.DecodeFrame(&f)
		if err != nil {
			fc.send(f.ID, protocol.Errorf(protocol.CodeInvalidArgument, "%v", err))
			continue
		}
		if _, ok := m.(*protocol.Ping); ok && s.fatal != nil {
			fc.send(0, s.fatal)
			return
		}
		// Batches of one map output must be applied in order: handle them
		// here; everything else concurrently.
		if _, ok := m.(*protocol.Batch); ok {
			fc.send(f.ID, s.answer(f, m))
			continue
		}
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			fc.send(f.ID, s.answer(f, m))
		}()
	}
}

func (s *fakeServer) answer(f protocol.Frame, m protocol.Message) protocol.Message {
	if f.FD >= 0 {
		defer unix.Close(f.FD)
	}
	if s.hook != nil {
		if a := s.hook(f, m); a != nil {
			return a
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m := m.(type) {
	case *protocol.RegisterExecutor:
		return &protocol.Registered{Dirs: []string{"/fake/" + m.AppID + "/" + m.ExecutorID}}
	case *protocol.OpenMapOutput:
		if m.ShuffleID == 666 {
			return protocol.Errorf(protocol.CodePermissionDenied, "OpenMapOutput.ShuffleID %d: the number of the beast", m.ShuffleID)
		}
		s.mu.next++
		s.mu.outputs[s.mu.next] = &fakeOutput{open: *m, parts: make([][]byte, m.NumPartitions)}
		return &protocol.Opened{Handle: s.mu.next}
	case *protocol.Batch:
		o := s.mu.outputs[m.Handle]
		if o == nil {
			return protocol.Errorf(protocol.CodeNotFound, "Batch.Handle %d: no such map output", m.Handle)
		}
		payload, err := s.payload(f, m)
		if err != nil {
			delete(s.mu.outputs, m.Handle)
			return protocol.Errorf(protocol.CodeInvalidArgument, "%v", err)
		}
		o.batches++
		if s.discard {
			return &protocol.BatchAccepted{}
		}
		if m.Kind == protocol.KindColumnar {
			o.parts[0] = append(o.parts[0], payload...)
			return &protocol.BatchAccepted{}
		}
		offs := m.Opaque.PartitionOffsets
		for p := range o.parts {
			o.parts[p] = append(o.parts[p], payload[offs[p]:offs[p+1]]...)
		}
		return &protocol.BatchAccepted{}
	case *protocol.Commit:
		o := s.mu.outputs[m.Handle]
		if o == nil {
			return protocol.Errorf(protocol.CodeNotFound, "Commit.Handle %d: no such map output", m.Handle)
		}
		delete(s.mu.outputs, m.Handle)
		res := &protocol.CommitResult{Runs: int32(o.batches)}
		for _, p := range o.parts {
			res.Lengths = append(res.Lengths, int64(len(p)))
		}
		return res
	case *protocol.Abort:
		if s.mu.outputs[m.Handle] == nil {
			return protocol.Errorf(protocol.CodeNotFound, "Abort.Handle %d: no such map output", m.Handle)
		}
		delete(s.mu.outputs, m.Handle)
		s.mu.aborted = append(s.mu.aborted, m.Handle)
		return &protocol.Aborted{}
	case *protocol.Ping:
		return &protocol.Pong{}
	case *protocol.Stats:
		return &protocol.StatsResult{Stats: []protocol.Stat{{Name: "open_map_outputs", Value: int64(len(s.mu.outputs))}}}
	case *protocol.RemoveShuffle:
		return &protocol.ShuffleRemoved{Removed: protocol.Removed{MapOutputs: 2, Bytes: 20}}
	case *protocol.RemoveApplication:
		return &protocol.ApplicationRemoved{Removed: protocol.Removed{MapOutputs: 3, Bytes: 30}}
	case *protocol.ListShuffles:
		return &protocol.ShuffleList{Shuffles: []protocol.ShuffleInfo{{ShuffleID: 1, MapOutputs: 1, Bytes: 10}, {ShuffleID: 4, MapOutputs: 2, Bytes: 20}}}
	}
	return protocol.Errorf(protocol.CodeUnsupported, "%v", f.Type)
}

// payload returns a batch's bytes; for a memfd it checks the seals and
// maps the region read-only, as the daemon must.
func (s *fakeServer) payload(f protocol.Frame, b *protocol.Batch) ([]byte, error) {
	if b.Plane == protocol.PlaneInline {
		return b.Inline, nil
	}
	seals, err := unix.FcntlInt(uintptr(f.FD), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("F_GET_SEALS: %w", err)
	}
	const need = unix.F_SEAL_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	if seals&need != need {
		return nil, fmt.Errorf("memfd seals %#x lack %#x", seals, need&^seals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f.FD, &st); err != nil {
		return nil, err
	}
	if end := b.Region.Offset + b.Region.Length; st.Size < end {
		return nil, fmt.Errorf("memfd of %d bytes, region ends at %d", st.Size, end)
	}
	if b.Region.Length == 0 {
		return nil, nil
	}
	mem, err := unix.Mmap(f.FD, b.Region.Offset, int(b.Region.Length), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	defer unix.Munmap(mem)
	if s.discard {
		var sum byte
		for i := 0; i < len(mem); i += 4096 {
			sum += mem[i] // touch every page, as a compressor would
		}
		return nil, nil
	}
	return bytes.Clone(mem), nil
}

func (s *fakeServer) abortedHandles() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.mu.aborted...)
}

func (s *fakeServer) openOutputs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.outputs)
}

// checkGoroutines fails t if, when it ends, goroutines started during the
// test are still running after a bounded wait. It is called first in a
// test, so its cleanup runs last.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := goroutineIDs()
	t.Cleanup(func() {
		var leaked []string
		for wait := time.Millisecond; wait < 5*time.Second; wait *= 2 {
			leaked = leaked[:0]
			for id, stack := range goroutineStacks() {
				if !before[id] {
					leaked = append(leaked, stack)
				}
			}
			if len(leaked) == 0 {
				return
			}
			time.Sleep(wait)
		}
		t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	})
}

func goroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for id := range goroutineStacks() {
		ids[id] = true
	}
	return ids
}

// goroutineStacks returns, by id, the stacks of live goroutines running
// this module's code.
func goroutineStacks() map[string]string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "github.com/shuffled/shuffled/") {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		out[id] = g
	}
	return out
}

func dial(t *testing.T, s *fakeServer, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(context.Background(), s.addr(), opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
