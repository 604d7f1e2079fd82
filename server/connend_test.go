package server

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// TestCommitSurvivesHalfClose: a client that sends Commit and then shuts
// down its side of the connection (as a client does that has nothing more
// to send) still gets the CommitResult, and the map output is committed:
// the Commit took the map output before the end of the stream, so it is
// not one of the outputs still open that the connection's end aborts.
func TestCommitSurvivesHalfClose(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.PoolSize = 1 })
	r := dialRaw(t, d)
	r.handshake("app")
	_, m := r.call(3, &protocol.OpenMapOutput{ShuffleID: 1, MapID: 7, NumPartitions: 2, Kind: protocol.KindOpaque, Codec: "zstd"})
	opened, ok := m.(*protocol.Opened)
	if !ok {
		t.Fatalf("Open answered %v", m)
	}
	// Enough to keep one encoder busy well past the half-close.
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 24<<20)
	for i := range data {
		data[i] = byte(rng.IntN(16))
	}
	half := int64(len(data) / 2)
	if _, m = r.call(4, &protocol.Batch{Handle: opened.Handle, Kind: protocol.KindOpaque, Plane: protocol.PlaneInline,
		Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, half, int64(len(data))}}, Inline: data}); m.Type() != protocol.TypeBatchAccepted {
		t.Fatalf("Batch answered %v", m)
	}
	if err := protocol.WriteFrame(r.uc, 5, &protocol.Commit{Handle: opened.Handle}); err != nil {
		t.Fatal(err)
	}
	if err := r.uc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	id, m := r.read()
	if id != 5 || m.Type() != protocol.TypeCommitResult {
		t.Fatalf("Commit then half-close: response %d %v, want the CommitResult of request 5", id, m)
	}
	got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "app", "1")), shufflefile.ID{Shuffle: 1, Map: 7}, codec.Zstd)
	if !bytes.Equal(got[0], data[:half]) || !bytes.Equal(got[1], data[half:]) {
		t.Errorf("committed partitions of %d and %d bytes, want %d and %d", len(got[0]), len(got[1]), half, int64(len(data))-half)
	}
}

// TestShutdownTellsConnections: a drain that ends closes every connection
// with a connection-level Error (request id 0, Unavailable), after the
// deadline saying that open map outputs were aborted; a Commit the
// deadline cancels answers Aborted before it, and nothing is committed.
func TestShutdownTellsConnections(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		// The map output's writes wait for release: its Commit is still
		// waiting on them when the deadline passes.
		release := make(chan struct{})
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		hold := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == errorfs.OpWrite && strings.Contains(op.Path, "shuffle_1_1_0") {
				<-release
			}
			return nil
		})
		dir := t.TempDir()
		d := startDaemonWith(t, Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2},
			WithFS(errorfs.New(vfs.Default, hold)))
		t.Cleanup(unblock)
		idle := dialRaw(t, d)
		idle.handshake("idle")
		busy := dialRaw(t, d)
		busy.handshake("busy")
		if deadline {
			_, m := busy.call(3, &protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque})
			opened, ok := m.(*protocol.Opened)
			if !ok {
				t.Fatalf("Open answered %v", m)
			}
			data := bytes.Repeat([]byte("partition 0 "), 1<<16)
			if _, m := busy.call(4, &protocol.Batch{Handle: opened.Handle, Kind: protocol.KindOpaque, Plane: protocol.PlaneInline,
				Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, int64(len(data))}}, Inline: data}); m.Type() != protocol.TypeBatchAccepted {
				t.Fatalf("Batch answered %v", m)
			}
			if err := protocol.WriteFrame(busy.uc, 5, &protocol.Commit{Handle: opened.Handle}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		stopped := make(chan error, 1)
		go func() { stopped <- d.s.Shutdown(ctx) }()
		time.Sleep(400 * time.Millisecond) // past the deadline: the Commit is cancelled
		unblock()
		err := <-stopped
		cancel()
		d.s = nil // stopped
		if deadline != (err != nil) {
			t.Errorf("deadline %v: Shutdown = %v", deadline, err)
		}
		if deadline {
			if id, m := busy.read(); id != 5 || codeOfMsg(m) != protocol.CodeAborted {
				t.Errorf("the Commit the deadline cancelled answered %d %v, want Aborted for request 5", id, m)
			}
		}
		for _, r := range []*rawConn{idle, busy} {
			id, m := r.read()
			e, ok := m.(*protocol.Error)
			if id != 0 || !ok || e.Code != protocol.CodeUnavailable {
				t.Errorf("deadline %v: the connection's last frame: id %d %v, want an Unavailable Error at id 0", deadline, id, m)
				continue
			}
			if want := "aborted"; deadline != strings.Contains(e.Message, want) {
				t.Errorf("deadline %v: %q, want %q in it exactly when the deadline passed", deadline, e.Message, want)
			}
			if f, err := r.rd.ReadFrame(nil); err == nil {
				t.Errorf("deadline %v: a frame (%v) after the connection-level error", deadline, f.Type)
			}
		}
		if _, err := os.Stat(filepath.Join(d.root, "busy", "1", "shuffle_1_1_0.index")); err == nil {
			t.Errorf("deadline %v: the cancelled Commit left a committed index", deadline)
		}
	}
}

// TestConnectionBounds refuses connections past --max-connections-per-uid
// and --max-connections: the peer is told (an Error at request id 0,
// ResourceExhausted naming the bound) and closed; a connection that ends
// frees its place.
func TestConnectionBounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(*Config)
		bound     string
		connected int
	}{
		{"per uid", func(c *Config) { c.MaxConnectionsPerUID = 2 }, "--max-connections-per-uid", 2},
		{"daemon", func(c *Config) { c.MaxConnections = 3 }, "--max-connections", 3},
	} {
		d := startDaemon(t, tc.mutate)
		var open []*rawConn
		for range tc.connected {
			r := dialRaw(t, d)
			r.handshake("app")
			open = append(open, r)
		}
		over := dialRaw(t, d)
		id, m := over.read()
		if e, ok := m.(*protocol.Error); id != 0 || !ok || e.Code != protocol.CodeResourceExhausted || !strings.Contains(e.Message, tc.bound) {
			t.Errorf("%s: connection %d got %d %v, want an id-0 ResourceExhausted naming %s", tc.name, tc.connected+1, id, m, tc.bound)
		}
		open[0].uc.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if helloAnswered(dialRaw(t, d)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no connection admitted after one closed", tc.name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// helloAnswered sends a Hello on r and reports whether the daemon answered
// it with its ServerHello: false when it refused the connection, whose
// id-0 Error and close may come before the Hello is even written.
func helloAnswered(r *rawConn) bool {
	if err := protocol.WriteFrame(r.uc, 1, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "raw"}); err != nil {
		return false
	}
	r.uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := r.rd.ReadFrame(nil)
	if err != nil {
		return false
	}
	m, err := protocol.DecodeFrame(&f)
	return err == nil && m.Type() == protocol.TypeServerHello
}

// TestFrameMemory: a connection whose frame payload would exceed the
// daemon's frame memory waits (its request is not read) while another
// connection's frame holds it, and goes on once that frame is gone; a
// frame that stops arriving is cut off after frameReadTimeout, freeing its
// share.
func TestFrameMemory(t *testing.T) {
	const maxFrame = 1 << 20
	d := startDaemon(t, func(c *Config) { c.MaxFrame = maxFrame; c.FrameMemory = maxFrame },
		func(s *Server) { s.frameReadTimeout = 300 * time.Millisecond })
	batch := func(r *rawConn, id uint32, n int) []byte {
		_, m := r.call(id, &protocol.OpenMapOutput{ShuffleID: 1, MapID: int64(id), NumPartitions: 1, Kind: protocol.KindOpaque})
		opened, ok := m.(*protocol.Opened)
		if !ok {
			t.Fatalf("Open answered %v", m)
		}
		b, err := protocol.AppendFrame(nil, id+1, &protocol.Batch{Handle: opened.Handle, Kind: protocol.KindOpaque, Plane: protocol.PlaneInline,
			Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, int64(n)}}, Inline: make([]byte, n)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	stall := dialRaw(t, d)
	stall.handshake("a")
	big := batch(stall, 3, maxFrame*3/4)
	if _, err := stall.uc.Write(big[:len(big)/2]); err != nil { // the header and half the payload
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the daemon admits the stalled frame
	waiting := dialRaw(t, d)
	waiting.handshake("b")
	next := batch(waiting, 3, maxFrame/2)
	start := time.Now()
	if _, err := waiting.uc.Write(next); err != nil {
		t.Fatal(err)
	}
	if id, m := waiting.read(); id != 4 || m.Type() != protocol.TypeBatchAccepted {
		t.Fatalf("the waiting connection's Batch answered %d %v", id, m)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("the Batch was applied after %v while the stalled frame held the frame memory", waited)
	}
	// The stalled connection was closed at its frame's deadline.
	if id, m := stall.read(); id != 0 || codeOfMsg(m) != protocol.CodeInvalidArgument {
		t.Errorf("the stalled connection's last frame: %d %v, want an id-0 InvalidArgument", id, m)
	}
}

// TestHelloFrameLimit: before the handshake the daemon reads frames of at
// most helloMaxFrame bytes: a longer first frame is a framing error.
func TestHelloFrameLimit(t *testing.T) {
	d := startDaemon(t, nil)
	r := dialRaw(t, d)
	hdr := protocol.Header{Type: protocol.TypeHello, ID: 1, Length: helloMaxFrame + 1}.Append(nil)
	if _, err := r.uc.Write(hdr); err != nil {
		t.Fatal(err)
	}
	if id, m := r.read(); id != 0 || codeOfMsg(m) != protocol.CodeInvalidArgument {
		t.Errorf("a first frame of %d bytes answered %d %v, want an id-0 InvalidArgument", helloMaxFrame+1, id, m)
	}
}
