package blockserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

func TestFetchShuffleBlocks(t *testing.T) {
	defer leakcheck.Check(t)
	st := newFakeStore(t)
	p1 := st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 3, Map: 7}, "alpha", "", "gamma-gamma", "d")
	p2 := st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 3, Map: 9}, "one", "two", "three", "four")
	_, addr := startServer(t, Config{Store: st})
	c := dial(t, addr)

	// One block per reduce id, over two map outputs.
	got, err := fetchAll(t, c, (&FetchShuffleBlocks{AppID: "app-1", ExecID: "1", ShuffleID: 3,
		MapIDs: []int64{7, 9}, ReduceIDs: [][]int32{{0, 2}, {1, 3}}}).Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{p1[0], p1[2], p2[1], p2[3]}
	if len(got) != len(want) {
		t.Fatalf("got %d blocks, want %d", len(got), len(want))
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("block %d = %q, want %q", i, got[i], want[i])
		}
	}

	// Batch fetch: contiguous reduce ranges, one segment each.
	got, err = fetchAll(t, c, (&FetchShuffleBlocks{AppID: "app-1", ExecID: "1", ShuffleID: 3,
		MapIDs: []int64{7, 9}, ReduceIDs: [][]int32{{1, 4}, {0, 2}}, Batch: true}).Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0]) != p1[1]+p1[2]+p1[3] || string(got[1]) != p2[0]+p2[1] {
		t.Errorf("batch blocks = %q, want %q and %q", got, p1[1]+p1[2]+p1[3], p2[0]+p2[1])
	}

	// OpenBlocks with block ids, single and batch.
	got, err = fetchAll(t, c, (&OpenBlocks{AppID: "app-1", ExecID: "1",
		BlockIDs: []string{"shuffle_3_9_2", "shuffle_3_7_0_3"}}).Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0]) != p2[2] || string(got[1]) != p1[0]+p1[1]+p1[2] {
		t.Errorf("OpenBlocks blocks = %q", got)
	}
	// The last chunk's stream ends just after its bytes are sent.
	waitFor(t, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.open == 0
	})
}

func TestFetchFailures(t *testing.T) {
	st := newFakeStore(t)
	st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "aa", "bb")
	m := metrics.NewServing()
	_, addr := startServer(t, Config{Store: st, Metrics: m})
	c := dial(t, addr)

	rpcFails := []struct {
		name string
		msg  []byte
		want string
	}{
		{"unknown executor", (&FetchShuffleBlocks{AppID: "app-1", ExecID: "2", MapIDs: []int64{1}, ReduceIDs: [][]int32{{0}}}).Append(nil), "unknown executor"},
		{"path in app id", (&OpenBlocks{AppID: "a/../x", ExecID: "1", BlockIDs: []string{"shuffle_0_1_0"}}).Append(nil), "contains '/'"},
		{"dot app id", (&OpenBlocks{AppID: "..", ExecID: "1", BlockIDs: []string{"shuffle_0_1_0"}}).Append(nil), "app_id"},
		{"rdd block", (&OpenBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{"rdd_1_2"}}).Append(nil), "only shuffle blocks"},
		{"two shuffles", (&OpenBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{"shuffle_0_1_0", "shuffle_1_1_0"}}).Append(nil), "one stream reads one shuffle"},
		{"empty batch range", (&FetchShuffleBlocks{AppID: "app-1", ExecID: "1", MapIDs: []int64{1}, ReduceIDs: [][]int32{{1, 1}}, Batch: true}).Append(nil), "not a range"},
		{"unsupported message", []byte{MsgUploadBlock, 0, 0}, "UploadBlock"},
		{"unknown message", []byte{77}, "unknown block-transfer message type 77"},
		{"truncated message", (&OpenBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{"shuffle_0_1_0"}}).Append(nil)[:12], "truncated"},
	}
	for _, tc := range rpcFails {
		_, err := c.RPC(tc.msg)
		var re *RemoteError
		if !errors.As(err, &re) || !strings.Contains(re.Msg, tc.want) {
			t.Errorf("%s: RPC error %v, want a RemoteError containing %q", tc.name, err, tc.want)
		}
	}

	// A map output not committed, a partition past its end, and chunks
	// out of order fail the chunk, not the connection.
	sid, n, err := c.Open((&FetchShuffleBlocks{AppID: "app-1", ExecID: "1", MapIDs: []int64{5, 1, 1}, ReduceIDs: [][]int32{{0}, {7}, {1}}}).Append(nil))
	if err != nil || n != 3 {
		t.Fatalf("Open = %d chunks, %v", n, err)
	}
	if _, err := c.FetchChunk(sid, 1, io.Discard); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Errorf("chunk 1 first: %v, want out of order", err)
	}
	if _, err := c.FetchChunk(sid, 0, io.Discard); err == nil || !strings.Contains(err.Error(), "not committed") {
		t.Errorf("uncommitted map output: %v", err)
	}
	if _, err := c.FetchChunk(sid, 1, io.Discard); err == nil || !strings.Contains(err.Error(), "2 partitions") {
		t.Errorf("partition out of range: %v", err)
	}
	var b bytes.Buffer
	if _, err := c.FetchChunk(sid, 2, &b); err != nil || b.String() != "bb" {
		t.Errorf("chunk 2 = %q, %v", b.String(), err)
	}
	if _, err := c.FetchChunk(sid, 2, io.Discard); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("fetch after the stream's end: %v", err)
	}
	if got := value(m.FetchFailures.WithLabelValues(metrics.FetchNotFound)); got < 2 {
		t.Errorf("not_found failures = %v, want >= 2", got)
	}
}

func TestAuthorization(t *testing.T) {
	st := newFakeStore(t)
	st.secrets["secret-app"] = []byte("s3cret")
	st.secrets["other-app"] = []byte("other")
	parts := st.commit(t, "secret-app", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "private", "data")
	st.commit(t, "open-app", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "public")
	st.commit(t, "other-app", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "others")
	m := metrics.NewServing()
	_, addr := startServer(t, Config{Store: st, Handshake: newFakeAuth(false), Metrics: m})
	fetch := func(app string) []byte {
		return (&FetchShuffleBlocks{AppID: app, ExecID: "1", MapIDs: []int64{1}, ReduceIDs: [][]int32{{0}}}).Append(nil)
	}

	// No handshake: the app without a secret is served, the other not.
	c := dial(t, addr)
	if got, err := fetchAll(t, c, fetch("open-app")); err != nil || string(got[0]) != "public" {
		t.Errorf("open-app unauthenticated = %q, %v", got, err)
	}
	if _, err := fetchAll(t, c, fetch("secret-app")); err == nil || !strings.Contains(err.Error(), "requires authentication") {
		t.Errorf("secret-app unauthenticated: %v, want refused", err)
	}

	// A wrong secret: refused, connection closed.
	c = dial(t, addr)
	if _, err := c.RPC(fakeAuthMessage("secret-app", []byte("wrong"))); err == nil {
		t.Error("wrong secret accepted")
	}
	if _, err := c.RPC(fetch("open-app")); err == nil {
		t.Error("connection still served after a refused handshake")
	}

	// Authenticated for secret-app: its blocks, no other app's.
	c = dial(t, addr)
	if _, err := c.RPC(fakeAuthMessage("secret-app", []byte("s3cret"))); err != nil {
		t.Fatal(err)
	}
	if got, err := fetchAll(t, c, fetch("secret-app")); err != nil || string(got[0]) != parts[0] {
		t.Errorf("secret-app authenticated = %q, %v", got, err)
	}
	for _, app := range []string{"other-app", "open-app"} {
		if _, err := c.RPC(fetch(app)); err == nil || !strings.Contains(err.Error(), "authenticated for application") {
			t.Errorf("%s on a connection of secret-app: %v, want refused", app, err)
		}
	}
	if _, err := c.RPC((&RemoveOutputs{AppID: "other-app", ShuffleID: -1}).Append(nil)); err == nil {
		t.Error("removal of another app's outputs accepted")
	}
	if got := value(m.AuthFailures); got != 1 {
		t.Errorf("auth failures = %v, want 1", got)
	}
}

func TestRequireAuth(t *testing.T) {
	st := newFakeStore(t)
	st.commit(t, "open-app", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "public")
	_, addr := startServer(t, Config{Store: st, Handshake: newFakeAuth(false), RequireAuth: true})
	c := dial(t, addr)
	_, err := c.RPC((&FetchShuffleBlocks{AppID: "open-app", ExecID: "1", MapIDs: []int64{1}, ReduceIDs: [][]int32{{0}}}).Append(nil))
	if err == nil || !strings.Contains(err.Error(), "authentication required") {
		t.Errorf("unauthenticated fetch with --serve-require-auth: %v", err)
	}
	if _, err := c.ReadFrame(); err == nil {
		t.Error("connection not closed after a request without authentication")
	}
	// An app without a secret cannot authenticate at all.
	c = dial(t, addr)
	if _, err := c.RPC(fakeAuthMessage("open-app", nil)); err == nil {
		t.Error("handshake of an application without a secret accepted")
	}
}

func TestEncryptedFetch(t *testing.T) {
	st := newFakeStore(t)
	secret := []byte("k3y-of-the-app")
	st.secrets["enc-app"] = secret
	big := strings.Repeat("0123456789abcdef", 100_000) // 1.6 MB: several send buffers
	parts := st.commit(t, "enc-app", "1", shufflefile.ID{Shuffle: 2, Map: 4}, "x", big, "z")
	_, addr := startServer(t, Config{Store: st, Handshake: newFakeAuth(true), Limits: Limits{SendBuffer: 64 << 10}})
	c := dial(t, addr)
	if _, err := c.RPC(fakeAuthMessage("enc-app", secret)); err != nil {
		t.Fatal(err)
	}
	c.Wrap(&xorReader{r: c.Conn(), xorStream: xorStream{key: secret}}, &clientXORWriter{w: c.Conn(), xorStream: xorStream{key: secret}})
	got, err := fetchAll(t, c, (&FetchShuffleBlocks{AppID: "enc-app", ExecID: "1", ShuffleID: 2,
		MapIDs: []int64{4, 4}, ReduceIDs: [][]int32{{0, 3}, {1, 2}}, Batch: true}).Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0]) != parts[0]+parts[1]+parts[2] || string(got[1]) != parts[1] {
		t.Errorf("encrypted blocks differ (lengths %d)", len(got))
	}
}

func TestDiagnoseCorruption(t *testing.T) {
	st := newFakeStore(t)
	parts := st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 1, Map: 2}, "first partition", "second partition")
	_, addr := startServer(t, Config{Store: st})
	c := dial(t, addr)
	sum := int64(checksum.Adler32.Update(checksum.Adler32.Empty(), []byte(parts[1])))
	diag := func(alg string, reader int64) Cause {
		t.Helper()
		body, err := c.RPC((&DiagnoseCorruption{AppID: "app-1", ExecID: "1", ShuffleID: 1, MapID: 2, ReduceID: 1, Checksum: reader, Algorithm: alg}).Append(nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(body) != 2 || body[0] != MsgCorruptionCause {
			t.Fatalf("CorruptionCause body % x", body)
		}
		return Cause(body[1])
	}
	for _, tc := range []struct {
		alg    string
		reader int64
		want   Cause
	}{
		{"ADLER32", sum, CauseChecksumVerifyPass},
		{"ADLER32", sum + 1, CauseNetworkIssue},
		{"CRC32", sum, CauseUnknownIssue}, // no CRC32 checksum file
		{"MD5", sum, CauseUnsupportedChecksumAlgorithm},
	} {
		if got := diag(tc.alg, tc.reader); got != tc.want {
			t.Errorf("diagnose %s %d = %v, want %v", tc.alg, tc.reader, got, tc.want)
		}
	}
	// A flipped byte in the data file: the disk.
	path := shufflefile.Path(shufflefile.Flat(st.execDir("app-1", "1")), shufflefile.DataName(shufflefile.ID{Shuffle: 1, Map: 2}))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(parts[0])+3] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := diag("ADLER32", sum); got != CauseDiskIssue {
		t.Errorf("diagnose after a flipped byte = %v, want DISK_ISSUE", got)
	}
}

func TestLocalDirsAndRemoval(t *testing.T) {
	st := newFakeStore(t)
	st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "a")
	st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 0, Map: 2}, "b")
	_, addr := startServer(t, Config{Store: st})
	c := dial(t, addr)
	body, err := c.RPC((&GetLocalDirsForExecutors{AppID: "app-1", ExecIDs: []string{"1"}}).Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	ld, err := DecodeLocalDirs(body)
	if err != nil || len(ld.Dirs) != 1 || ld.Dirs[0][0] != st.execDir("app-1", "1") {
		t.Errorf("LocalDirsForExecutors = %+v, %v", ld, err)
	}
	if _, err := c.RPC((&GetLocalDirsForExecutors{AppID: "app-1", ExecIDs: []string{"1", "9"}}).Append(nil)); err == nil {
		t.Error("local dirs of an unknown executor answered")
	}

	body, err = c.RPC((&RemoveBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{
		"shuffle_0_1_0.data", "shuffle_0_1_0.index", "shuffle_0_3_0.data", "rdd_1_1"}}).Append(nil))
	if err != nil || !bytes.Equal(body, AppendBlocksRemoved(nil, 2)) {
		t.Errorf("RemoveBlocks = % x, %v; want 2 removed", body, err)
	}
	if _, err := fetchAll(t, c, (&OpenBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{"shuffle_0_1_0"}}).Append(nil)); err == nil {
		t.Error("removed map output still served")
	}
	if got, err := fetchAll(t, c, (&OpenBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{"shuffle_0_2_0"}}).Append(nil)); err != nil || string(got[0]) != "b" {
		t.Errorf("other map output = %q, %v", got, err)
	}
	body, err = c.RPC((&RemoveOutputs{AppID: "app-1", ShuffleID: -1}).Append(nil))
	st.mu.Lock()
	removed := st.removed
	st.mu.Unlock()
	if err != nil || !bytes.Equal(body, AppendRemoved(nil, 3, 300)) || len(removed) != 1 || removed[0] != "app-1/-1" {
		t.Errorf("RemoveOutputs = % x, %v, store saw %v", body, err, removed)
	}
}

// TestHostileFrames: what is not a frame closes the connection; what is a
// frame of a message not served is answered; the server keeps serving.
func TestHostileFrames(t *testing.T) {
	defer leakcheck.Check(t)
	st := newFakeStore(t)
	st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "fine")
	m := metrics.NewServing()
	s, addr := startServer(t, Config{Store: st, Metrics: m})

	closes := map[string][]byte{
		"garbage":          []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"huge length":      binary.BigEndian.AppendUint64(nil, 1<<62),
		"negative length":  binary.BigEndian.AppendUint64(nil, 1<<63),
		"length too short": binary.BigEndian.AppendUint64(nil, 8),
		"unknown type":     append(binary.BigEndian.AppendUint64(nil, 9), 99),
		"response type":    AppendRpcFailure(nil, 1, "x"),
		"bad body size":    append(binary.BigEndian.AppendUint64(nil, 8+1+12+2), TypeRpcRequest, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 1, 2),
		"upload stream":    append(binary.BigEndian.AppendUint64(nil, 8+1+8+4+8), TypeUploadStream, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5),
	}
	for name, b := range closes {
		c := dial(t, addr)
		if err := c.Send(b); err != nil {
			t.Fatal(err)
		}
		c.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, err := c.ReadFrame()
			if err == nil {
				continue // an answer before the close (UploadStream's RpcFailure)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("%s: connection still open", name)
			}
			break
		}
	}
	if got := value(m.ConnectionsClosed.WithLabelValues(metrics.CloseMalformed)); got != float64(len(closes)) {
		t.Errorf("connections closed as malformed = %v, want %d", got, len(closes))
	}

	// Messages Spark defines but this server does not serve are
	// answered, and the connection goes on.
	c := dial(t, addr)
	if err := c.Send(append(binary.BigEndian.AppendUint64(nil, 8+1+4+3), TypeStreamRequest, 0, 0, 0, 3, 'a', 'b', 'c')); err != nil {
		t.Fatal(err)
	}
	if r, err := c.ReadFrame(); err != nil || r.Type != TypeStreamFailure || r.Stream != "abc" {
		t.Errorf("StreamRequest answered %+v, %v", r, err)
	}
	if got, err := fetchAll(t, c, (&OpenBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{"shuffle_0_1_0"}}).Append(nil)); err != nil || string(got[0]) != "fine" {
		t.Errorf("fetch after unsupported messages = %q, %v", got, err)
	}
	c.Close()
	waitFor(t, func() bool { return s.Conns() == 0 })
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIdleConnections: thousands of idle connections: the server holds
// MaxConnections of them, closes the rest at once, closes the idle ones
// after IdleTimeout, and its heap stays within a bound per connection.
func TestIdleConnections(t *testing.T) {
	st := newFakeStore(t)
	st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "fine")
	m := metrics.NewServing()
	const max, dials = 300, 2000
	s, addr := startServer(t, Config{Store: st, Metrics: m, Limits: Limits{MaxConnections: max, IdleTimeout: 3 * time.Second}})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range dials {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
	}
	waitFor(t, func() bool { return value(m.ConnectionsRefused) == dials-max })
	if n := s.Conns(); n != max {
		t.Errorf("server holds %d connections, want %d", n, max)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Each held connection: a goroutine and a 4 KiB read buffer; the
	// client's sockets are in this process too. 64 KiB a connection is
	// far above both and far below a frame buffer of MaxFrame.
	if grew := int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse); grew > max*64<<10 {
		t.Errorf("heap and stacks grew %d bytes for %d idle connections", grew, max)
	}
	waitFor(t, func() bool { return s.Conns() == 0 })
	if got := value(m.ConnectionsClosed.WithLabelValues(metrics.CloseIdle)); got != max {
		t.Errorf("idle closes = %v, want %d", got, max)
	}
	// The server still serves.
	c := dial(t, addr)
	if got, err := fetchAll(t, c, (&OpenBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{"shuffle_0_1_0"}}).Append(nil)); err != nil || string(got[0]) != "fine" {
		t.Errorf("fetch after the idle storm = %q, %v", got, err)
	}
}

// TestSlowReader: a client that asks for a large block and reads nothing
// holds no memory of it in the server (the kernel's socket buffers hold
// what sendfile queued), is closed after WriteTimeout, and other clients
// are served meanwhile.
func TestSlowReader(t *testing.T) {
	st := newFakeStore(t)
	big := strings.Repeat("z", 64<<20)
	st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 0, Map: 1}, big, "small")
	m := metrics.NewServing()
	_, addr := startServer(t, Config{Store: st, Metrics: m, Limits: Limits{WriteTimeout: time.Second}})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	slow := dial(t, addr)
	sid, _, err := slow.Open((&OpenBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{"shuffle_0_1_0"}}).Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.Send(AppendChunkFetchRequest(nil, sid, 0)); err != nil {
		t.Fatal(err)
	}
	fast := dial(t, addr)
	got, err := fetchAll(t, fast, (&OpenBlocks{AppID: "app-1", ExecID: "1", BlockIDs: []string{"shuffle_0_1_1"}}).Append(nil))
	if err != nil || string(got[0]) != "small" {
		t.Errorf("fetch beside a slow reader = %q, %v", got, err)
	}
	waitFor(t, func() bool { return value(m.ConnectionsClosed.WithLabelValues(metrics.CloseSlow)) == 1 })
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 8<<20 {
		t.Errorf("heap grew %d bytes while a reader stalled on a 64 MiB block", grew)
	}
}

// value reads a counter's or gauge's value.
func value(c prometheus.Metric) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// TestStreamBounds: streams past a connection's bounds are refused before
// their blocks are held, and fetching frees them.
func TestStreamBounds(t *testing.T) {
	st := newFakeStore(t)
	st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "a", "b")
	m := metrics.NewServing()
	_, addr := startServer(t, Config{Store: st, Metrics: m, Limits: Limits{MaxStreams: 2, StreamMemory: 4096}})
	c := dial(t, addr)
	one := (&FetchShuffleBlocks{AppID: "app-1", ExecID: "1", MapIDs: []int64{1}, ReduceIDs: [][]int32{{0, 1}}}).Append(nil)
	sid, _, err := c.Open(one)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Open(one); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Open(one); err == nil || !strings.Contains(err.Error(), "streams open") {
		t.Errorf("third stream: %v, want refused", err)
	}
	for i := range int32(2) {
		if _, err := c.FetchChunk(sid, i, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	// 300 blocks: 256 + 16 x 300 bytes, past 4096 with what is open.
	many := make([]int32, 300)
	if _, _, err := c.Open((&FetchShuffleBlocks{AppID: "app-1", ExecID: "1", MapIDs: []int64{1}, ReduceIDs: [][]int32{many}}).Append(nil)); err == nil || !strings.Contains(err.Error(), "bound") {
		t.Errorf("a stream past the state bound: %v", err)
	}
	if _, _, err := c.Open(one); err != nil {
		t.Errorf("a stream after one ended: %v", err)
	}
	if got := value(m.FetchFailures.WithLabelValues(metrics.FetchLimit)); got != 2 {
		t.Errorf("limit failures = %v, want 2", got)
	}
}

// TestStaleStreams: streams nobody fetched from within IdleTimeout (a
// killed task's) make room for new ones instead of filling the bound.
func TestStaleStreams(t *testing.T) {
	st := newFakeStore(t)
	st.commit(t, "app-1", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "a", "b")
	_, addr := startServer(t, Config{Store: st, Limits: Limits{MaxStreams: 2, IdleTimeout: 300 * time.Millisecond}})
	c := dial(t, addr)
	one := (&FetchShuffleBlocks{AppID: "app-1", ExecID: "1", MapIDs: []int64{1}, ReduceIDs: [][]int32{{0, 1}}}).Append(nil)
	stale, _, err := c.Open(one)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Open(one); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Open(one); err == nil {
		t.Fatal("a third stream at once accepted")
	}
	// Past the idle timeout, but with requests in between so that the
	// connection stays open.
	for range 4 {
		time.Sleep(100 * time.Millisecond)
		if _, err := c.RPC((&GetLocalDirsForExecutors{AppID: "app-1", ExecIDs: []string{"1"}}).Append(nil)); err != nil {
			t.Fatal(err)
		}
	}
	sid, _, err := c.Open(one)
	if err != nil {
		t.Fatalf("a stream once the others went stale: %v", err)
	}
	if _, err := c.FetchChunk(stale, 0, io.Discard); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("a stale stream's chunk: %v, want the stream closed", err)
	}
	var b bytes.Buffer
	if _, err := c.FetchChunk(sid, 0, &b); err != nil || b.String() != "a" {
		t.Errorf("the new stream's chunk = %q, %v", b.String(), err)
	}
}
