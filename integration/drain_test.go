package integration

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// notifySocket listens where the daemon sends its sd_notify datagrams.
type notifySocket struct {
	path   string
	states chan string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	n := &notifySocket{path: filepath.Join(t.TempDir(), "notify"), states: make(chan string, 64)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			select {
			case n.states <- string(buf[:k]):
			default: // nobody reads: drop it
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return n
}

// expect waits for the datagram state.
func (n *notifySocket) expect(t *testing.T, state string) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case s := <-n.states:
			if s == state {
				return
			}
		case <-timeout:
			t.Fatalf("no %q sent to NOTIFY_SOCKET within %v", state, waitTimeout)
		}
	}
}

// TestDrain sends SIGTERM to a daemon with open map outputs. It tells
// systemd READY and then STOPPING; it refuses new connections and new map
// outputs; an open map output that gets its last batch and its commit
// within the drain deadline is committed; those left open are aborted at the
// deadline, without a file left; outputs committed before stay; the process
// exits 0, not before the deadline, and removes its socket file.
func TestDrain(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	const drain = 2 * time.Second
	notify := listenNotify(t)
	d := startDaemon(t, config{
		args: []string{"--drain-timeout", drain.String()},
		env:  []string{"NOTIFY_SOCKET=" + notify.path},
	})
	notify.expect(t, "READY=1")

	ca, reg := d.dial(t, "app-a", nil)
	layout := layoutOf(reg, nil)
	cb, _ := d.dial(t, "app-b", nil)
	output := func(i int) *mapOutput {
		return plan(i, "app-a", layout, shufflefile.ID{Shuffle: 1, Map: int64(i)})
	}

	// Committed before SIGTERM.
	var done []*mapOutput
	for i := range 3 {
		o := output(i)
		if _, err := o.write(ctx, ca); err != nil {
			t.Fatal(err)
		}
		done = append(done, o)
	}
	// Left open: every batch sent, never committed.
	var open []*mapOutput
	for i := 3; i < 6; i++ {
		o := output(i)
		m, err := o.open(ctx, ca)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range o.batches {
			if err := o.writeBatch(ctx, m, b); err != nil {
				t.Fatal(err)
			}
		}
		open = append(open, o)
	}
	// Finished within the deadline: its last batch and its commit come
	// after SIGTERM.
	late := plan(23, "app-a", layout, shufflefile.ID{Shuffle: 1, Map: 23}) // columnar, three batches
	lm, err := late.open(ctx, ca)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range late.batches[:len(late.batches)-1] {
		if err := late.writeBatch(ctx, lm, b); err != nil {
			t.Fatal(err)
		}
	}

	sigterm := time.Now()
	d.signal(syscall.SIGTERM)
	notify.expect(t, "STOPPING=1")
	// The daemon stops taking map outputs and connections at one step;
	// until it has, an Open still succeeds (and is aborted again).
	for i := 0; ; i++ {
		m, err := cb.Open(ctx, protocol.OpenMapOutput{ShuffleID: 9, MapID: int64(i), NumPartitions: 1, Kind: protocol.KindOpaque})
		if err == nil {
			if err := m.Abort(ctx); err != nil {
				t.Fatalf("Abort before the drain began: %v", err)
			}
			continue
		}
		if code := protocol.CodeOf(err); code != protocol.CodeUnavailable {
			t.Fatalf("Open while draining: %v (code %v), want Unavailable", err, code)
		}
		break
	}
	if c, err := client.Dial(ctx, d.socket); err == nil {
		c.Close()
		t.Errorf("Dial while draining succeeded, want refused")
	} else {
		t.Logf("Dial while draining: %v", err)
	}

	if err := late.writeBatch(ctx, lm, late.batches[len(late.batches)-1]); err != nil {
		t.Fatalf("last batch of an open map output while draining: %v", err)
	}
	res, err := lm.Commit(ctx)
	if err != nil {
		t.Fatalf("Commit while draining: %v", err)
	}
	if err := late.verify(&res); err != nil {
		t.Errorf("committed while draining: %v", err)
	}

	if code := d.wait(); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0 (%v)", code, d.waitErr)
	}
	if elapsed := time.Since(sigterm); elapsed < drain {
		t.Errorf("exited %v after SIGTERM with map outputs open, before the drain deadline %v", elapsed, drain)
	}
	if want := fmt.Sprintf("aborted %d open map outputs", len(open)); !d.log.contains(want) {
		t.Errorf("the log does not say %q:\n%s", want, d.log.tail(20))
	}
	for _, o := range done {
		if err := o.verify(nil); err != nil {
			t.Errorf("committed before SIGTERM: %v", err)
		}
	}
	for _, o := range open {
		if files := o.files(t, d.root); len(files) > 0 {
			t.Errorf("%v was open at the deadline, but left %q", o, files)
		}
	}
	if tmp := tempFiles(t, d.root); len(tmp) > 0 {
		t.Errorf("temp files after the drain: %q", tmp)
	}
	if _, err := os.Lstat(d.socket); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file after exit: Lstat = %v, want it removed", err)
	}
	if err := ca.Ping(ctx); err == nil {
		t.Errorf("Ping on a connection of the drained daemon succeeded")
	}
}
