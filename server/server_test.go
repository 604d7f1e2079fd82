package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
)

// daemon is a server on a temp socket and root.
type daemon struct {
	s      *Server
	socket string
	root   string
	done   chan error
}

func startDaemon(t *testing.T, mutate func(*Config), opts ...Option) *daemon {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{
		SocketPath: filepath.Join(dir, "s.sock"),
		Root:       filepath.Join(dir, "root"),
		LimitBytes: 4 << 20,
		PoolSize:   2,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	return startDaemonWith(t, cfg, opts...)
}

func startDaemonWith(t *testing.T, cfg Config, opts ...Option) *daemon {
	t.Helper()
	s, err := New(cfg, append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := unixsock.Listen(cfg.SocketPath, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{s: s, socket: cfg.SocketPath, root: cfg.Root, done: make(chan error, 1)}
	go func() { d.done <- s.Serve(ln) }()
	t.Cleanup(func() { d.stop(t) })
	return d
}

func (d *daemon) stop(t *testing.T) {
	if d.s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-d.done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if st := d.s.Engine().Limiter().Stats(); st.InFlight != 0 {
		t.Errorf("limiter holds %d bytes after shutdown", st.InFlight)
	}
	d.s = nil
}

func dial(t *testing.T, d *daemon, app string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, d.socket, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: app, ExecutorID: "1"}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return c
}

func readOutput(t *testing.T, l shufflefile.Layout, id shufflefile.ID, k codec.Kind) [][]byte {
	t.Helper()
	mo, err := shufflefile.Open(vfs.Default, l, id, 1 /* ADLER32, the default */)
	if err != nil {
		t.Fatalf("Open %v: %v", id, err)
	}
	defer mo.Close()
	if err := mo.Verify(); err != nil {
		t.Fatalf("Verify %v: %v", id, err)
	}
	out := make([][]byte, mo.NumPartitions())
	for p := range out {
		raw, err := mo.ReadPartition(p)
		if err != nil {
			t.Fatal(err)
		}
		if out[p], err = codec.Decode(k, nil, raw); err != nil {
			t.Fatalf("%v partition %d: %v", id, p, err)
		}
	}
	return out
}

// TestOpaqueRoundTrip writes opaque batches through the socket, inline and
// memfd, every codec, from concurrent clients of two applications that use
// the same shuffle and map ids.
func TestOpaqueRoundTrip(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, app := range []string{"app-a", "app-b"} {
		for _, plane := range []client.DataPlane{client.PlaneInline, client.PlaneMemfd} {
			for _, k := range []codec.Kind{codec.None, codec.LZ4, codec.Zstd, codec.Snappy} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := dial(t, d, app)
					mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: int64(k)*10 + int64(plane), NumPartitions: 3, Kind: protocol.KindOpaque, Codec: k.String()}, client.WithPlane(plane))
					if err != nil {
						t.Errorf("Open: %v", err)
						return
					}
					want := make([][]byte, 3)
					for b := range 3 {
						parts := [][]byte{[]byte(fmt.Sprintf("%s-%d-p0", app, b)), nil, bytes.Repeat([]byte(app), 1000*b)}
						var data []byte
						offsets := []int64{0}
						for p, part := range parts {
							data = append(data, part...)
							offsets = append(offsets, int64(len(data)))
							want[p] = append(want[p], part...)
						}
						if err := mo.WriteOpaque(ctx, data, offsets); err != nil {
							t.Errorf("WriteOpaque: %v", err)
							return
						}
					}
					res, err := mo.Commit(ctx)
					if err != nil {
						t.Errorf("Commit: %v", err)
						return
					}
					// Batch 0 writes partition 0 only, so batch 1 continues its run.
					if res.Runs != 2 {
						t.Errorf("Runs = %d, want 2", res.Runs)
					}
					id := shufflefile.ID{Shuffle: 1, Map: int64(k)*10 + int64(plane)}
					got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, app, "1")), id, k)
					for p := range want {
						if !bytes.Equal(got[p], want[p]) {
							t.Errorf("%s %v %v partition %d: got %q, want %q", app, plane, k, p, got[p], want[p])
						}
					}
				}()
			}
		}
	}
	wg.Wait()
}

// TestColumnarRoundTrip writes columnar batches and decodes the blocks.
func TestColumnarRoundTrip(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	raw, err := synth.Generate("lineitem", 3, 2000, synth.WithNulls(0.05))
	if err != nil {
		t.Fatal(err)
	}
	b, err := partition.Partition(raw, []int{0}, 16)
	if err != nil {
		t.Fatal(err)
	}
	payload, layout := columnar.Append(nil, b)
	for _, plane := range []client.DataPlane{client.PlaneInline, client.PlaneMemfd} {
		c := dial(t, d, "app")
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 2, MapID: int64(plane), NumPartitions: 16, Kind: protocol.KindColumnar, Codec: "zstd"}, client.WithPlane(plane))
		if err != nil {
			t.Fatal(err)
		}
		if err := mo.WriteColumnar(ctx, payload, layout); err != nil {
			t.Fatalf("WriteColumnar: %v", err)
		}
		if _, err := mo.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "app", "1")), shufflefile.ID{Shuffle: 2, Map: int64(plane)}, codec.Zstd)
		for p := range 16 {
			start, end := b.PartitionRows(p)
			var want []byte
			if start < end {
				want = partition.AppendBlock(nil, b, start, end)
			}
			if !bytes.Equal(got[p], want) {
				t.Fatalf("%v partition %d: %d bytes, want %d", plane, p, len(got[p]), len(want))
			}
		}
	}
}

// TestBadRequests sends requests a client can get wrong; each gets an error
// naming what is wrong, aborts only its map output, and the daemon serves on.
func TestBadRequests(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, func(c *Config) { c.AllowedRoots = []string{t.TempDir()} })
	ctx := context.Background()
	c := dial(t, d, "app")
	good, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 5, MapID: 1, NumPartitions: 2, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatal(err)
	}
	if err := good.WriteOpaque(ctx, []byte("kept"), []int64{0, 4, 4}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		req  protocol.OpenMapOutput
		code protocol.Code
	}{
		{"unknown codec", protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 2, Kind: protocol.KindOpaque, Codec: "brotli"}, protocol.CodeUnsupported},
		{"unknown checksum", protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 2, Kind: protocol.KindOpaque, Checksum: "MD5"}, protocol.CodeUnsupported},
	} {
		_, err := c.Open(ctx, tc.req)
		if protocol.CodeOf(err) != tc.code {
			t.Errorf("%s: Open = %v, want code %v", tc.name, err, tc.code)
		}
	}

	// Columnar data with a string offset past its chars buffer.
	bad, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 5, MapID: 2, NumPartitions: 1, Kind: protocol.KindColumnar})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 64+8)
	copy(payload, []byte{0, 0, 0, 0, 99, 0, 0, 0}) // offsets 0, 99 for one row
	layout := protocol.ColumnarLayout{Rows: 1, PartitionRows: []int64{0, 1}, Columns: []protocol.Column{{
		Type: protocol.TypeString, Name: "s",
		Offsets: protocol.Buffer{Offset: 0, Length: 8},
		Data:    protocol.Buffer{Offset: 64, Length: 8},
	}}}
	err = bad.WriteColumnar(ctx, payload, layout)
	if protocol.CodeOf(err) != protocol.CodeInvalidArgument {
		t.Errorf("columnar batch with an offset past its data = %v, want InvalidArgument", err)
	}
	if _, err := bad.Commit(ctx); err == nil {
		t.Errorf("Commit after a failed batch succeeded")
	}

	// A local dir outside the allowed roots, and one reached by a symlink
	// that leaves them.
	c2, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	outside := t.TempDir()
	if _, err := c2.Register(ctx, protocol.RegisterExecutor{AppID: "x", ExecutorID: "1", LocalDirs: []string{outside}, SubDirs: 64}); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Errorf("Register outside the allowed roots = %v, want PermissionDenied", err)
	}
	link := filepath.Join(d.s.roots[0], "escape")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Register(ctx, protocol.RegisterExecutor{AppID: "x", ExecutorID: "1", LocalDirs: []string{link}, SubDirs: 64}); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Errorf("Register through an escaping symlink = %v, want PermissionDenied", err)
	}

	// The first map output is unaffected.
	if _, err := good.Commit(ctx); err != nil {
		t.Fatalf("Commit of the good map output: %v", err)
	}
	got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "app", "1")), shufflefile.ID{Shuffle: 5, Map: 1}, codec.LZ4)
	if string(got[0]) != "kept" {
		t.Errorf("good output partition 0 = %q, want %q", got[0], "kept")
	}
}

// TestSparkLocalDirs registers Spark local dirs and checks that files land
// where Spark's hashing puts them.
func TestSparkLocalDirs(t *testing.T) {
	allowed := t.TempDir()
	dirs := []string{filepath.Join(allowed, "blockmgr-a"), filepath.Join(allowed, "blockmgr-b")}
	for _, dir := range dirs {
		if err := os.Mkdir(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, func(c *Config) { c.AllowedRoots = []string{allowed} })
	ctx := context.Background()
	c, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "spark", ExecutorID: "7", LocalDirs: dirs, SubDirs: 64}); err != nil {
		t.Fatal(err)
	}
	for m := range int64(8) {
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 3, MapID: m, NumPartitions: 2, Kind: protocol.KindOpaque})
		if err != nil {
			t.Fatal(err)
		}
		if err := mo.WriteOpaque(ctx, []byte("ab"), []int64{0, 1, 2}); err != nil {
			t.Fatal(err)
		}
		if _, err := mo.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		id := shufflefile.ID{Shuffle: 3, Map: m}
		for _, name := range []string{shufflefile.DataName(id), shufflefile.IndexName(id)} {
			h := javaHash(name)
			want := filepath.Join(dirs[h%2], fmt.Sprintf("%02x", (h/2)%64), name)
			if _, err := os.Stat(want); err != nil {
				t.Errorf("%s not at %s: %v", name, want, err)
			}
		}
	}
}

// TestLocalDirBelongsToOneApp refuses a registration naming local dirs
// that another application registered.
func TestLocalDirBelongsToOneApp(t *testing.T) {
	allowed := t.TempDir()
	dir := filepath.Join(allowed, "blockmgr-a")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, func(c *Config) { c.AllowedRoots = []string{allowed} })
	ctx := context.Background()
	for i, app := range []string{"first", "second"} {
		c, err := client.Dial(ctx, d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.Register(ctx, protocol.RegisterExecutor{AppID: app, ExecutorID: "1", LocalDirs: []string{dir}, SubDirs: 64})
		if i == 0 && err != nil {
			t.Fatalf("Register(first) = %v", err)
		}
		if i == 1 && protocol.CodeOf(err) != protocol.CodePermissionDenied {
			t.Errorf("Register(second) with the first's local dir = %v, want PermissionDenied", err)
		}
	}
}

// javaHash is Java's String.hashCode made non-negative as Spark's
// Utils.nonNegativeHash does, written out here independently of
// shufflefile.
func javaHash(s string) int {
	var h int32
	for _, r := range s {
		h = 31*h + int32(r)
	}
	if h == -1<<31 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return int(h)
}

// TestDisconnectAborts drops a connection with an open map output: nothing
// is committed and its quota is released.
func TestDisconnectAborts(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	c := dial(t, d, "app")
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 9, MapID: 9, NumPartitions: 1, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatal(err)
	}
	if err := mo.WriteOpaque(ctx, bytes.Repeat([]byte("x"), 100000), []int64{0, 100000}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Another client's request is answered after the session ended.
	c2 := dial(t, d, "app2")
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := c2.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var open int64 = -1
		for _, s := range st {
			if s.Name == "open_map_outputs" {
				open = s.Value
			}
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("open_map_outputs = %d 5s after the client left, want 0", open)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ents, _ := os.ReadDir(filepath.Join(d.root, "app", "1"))
	if len(ents) != 0 {
		t.Errorf("%d files left after the client disconnected, want 0", len(ents))
	}
}

// TestHostileFrames sends frames a broken client could send.
func TestHostileFrames(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"bad magic", []byte("XXXXXXXXXXXXXXXXXXXX")},
		{"absurd length", protocol.Header{Type: protocol.TypeHello, ID: 1, Length: 1 << 31}.Append(nil)},
		{"truncated", protocol.Header{Type: protocol.TypeHello, ID: 1, Length: 100}.Append(nil)[:10]},
		{"not hello first", mustFrame(t, 1, &protocol.Ping{})},
		{"unknown version", mustFrame(t, 1, &protocol.Hello{MinVersion: 7, MaxVersion: 9, Client: "x"})},
	} {
		conn, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(tc.frame)
		conn.(*net.UnixConn).CloseWrite()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		rest, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Errorf("%s: the daemon did not close the connection: %v", tc.name, err)
		}
		_ = rest
	}
	// Unknown type after the handshake: an Unsupported error, the
	// connection stays usable.
	c := dial(t, d, "app")
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("Ping after hostile clients: %v", err)
	}
}

func mustFrame(t *testing.T, id uint32, m protocol.Message) []byte {
	t.Helper()
	b, err := protocol.AppendFrame(nil, id, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCancelledWriteKeepsMapOutput cancels a write before it is sent: the
// map output stays usable and commits what is written after.
func TestCancelledWriteKeepsMapOutput(t *testing.T) {
	d := startDaemon(t, nil)
	c := dial(t, d, "app")
	ctx := context.Background()
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := mo.WriteOpaque(cancelled, []byte("lost"), []int64{0, 4}); !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteOpaque with a cancelled context = %v, want context.Canceled", err)
	}
	if err := mo.WriteOpaque(ctx, []byte("kept"), []int64{0, 4}); err != nil {
		t.Fatalf("WriteOpaque after a cancelled one: %v", err)
	}
	if _, err := mo.Commit(ctx); err != nil {
		t.Fatalf("Commit after a cancelled write: %v", err)
	}
	got := readOutput(t, shufflefile.Flat(filepath.Join(d.root, "app", "1")), shufflefile.ID{Shuffle: 1, Map: 1}, codec.LZ4)
	if string(got[0]) != "kept" {
		t.Errorf("partition 0 = %q, want %q", got[0], "kept")
	}
}

// TestBatchPartitionCount sends, frame by frame as any client may (the Go
// client refuses such batches itself), batches whose partition count is
// not the map output's: FailedPrecondition naming the field and both
// counts, and only that map output is aborted.
func TestBatchPartitionCount(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	conn := dialRaw(t, d)
	conn.handshake("app")
	id := uint32(2)
	call := func(m protocol.Message) (protocol.Message, error) {
		t.Helper()
		id++
		_, resp := conn.call(id, m)
		if e, ok := resp.(*protocol.Error); ok {
			return nil, e
		}
		return resp, nil
	}
	open := func(mapID int64, kind protocol.PayloadKind) uint64 {
		t.Helper()
		r, err := call(&protocol.OpenMapOutput{ShuffleID: 1, MapID: mapID, NumPartitions: 2, Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		return r.(*protocol.Opened).Handle
	}
	good := open(0, protocol.KindOpaque)
	for i, tc := range []struct {
		batch  protocol.Batch
		substr string
	}{
		{protocol.Batch{Kind: protocol.KindOpaque, Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, 1, 2, 3}}, Inline: []byte("abc")},
			"Batch.partition_offsets has 4 entries (3 partitions), but the map output was opened with num_partitions 2, want 3 entries"},
		{protocol.Batch{Kind: protocol.KindOpaque, Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, 3}}, Inline: []byte("abc")},
			"Batch.partition_offsets has 2 entries (1 partitions), but the map output was opened with num_partitions 2, want 3 entries"},
		{protocol.Batch{Kind: protocol.KindColumnar, Columnar: protocol.ColumnarLayout{PartitionRows: []int64{0, 0, 0, 0}}},
			"Batch.partition_rows has 4 entries (3 partitions), but the map output was opened with num_partitions 2, want 3 entries"},
	} {
		h := open(int64(1+i), tc.batch.Kind)
		b := tc.batch
		b.Handle, b.Plane = h, protocol.PlaneInline
		_, err := call(&b)
		if protocol.CodeOf(err) != protocol.CodeFailedPrecondition || !strings.Contains(err.Error(), tc.substr) {
			t.Errorf("batch %d: %v, want FailedPrecondition with %q", i, err, tc.substr)
		}
		if _, err := call(&protocol.Commit{Handle: h}); protocol.CodeOf(err) != protocol.CodeAborted {
			t.Errorf("batch %d: Commit after the failed batch = %v, want Aborted", i, err)
		}
	}
	if _, err := call(&protocol.Batch{Handle: good, Kind: protocol.KindOpaque, Plane: protocol.PlaneInline,
		Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, 1, 2}}, Inline: []byte("ab")}); err != nil {
		t.Fatalf("batch of the good map output: %v", err)
	}
	r, err := call(&protocol.Commit{Handle: good})
	if err != nil {
		t.Fatalf("Commit of the good map output: %v", err)
	}
	if got := r.(*protocol.CommitResult).Lengths; len(got) != 2 || got[0] == 0 || got[1] == 0 {
		t.Errorf("good map output lengths %v, want 2 non-empty partitions", got)
	}
}
