package command

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/server"
)

// adminDaemon serves a daemon in-process on a temp socket and returns the
// socket.
func adminDaemon(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := server.Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	s, err := server.New(cfg, server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := unixsock.Listen(cfg.SocketPath, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return cfg.SocketPath
}

// commitOne writes one map output of app's shuffle through c.
func commitOne(t *testing.T, c *client.Client, shuffle int32, m int64) {
	t.Helper()
	ctx := context.Background()
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: shuffle, MapID: m, NumPartitions: 1, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatal(err)
	}
	if err := mo.WriteOpaque(ctx, []byte("hello"), []int64{0, 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := mo.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestAdminCommands(t *testing.T) {
	socket := adminDaemon(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "app-1", ExecutorID: "1"}); err != nil {
		t.Fatal(err)
	}
	commitOne(t, c, 0, 0)
	commitOne(t, c, 0, 1)
	commitOne(t, c, 3, 0)

	out, err := run(t, "apps", "--json", "--socket", socket)
	if err != nil {
		t.Fatalf("apps --json: %v\n%s", err, out)
	}
	// The documented names (docs/operations.md), not only what appsJSON reads back.
	for _, key := range []string{`{"applications":[{"app_id":"app-1","owner_uid":`, `"connections":1,"shuffles":2,"map_outputs":3,"bytes":`} {
		if !strings.Contains(out, key) {
			t.Errorf("apps --json printed %q, want %s", out, key)
		}
	}
	var got appsJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("apps --json printed %q: %v", out, err)
	}
	if len(got.Applications) != 1 {
		t.Fatalf("apps --json = %+v, want app-1 alone", got)
	}
	a := got.Applications[0]
	if a.AppID != "app-1" || a.OwnerUID != int64(os.Getuid()) || a.Connections != 1 || a.Shuffles != 2 || a.MapOutputs != 3 || a.Bytes <= 0 {
		t.Errorf("apps --json = %+v, want app-1 of uid %d, 1 connection, 2 shuffles, 3 map outputs, bytes > 0", a, os.Getuid())
	}

	out, err = run(t, "apps", "--socket", socket)
	if err != nil || !strings.Contains(out, "APPLICATION") || !strings.Contains(out, "app-1") {
		t.Errorf("apps = %v:\n%s", err, out)
	}

	out, err = run(t, "stats", "--socket", socket, "--json")
	if err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	var st struct {
		Server string           `json:"server"`
		Stats  map[string]int64 `json:"stats"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Stats["commits_total"] != 3 || !strings.HasPrefix(st.Server, "shuffled ") {
		t.Errorf("stats --json = %q (%v), want commits_total 3 from a shuffled server", out, err)
	}
	if out, err := run(t, "stats", "--socket", socket); err != nil || !strings.Contains(out, "commits_total") {
		t.Errorf("stats = %v:\n%s", err, out)
	}

	out, err = run(t, "rm", "--socket", socket, "app-1", "0")
	if err != nil || !strings.HasPrefix(out, "removed shuffle 0 of application app-1: 2 map outputs, ") {
		t.Errorf("rm app-1 0 = %v: %q", err, out)
	}
	out, err = run(t, "rm", "app-1", "--socket", socket)
	if err != nil || !strings.HasPrefix(out, "removed application app-1: 1 map output, ") {
		t.Errorf("rm app-1 = %v: %q", err, out)
	}
	// The removal ended the registration of the executor still connected.
	if list, err := c.ListApplications(ctx); err != nil || len(list) != 0 {
		t.Errorf("after rm: ListApplications = %+v, %v; want none", list, err)
	}
	if _, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 0, MapID: 9, NumPartitions: 1, Kind: protocol.KindOpaque}); protocol.CodeOf(err) != protocol.CodeFailedPrecondition {
		t.Errorf("after rm: Open on the removed application's connection = %v, want FailedPrecondition", err)
	}
}

func TestAdminUsage(t *testing.T) {
	for _, args := range [][]string{
		{"rm"},
		{"rm", "a", "b", "c"},
		{"rm", "app", "-1"},
		{"rm", "app", "x"},
		{"rm", "../etc"},
		{"apps", "extra"},
		{"stats", "extra"},
		{"apps", "--bogus"},
	} {
		if _, err := run(t, args...); ExitCode(err) != 2 {
			t.Errorf("%q: err %v (exit %d), want a usage error (exit 2)", args, err, ExitCode(err))
		}
	}
	nobody := filepath.Join(t.TempDir(), "none.sock")
	if _, err := run(t, "apps", "--socket", nobody); err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), nobody) {
		t.Errorf("apps on %s = %v, want exit 1 naming the socket", nobody, err)
	}
}

// refusingDaemon listens on a temp socket and answers every connection as
// the daemon answers a peer it does not allow: one id-0 Error
// PermissionDenied at once, then the close, before the client's Hello is
// read. It returns the socket.
func refusingDaemon(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := unixsock.Listen(path, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	refusal, err := protocol.AppendFrame(nil, 0, &protocol.Error{Code: protocol.CodePermissionDenied, Message: "peer uid 4242 gid 4242 is not allowed"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Write(refusal)
			conn.Close()
		}
	}()
	return path
}

// TestAdminRefusedPeer: a uid the daemon does not allow is told why (the
// daemon's PermissionDenied), whether or not its Hello could still be
// written, by every admin command; exit status 1.
func TestAdminRefusedPeer(t *testing.T) {
	socket := refusingDaemon(t)
	for range 20 {
		for _, args := range [][]string{{"apps"}, {"stats"}, {"rm", "app"}, {"apps", "--json"}} {
			out, err := run(t, append(args, "--socket", socket)...)
			if ExitCode(err) != 1 || !strings.Contains(err.Error(), "PermissionDenied") || !strings.Contains(err.Error(), "uid 4242") {
				t.Fatalf("%q against a daemon that refuses the peer: %v (exit %d), output %q; want exit 1 with the daemon's PermissionDenied", args, err, ExitCode(err), out)
			}
		}
	}
}

// TestAdminHelp: -h, -help and --help print the command's usage and exit 0.
func TestAdminHelp(t *testing.T) {
	for _, cmd := range []string{"apps", "stats", "rm", "version"} {
		for _, h := range []string{"-h", "-help", "--help"} {
			out, err := run(t, cmd, h)
			if err != nil || ExitCode(err) != 0 || !strings.Contains(out, "usage: shuffled "+cmd) && cmd != "version" {
				t.Errorf("%s %s = %v (exit %d): %q, want the usage and exit 0", cmd, h, err, ExitCode(err), out)
			}
		}
	}
}

// TestAdminRemoveNothing: rm of an application (or shuffle) with nothing
// to remove says so and exits 3, so that a typo does not read as success;
// sizes are printed with their unit.
func TestAdminRemoveNothing(t *testing.T) {
	socket := adminDaemon(t)
	for _, args := range [][]string{{"rm", "nosuchapp"}, {"rm", "nosuchapp", "3"}} {
		out, err := run(t, append(args, "--socket", socket)...)
		if ExitCode(err) != 3 || !strings.Contains(err.Error(), "nothing") || !strings.Contains(err.Error(), "nosuchapp") {
			t.Errorf("%q = %v (exit %d), output %q; want exit 3 saying nothing was found", args, err, ExitCode(err), out)
		}
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "app-1", ExecutorID: "1"}); err != nil {
		t.Fatal(err)
	}
	commitOne(t, c, 0, 0)
	out, err := run(t, "rm", "--socket", socket, "app-1")
	if err != nil || !regexp.MustCompile(`^removed application app-1: 1 map output, [0-9.]+ (B|KiB|MiB)( \([0-9]+ bytes\))?\n$`).MatchString(out) {
		t.Errorf("rm app-1 = %v: %q, want the map outputs and the bytes with their unit", err, out)
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB (1024 bytes)", 1536: "1.5 KiB (1536 bytes)",
		5 << 20: "5.0 MiB (5242880 bytes)", 3 << 40: "3.0 TiB (3298534883328 bytes)"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
