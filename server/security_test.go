package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
)

// sparkDaemon starts a daemon whose allowed root holds one empty local dir,
// and returns it with the dir and a dir outside the allowed roots.
func sparkDaemon(t *testing.T, mutate func(*Config)) (d *daemon, local, outside string) {
	t.Helper()
	allowed := t.TempDir()
	local = filepath.Join(allowed, "blockmgr-a")
	if err := os.Mkdir(local, 0o770); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, func(c *Config) {
		c.AllowedRoots = []string{allowed}
		if mutate != nil {
			mutate(c)
		}
	})
	return d, local, t.TempDir()
}

func registerLocal(t *testing.T, d *daemon, app string, dirs ...string) *client.Client {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, d.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: app, ExecutorID: "1", LocalDirs: dirs, SubDirs: 64}); err != nil {
		t.Fatalf("Register %v: %v", dirs, err)
	}
	return c
}

func writeAndCommit(c *client.Client, shuffle int32, m int64, payload string) (protocol.CommitResult, error) {
	ctx := context.Background()
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: shuffle, MapID: m, NumPartitions: 1, Kind: protocol.KindOpaque})
	if err != nil {
		return protocol.CommitResult{}, err
	}
	if err := mo.WriteOpaque(ctx, []byte(payload), []int64{0, int64(len(payload))}); err != nil {
		return protocol.CommitResult{}, err
	}
	return mo.Commit(ctx)
}

// files lists the regular files and symlinks below dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// TestPlantedSubDirSymlink plants every hashed sub-directory of a
// registered local dir as a symlink to a directory outside the allowed
// roots: the commit is refused with PermissionDenied naming the sub-dir,
// and nothing lands outside.
func TestPlantedSubDirSymlink(t *testing.T) {
	d, local, outside := sparkDaemon(t, nil)
	c := registerLocal(t, d, "app", local)
	for i := range 64 {
		if err := os.Symlink(outside, filepath.Join(local, fmt.Sprintf("%02x", i))); err != nil {
			t.Fatal(err)
		}
	}
	_, err := writeAndCommit(c, 1, 1, "planted")
	if protocol.CodeOf(err) != protocol.CodePermissionDenied || !strings.Contains(err.Error(), local+"/") {
		t.Errorf("commit into symlinked sub-dirs = %v, want PermissionDenied naming a sub-dir of %s", err, local)
	}
	if got := files(t, outside); len(got) != 0 {
		t.Errorf("files landed outside the allowed roots: %v", got)
	}
}

// TestPlantedSubDirOtherApp plants the sub-dirs of one application's local
// dir as symlinks to another application's: the planter's commit is
// refused, and the victim's own commit of the same (shuffle, map) is its
// own, not "existing".
func TestPlantedSubDirOtherApp(t *testing.T) {
	d, local, _ := sparkDaemon(t, nil)
	victimDir := filepath.Join(filepath.Dir(local), "blockmgr-victim")
	if err := os.Mkdir(victimDir, 0o770); err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		sub := fmt.Sprintf("%02x", i)
		if err := os.Mkdir(filepath.Join(victimDir, sub), 0o770); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(victimDir, sub), filepath.Join(local, sub)); err != nil {
			t.Fatal(err)
		}
	}
	planter := registerLocal(t, d, "planter", local)
	victim := registerLocal(t, d, "victim", victimDir)
	if _, err := writeAndCommit(planter, 1, 1, "planted bytes"); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Errorf("planter's commit = %v, want PermissionDenied", err)
	}
	res, err := writeAndCommit(victim, 1, 1, "own")
	if err != nil {
		t.Fatal(err)
	}
	if res.Existing {
		t.Errorf("victim's commit: existing=%v lengths=%v, want its own output", res.Existing, res.Lengths)
	}
}

// TestSwappedLocalDir replaces a registered local dir by a symlink to a
// directory outside the allowed roots after the registration: nothing
// lands outside.
func TestSwappedLocalDir(t *testing.T) {
	d, local, outside := sparkDaemon(t, nil)
	c := registerLocal(t, d, "app", local)
	if err := os.Rename(local, local+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, local); err != nil {
		t.Fatal(err)
	}
	_, _ = writeAndCommit(c, 1, 1, "swapped")
	if got := files(t, outside); len(got) != 0 {
		t.Errorf("files landed outside the allowed roots: %v", got)
	}
}

// rawConn is a connection that speaks frames by hand.
type rawConn struct {
	t  *testing.T
	uc *net.UnixConn
	rd *protocol.Reader
}

func dialRaw(t *testing.T, d *daemon) *rawConn {
	t.Helper()
	conn, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	uc := conn.(*net.UnixConn)
	return &rawConn{t: t, uc: uc, rd: protocol.NewReader(uc, protocol.DefaultMaxFrame)}
}

// call sends m with id and returns the decoded response.
func (r *rawConn) call(id uint32, m protocol.Message) (uint32, protocol.Message) {
	r.t.Helper()
	if err := protocol.WriteFrame(r.uc, id, m); err != nil {
		r.t.Fatal(err)
	}
	return r.read()
}

func (r *rawConn) read() (uint32, protocol.Message) {
	r.t.Helper()
	r.uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := r.rd.ReadFrame(nil)
	if err != nil {
		r.t.Fatalf("reading a response: %v", err)
	}
	m, err := protocol.DecodeFrame(&f)
	if err != nil {
		r.t.Fatalf("decoding a response: %v", err)
	}
	return f.ID, m
}

func (r *rawConn) handshake(app string) *protocol.ServerHello {
	r.t.Helper()
	_, m := r.call(1, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "raw"})
	sh, ok := m.(*protocol.ServerHello)
	if !ok {
		r.t.Fatalf("Hello answered %v", m)
	}
	if _, m := r.call(2, &protocol.RegisterExecutor{AppID: app, ExecutorID: "1"}); m.Type() != protocol.TypeRegistered {
		r.t.Fatalf("Register answered %v", m)
	}
	return sh
}

func codeOfMsg(m protocol.Message) protocol.Code {
	if e, ok := m.(*protocol.Error); ok {
		return e.Code
	}
	return protocol.CodeOK
}

// TestMaxInlineEnforced sends an inline batch one byte over the announced
// max_inline: refused with ResourceExhausted, and the output is aborted.
func TestMaxInlineEnforced(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.MaxFrame = 1 << 20 })
	r := dialRaw(t, d)
	sh := r.handshake("app")
	_, m := r.call(3, &protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque})
	opened, ok := m.(*protocol.Opened)
	if !ok {
		t.Fatalf("Open answered %v", m)
	}
	n := int64(sh.MaxInline) + 1
	_, m = r.call(4, &protocol.Batch{Handle: opened.Handle, Kind: protocol.KindOpaque, Plane: protocol.PlaneInline,
		Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, n}}, Inline: make([]byte, n)})
	if codeOfMsg(m) != protocol.CodeResourceExhausted {
		t.Errorf("inline batch of max_inline+1 = %d bytes answered %v, want ResourceExhausted", n, m)
	}
	if _, m = r.call(5, &protocol.Commit{Handle: opened.Handle}); m.Type() == protocol.TypeCommitResult {
		t.Errorf("Commit after an oversize inline batch committed")
	}
}

// TestOpenRefusesUnanswerableCommit opens map outputs whose CommitResult
// would not fit in a frame: refused at Open, before anything is written.
func TestOpenRefusesUnanswerableCommit(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.MaxFrame = 1 << 20 })
	r := dialRaw(t, d)
	r.handshake("app")
	// 32 + 16 n bytes of CommitResult payload: n = 65536 needs 1 MiB + 32.
	_, m := r.call(3, &protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 65536, Kind: protocol.KindOpaque})
	if codeOfMsg(m) != protocol.CodeInvalidArgument || !strings.Contains(m.(*protocol.Error).Message, "num_partitions") {
		t.Errorf("Open of 65536 partitions with a 1 MiB frame answered %v, want InvalidArgument naming num_partitions", m)
	}
	if protocol.MaxPartitions > 1<<20 {
		t.Errorf("protocol.MaxPartitions = %d: its CommitResult (%d bytes) exceeds the Go client's frame limit",
			protocol.MaxPartitions, 32+16*protocol.MaxPartitions)
	}
	if !errors.Is((&protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1<<20 + 1, Kind: protocol.KindOpaque}).Validate(), protocol.ErrMalformed) {
		t.Errorf("OpenMapOutput of 2^20+1 partitions validates")
	}
}

// TestRequestIDZero sends a Ping with the reserved request id 0: the
// daemon answers a connection-level Error (id 0, InvalidArgument) and
// closes, rather than a Pong the client could not tell from one.
func TestRequestIDZero(t *testing.T) {
	d := startDaemon(t, nil)
	r := dialRaw(t, d)
	r.handshake("app")
	id, m := r.call(0, &protocol.Ping{})
	if id != 0 || codeOfMsg(m) != protocol.CodeInvalidArgument {
		t.Errorf("Ping id 0 answered id %d %v, want id 0 InvalidArgument", id, m)
	}
	r.uc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.rd.ReadFrame(nil); err == nil {
		t.Errorf("connection still open after a request with id 0")
	}
}

// TestDocumentedCodes pins the codes docs/protocol.md gives for a second
// Abort, handle 0, a response type sent as a request and a missing local
// dir.
func TestDocumentedCodes(t *testing.T) {
	d, local, _ := sparkDaemon(t, nil)
	r := dialRaw(t, d)
	r.handshake("app")
	_, m := r.call(3, &protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque})
	h := m.(*protocol.Opened).Handle
	if _, m := r.call(4, &protocol.Abort{Handle: h}); m.Type() != protocol.TypeAborted {
		t.Errorf("Abort answered %v", m)
	}
	if _, m := r.call(5, &protocol.Abort{Handle: h}); codeOfMsg(m) != protocol.CodeNotFound {
		t.Errorf("second Abort answered %v, want NotFound", m)
	}
	b := protocol.Header{Type: protocol.TypeCommit, ID: 6, Length: 8}.Append(nil)
	b = append(b, make([]byte, 8)...)
	if _, err := r.uc.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, m := r.read(); codeOfMsg(m) != protocol.CodeInvalidArgument {
		t.Errorf("Commit of handle 0 answered %v, want InvalidArgument", m)
	}
	if _, err := r.uc.Write(protocol.Header{Type: protocol.TypePong, ID: 7}.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if _, m := r.read(); codeOfMsg(m) != protocol.CodeInvalidArgument {
		t.Errorf("a Pong sent as a request answered %v, want InvalidArgument", m)
	}
	r2 := dialRaw(t, d)
	r2.call(1, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "raw"})
	if _, m := r2.call(2, &protocol.RegisterExecutor{AppID: "app2", ExecutorID: "1", LocalDirs: []string{local + "-missing"}, SubDirs: 64}); codeOfMsg(m) != protocol.CodeInvalidArgument {
		t.Errorf("Register of a missing local dir answered %v, want InvalidArgument", m)
	}
	file := filepath.Join(filepath.Dir(local), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, m := r2.call(3, &protocol.RegisterExecutor{AppID: "app2", ExecutorID: "1", LocalDirs: []string{file}, SubDirs: 64}); codeOfMsg(m) != protocol.CodeInvalidArgument {
		t.Errorf("Register of a local dir that is a file answered %v, want InvalidArgument", m)
	}
}

// TestPartitionStateBudget opens map outputs of many partitions until the
// partition-state budget refuses one (ResourceExhausted, naming the
// budget), then frees it by aborting and opens again.
func TestPartitionStateBudget(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.PartitionStateLimit, c.PartitionStateLimitPerUID = 64<<20, 64<<20 })
	c := dial(t, d, "app")
	ctx := context.Background()
	var open []*client.MapOutput
	var refused error
	for m := range int64(64) {
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: m, NumPartitions: 1 << 20, Kind: protocol.KindOpaque})
		if err != nil {
			refused = err
			break
		}
		open = append(open, mo)
	}
	if protocol.CodeOf(refused) != protocol.CodeResourceExhausted || !strings.Contains(refused.Error(), "partition") {
		t.Fatalf("after %d opens of 2^20 partitions: %v, want ResourceExhausted naming the partition-state budget", len(open), refused)
	}
	if len(open) == 0 || len(open) > 8 {
		t.Errorf("%d outputs of 2^20 partitions admitted under a 64 MiB budget", len(open))
	}
	for _, mo := range open {
		if err := mo.Abort(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 99, NumPartitions: 1 << 20, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatalf("Open after the budget was freed: %v", err)
	}
	mo.Abort(ctx)
}

// TestOpenOutputsPerDaemon bounds the map outputs open daemon-wide.
func TestOpenOutputsPerDaemon(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.MaxOpenOutputs, c.MaxOpenOutputsPerUID = 3, 3 })
	ctx := context.Background()
	a, b := dial(t, d, "a"), dial(t, d, "b")
	for m := range int64(3) {
		if _, err := a.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: m, NumPartitions: 1, Kind: protocol.KindOpaque}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 9, NumPartitions: 1, Kind: protocol.KindOpaque}); protocol.CodeOf(err) != protocol.CodeResourceExhausted {
		t.Errorf("fourth open map output daemon-wide = %v, want ResourceExhausted", err)
	}
}

// TestCommitFreesItsSlotBeforeItsResult: at --max-open-outputs 1, a map
// output committed no longer counts as open when its client hears the
// result, so the client's next Open gets the slot.
func TestCommitFreesItsSlotBeforeItsResult(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.MaxOpenOutputs, c.MaxOpenOutputsPerUID = 1, 1 })
	ctx := context.Background()
	c := dial(t, d, "a")
	for m := range int64(200) {
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: m, NumPartitions: 1, Kind: protocol.KindOpaque})
		if err != nil {
			t.Fatalf("Open of map output %d right after the previous one's Commit: %v", m, err)
		}
		if m%2 == 1 {
			if err := mo.WriteOpaque(ctx, []byte("x"), []int64{0, 1}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := mo.Commit(ctx); err != nil {
			t.Fatalf("Commit of map output %d: %v", m, err)
		}
	}
}

// TestShutdownSendsCommitResults commits a map output while the daemon
// drains, many times: the Commit that ends the last open map output gets
// its result. (A commit ends its map output before it replies, so the
// drain, seeing none open, used to close the connection in between.)
func TestShutdownSendsCommitResults(t *testing.T) {
	ctx := context.Background()
	for i := range 200 {
		d := startDaemon(t, nil)
		c := dial(t, d, "a")
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 0, NumPartitions: 1, Kind: protocol.KindOpaque})
		if err != nil {
			t.Fatal(err)
		}
		if err := mo.WriteOpaque(ctx, []byte("x"), []int64{0, 1}); err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			stopped <- d.s.Shutdown(sctx)
		}()
		for !d.s.isDraining() { // the drain waits for this map output
			time.Sleep(50 * time.Microsecond)
		}
		if _, err := mo.Commit(ctx); err != nil {
			t.Fatalf("round %d: Commit while the daemon drains: %v", i, err)
		}
		if err := <-stopped; err != nil {
			t.Fatalf("round %d: Shutdown: %v", i, err)
		}
		d.s = nil // stopped
	}
}
