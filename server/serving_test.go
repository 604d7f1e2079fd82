package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/blockserver"
	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
)

// testHandshake authenticates a client that sends 0xFB, the app id
// (network-common string) and the secret's bytes: a stand-in for Spark's
// handshakes (package sparkauth), enough to show what the daemon does with
// an authenticated connection.
type testHandshake struct {
	secret blockserver.SecretFunc
	app    string
}

func (h *testHandshake) Step(body []byte) ([]byte, error) {
	if len(body) < 5 {
		return nil, blockserver.ErrAuthFailed
	}
	n := int(binary.BigEndian.Uint32(body[1:]))
	if n > len(body)-5 {
		return nil, blockserver.ErrAuthFailed
	}
	app, got := string(body[5:5+n]), body[5+n:]
	want, ok := h.secret(app)
	if !ok || !bytes.Equal(want, got) {
		return nil, blockserver.ErrAuthFailed
	}
	h.app = app
	return []byte{1}, nil
}
func (h *testHandshake) Done() bool                 { return h.app != "" }
func (h *testHandshake) AppID() string              { return h.app }
func (h *testHandshake) Cipher() blockserver.Cipher { return nil }

func testAuth(secret blockserver.SecretFunc) blockserver.Handshake {
	return &testHandshake{secret: secret}
}

func authMessage(app string, secret []byte) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0xFB}, uint32(len(app)))
	return append(append(b, app...), secret...)
}

// writeOutput writes one opaque map output of parts through c.
func writeOutput(t *testing.T, c *client.Client, shuffle int32, mapID int64, flags protocol.OpenFlags, parts ...string) {
	t.Helper()
	ctx := context.Background()
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: shuffle, MapID: mapID, NumPartitions: int32(len(parts)), Kind: protocol.KindOpaque, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	offsets := []int64{0}
	for _, p := range parts {
		data = append(data, p...)
		offsets = append(offsets, int64(len(data)))
	}
	if err := mo.WriteOpaque(ctx, data, offsets); err != nil {
		t.Fatal(err)
	}
	if _, err := mo.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// onDisk returns partitions [start, end) of a committed map output as the
// files hold them.
func onDisk(t *testing.T, l shufflefile.Layout, id shufflefile.ID, start, end int) []byte {
	t.Helper()
	mo, err := shufflefile.Open(vfs.Default, l, id, checksum.None)
	if err != nil {
		t.Fatal(err)
	}
	defer mo.Close()
	var out []byte
	for p := start; p < end; p++ {
		b, err := mo.ReadPartition(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

func blockDial(t *testing.T, d *daemon) *blockserver.Client {
	t.Helper()
	host, port := d.s.ServeAddr()
	c, err := blockserver.Dial(net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func fetch(t *testing.T, c *blockserver.Client, m interface{ Append([]byte) []byte }) ([][]byte, error) {
	t.Helper()
	return c.FetchAll(m.Append(nil))
}

// TestServingEndToEnd: executors write map outputs through the socket
// (the daemon's root, Spark local dirs, IO-encrypted), disconnect, and a
// fetch client reads the very bytes of the files over TCP; another
// application's blocks are refused; removal goes through the lifecycle
// path; RemoveApplication forgets the secret.
func TestServingEndToEnd(t *testing.T) {
	leakcheck.Check(t)
	allowed := t.TempDir()
	local := []string{filepath.Join(allowed, "blockmgr-a"), filepath.Join(allowed, "blockmgr-b")}
	for _, dir := range local {
		if err := os.Mkdir(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, func(c *Config) {
		c.AllowedRoots = []string{allowed}
		c.Serve.Addr = "127.0.0.1:0"
	}, WithHandshake(testAuth))
	ctx := context.Background()
	secret := []byte("the-app's-secret")
	key := bytes.Repeat([]byte{7}, 16)

	c1, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	if c1.ServerHello().Features&protocol.FeatureServing == 0 {
		t.Fatal("ServerHello lacks FeatureServing")
	}
	reg, err := c1.Register(ctx, protocol.RegisterExecutor{AppID: "app-s", ExecutorID: "1", IOEncryptionKey: bytes.Clone(key), AuthSecret: bytes.Clone(secret)})
	if err != nil {
		t.Fatal(err)
	}
	host, port := d.s.ServeAddr()
	if reg.Serve == nil || reg.Serve.Host != host || int(reg.Serve.Port) != port || host != "127.0.0.1" || port == 0 {
		t.Fatalf("Registered.Serve = %+v, daemon serves %s:%d", reg.Serve, host, port)
	}
	big := strings.Repeat("block bytes ", 50_000)
	writeOutput(t, c1, 2, 10, 0, "p0", big, "p2", "")
	writeOutput(t, c1, 2, 11, protocol.OpenEncrypt, "secret-0", "secret-1", big)
	c1.Close() // the executor is gone

	c2, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Register(ctx, protocol.RegisterExecutor{AppID: "app-s", ExecutorID: "2", LocalDirs: local, SubDirs: 8, IOEncryptionKey: bytes.Clone(key), AuthSecret: bytes.Clone(secret)}); err != nil {
		t.Fatal(err)
	}
	writeOutput(t, c2, 2, 20, 0, "local-0", "local-1")
	c3, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, err := c3.Register(ctx, protocol.RegisterExecutor{AppID: "app-o", ExecutorID: "1"}); err != nil {
		t.Fatal(err)
	}
	writeOutput(t, c3, 0, 1, 0, "open-0")
	// Another secret for app-s is refused, naming the field, not the bytes.
	c4, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	_, err = c4.Register(ctx, protocol.RegisterExecutor{AppID: "app-s", ExecutorID: "3", IOEncryptionKey: bytes.Clone(key), AuthSecret: []byte("zq-distinct")})
	if err == nil || !strings.Contains(err.Error(), "auth_secret") || strings.Contains(err.Error(), "zq-distinct") {
		t.Errorf("a second secret: %v", err)
	}

	rootLayout := shufflefile.Flat(filepath.Join(d.root, "app-s", "1"))
	localLayout := shufflefile.SparkHashed{LocalDirs: local, SubDirs: 8}

	// Unauthenticated: app-o is served, app-s is not.
	c := blockDial(t, d)
	got, err := fetch(t, c, &blockserver.FetchShuffleBlocks{AppID: "app-o", ExecID: "1", MapIDs: []int64{1}, ReduceIDs: [][]int32{{0}}})
	if err != nil || !bytes.Equal(got[0], onDisk(t, shufflefile.Flat(filepath.Join(d.root, "app-o", "1")), shufflefile.ID{Shuffle: 0, Map: 1}, 0, 1)) {
		t.Errorf("app-o unauthenticated: %q, %v", got, err)
	}
	if _, err := fetch(t, c, &blockserver.FetchShuffleBlocks{AppID: "app-s", ExecID: "1", ShuffleID: 2, MapIDs: []int64{10}, ReduceIDs: [][]int32{{0}}}); err == nil {
		t.Error("app-s served without authentication")
	}

	// Authenticated for app-s: byte-identical blocks, single and batch,
	// plain and IO-encrypted, from the root and from local dirs.
	c = blockDial(t, d)
	if _, err := c.RPC(authMessage("app-s", []byte("wrong"))); err == nil {
		t.Fatal("wrong secret accepted")
	}
	c = blockDial(t, d)
	if _, err := c.RPC(authMessage("app-s", secret)); err != nil {
		t.Fatal(err)
	}
	got, err = fetch(t, c, &blockserver.FetchShuffleBlocks{AppID: "app-s", ExecID: "1", ShuffleID: 2, MapIDs: []int64{10, 11}, ReduceIDs: [][]int32{{0, 1, 3}, {2}}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{
		onDisk(t, rootLayout, shufflefile.ID{Shuffle: 2, Map: 10}, 0, 1),
		onDisk(t, rootLayout, shufflefile.ID{Shuffle: 2, Map: 10}, 1, 2),
		onDisk(t, rootLayout, shufflefile.ID{Shuffle: 2, Map: 10}, 3, 4),
		onDisk(t, rootLayout, shufflefile.ID{Shuffle: 2, Map: 11}, 2, 3),
	}
	for i := range want {
		if i >= len(got) || !bytes.Equal(got[i], want[i]) {
			t.Errorf("block %d: %d bytes, want the %d bytes on disk", i, len(got[i]), len(want[i]))
		}
	}
	got, err = fetch(t, c, &blockserver.FetchShuffleBlocks{AppID: "app-s", ExecID: "1", ShuffleID: 2, MapIDs: []int64{11, 10}, ReduceIDs: [][]int32{{0, 3}, {1, 4}}, Batch: true})
	if err != nil || len(got) != 2 ||
		!bytes.Equal(got[0], onDisk(t, rootLayout, shufflefile.ID{Shuffle: 2, Map: 11}, 0, 3)) ||
		!bytes.Equal(got[1], onDisk(t, rootLayout, shufflefile.ID{Shuffle: 2, Map: 10}, 1, 4)) {
		t.Errorf("batch fetch differs from the files: %d blocks, %v", len(got), err)
	}
	got, err = fetch(t, c, &blockserver.OpenBlocks{AppID: "app-s", ExecID: "2", BlockIDs: []string{"shuffle_2_20_1", "shuffle_2_20_0_2"}})
	if err != nil || len(got) != 2 ||
		!bytes.Equal(got[0], onDisk(t, localLayout, shufflefile.ID{Shuffle: 2, Map: 20}, 1, 2)) ||
		!bytes.Equal(got[1], onDisk(t, localLayout, shufflefile.ID{Shuffle: 2, Map: 20}, 0, 2)) {
		t.Errorf("local dirs fetch differs from the files: %d blocks, %v", len(got), err)
	}
	body, err := c.RPC((&blockserver.GetLocalDirsForExecutors{AppID: "app-s", ExecIDs: []string{"2"}}).Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if ld, err := blockserver.DecodeLocalDirs(body); err != nil || len(ld.Dirs) != 1 || strings.Join(ld.Dirs[0], ",") != strings.Join(local, ",") {
		t.Errorf("LocalDirsForExecutors = %+v, %v; want %v", ld, err, local)
	}
	// No other application's blocks on this connection.
	if _, err := fetch(t, c, &blockserver.FetchShuffleBlocks{AppID: "app-o", ExecID: "1", MapIDs: []int64{1}, ReduceIDs: [][]int32{{0}}}); err == nil {
		t.Error("app-o's blocks served on a connection authenticated for app-s")
	}
	// A map output of an executor of another application under the same
	// executor id is not found through app-s.
	if _, err := fetch(t, c, &blockserver.FetchShuffleBlocks{AppID: "app-s", ExecID: "1", ShuffleID: 0, MapIDs: []int64{1}, ReduceIDs: [][]int32{{0}}}); err == nil {
		t.Error("a map output app-s never wrote was served")
	}

	// Removal through the lifecycle path: the registry's view follows.
	body, err = c.RPC((&blockserver.RemoveOutputs{AppID: "app-s", ShuffleID: 2}).Append(nil))
	if err != nil || len(body) != 16 || binary.BigEndian.Uint64(body) != 3 {
		t.Errorf("RemoveOutputs = % x, %v; want 3 map outputs", body, err)
	}
	if list, err := c2.ListShuffles(ctx, "app-s"); err != nil || len(list) != 0 {
		t.Errorf("ListShuffles after RemoveOutputs = %v, %v", list, err)
	}
	// RemoveApplication forgets the secret: nothing of app-s is served.
	if _, err := c2.RemoveApplication(ctx, "app-s"); err != nil {
		t.Fatal(err)
	}
	c = blockDial(t, d)
	if _, err := c.RPC(authMessage("app-s", secret)); err == nil {
		t.Error("handshake with a forgotten secret accepted")
	}
}

// TestServingHostileWhileSocketServes: garbage, huge lengths and
// thousands of idle connections on the TCP port close connections or hit
// the cap; the Unix socket keeps serving meanwhile.
func TestServingHostileWhileSocketServes(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.Serve.Addr = "127.0.0.1:0" })
	host, port := d.s.ServeAddr()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ctx := context.Background()
	c := dial(t, d, "app-x")
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for i := range 1500 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		switch i % 3 {
		case 0:
			nc.Write([]byte("\x00\x00\x00\x00garbage garbage"))
		case 1:
			nc.Write(binary.BigEndian.AppendUint64(nil, 1<<40))
		}
		if i%100 == 0 {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := c.Ping(pctx); err != nil {
				t.Fatalf("Ping on the socket after %d TCP connections: %v", i, err)
			}
			cancel()
		}
	}
	writeOutput(t, c, 0, 1, 0, "still", "writing")
	deadline := time.Now().Add(10 * time.Second)
	for d.s.serving.srv.Conns() > 500 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := d.s.serving.srv.Conns(); n > 500+10 {
		t.Errorf("%d connections open: the garbage ones (2 in 3) should be closed", n)
	}
}

func TestServeConfig(t *testing.T) {
	for _, tt := range []struct {
		c    ServeConfig
		want string
	}{
		{ServeConfig{Addr: "nohost"}, "--serve-addr"},
		{ServeConfig{Addr: ":99999"}, "--serve-addr"},
		{ServeConfig{Addr: ":7337", AdvertiseHost: "bad host"}, "--serve-advertise-host"},
		{ServeConfig{RequireAuth: true}, "--serve-addr"},
	} {
		cfg := Config{Serve: tt.c}
		cfg.EnsureDefaults()
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tt.c, err, tt.want)
		}
	}
	cfg := Config{}
	if err := cfg.ApplyEnv(func(k string) (string, bool) {
		v, ok := map[string]string{"SHUFFLED_SERVE_ADDR": ":7337", "SHUFFLED_SERVE_ADVERTISE_HOST": "node-1.example", "SHUFFLED_SERVE_REQUIRE_AUTH": "true"}[k]
		return v, ok
	}); err != nil {
		t.Fatal(err)
	}
	if cfg.Serve != (ServeConfig{Addr: ":7337", AdvertiseHost: "node-1.example", RequireAuth: true}) {
		t.Errorf("ApplyEnv: Serve = %+v", cfg.Serve)
	}
	host, port, err := advertise(ServeConfig{Addr: ":7337"}, &net.TCPAddr{IP: net.IPv6unspecified, Port: 7337})
	if h, _ := os.Hostname(); err != nil || host != h || port != 7337 {
		t.Errorf("advertise of an unspecified address = %s:%d, %v; want the host name", host, port, err)
	}
	if host, _, _ := advertise(ServeConfig{AdvertiseHost: "x.example"}, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 1}); host != "x.example" {
		t.Errorf("advertise with --serve-advertise-host = %s", host)
	}
}

// TestServingRestart: files survive a restart, secrets do not: the
// application is served to nobody until one of its executors registers
// again, then a dead executor's outputs are served again, after the
// handshake.
func TestServingRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		SocketPath: filepath.Join(dir, "s.sock"),
		Root:       filepath.Join(dir, "root"),
		LimitBytes: 4 << 20,
		PoolSize:   2,
		Serve:      ServeConfig{Addr: "127.0.0.1:0"},
	}
	secret := []byte("restart-secret")
	ctx := context.Background()
	d := startDaemonWith(t, cfg, WithHandshake(testAuth))
	c, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "app-r", ExecutorID: "dead", AuthSecret: bytes.Clone(secret)}); err != nil {
		t.Fatal(err)
	}
	writeOutput(t, c, 1, 5, 0, "kept", "across", "restarts")
	c.Close()
	d.stop(t)

	d = startDaemonWith(t, cfg, WithHandshake(testAuth))
	want := onDisk(t, shufflefile.Flat(filepath.Join(cfg.Root, "app-r", "dead")), shufflefile.ID{Shuffle: 1, Map: 5}, 0, 3)
	req := &blockserver.FetchShuffleBlocks{AppID: "app-r", ExecID: "dead", ShuffleID: 1, MapIDs: []int64{5}, ReduceIDs: [][]int32{{0, 3}}, Batch: true}
	// Not known since the start: no handshake succeeds, and an
	// unauthenticated fetch gets nothing.
	bc := blockDial(t, d)
	if _, err := fetch(t, bc, req); err == nil || !strings.Contains(err.Error(), "since it started") {
		t.Errorf("fetch after a restart, before any registration: %v", err)
	}
	bc = blockDial(t, d)
	if _, err := bc.RPC(authMessage("app-r", secret)); err == nil {
		t.Error("handshake accepted before the application registered again")
	}
	// An executor of the application registers again: the dead
	// executor's outputs are served, after the handshake only.
	c, err = client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "app-r", ExecutorID: "new", AuthSecret: bytes.Clone(secret)}); err != nil {
		t.Fatal(err)
	}
	bc = blockDial(t, d)
	if _, err := fetch(t, bc, req); err == nil || !strings.Contains(err.Error(), "requires authentication") {
		t.Errorf("unauthenticated fetch after the registration: %v", err)
	}
	bc = blockDial(t, d)
	if _, err := bc.RPC(authMessage("app-r", secret)); err != nil {
		t.Fatal(err)
	}
	got, err := fetch(t, bc, req)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Errorf("the dead executor's output after the restart: %d blocks, %v", len(got), err)
	}
}
