package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
)

// nobody is the uid and gid the peer test's child runs as.
const nobody = 65534

// runHelper is the test binary acting as a child process: mode "peer" dials
// the socket args[0] and writes one line to stdout: "ok" when a handshake
// and a Ping succeed, "refused <code>" when the daemon sends an Error frame
// first, or "error <text>". It reads the daemon's first frame before it
// sends anything, so that a refusal is seen whatever the timing.
func runHelper(mode string, args []string) int {
	if h, ok := userHelpers[mode]; ok {
		if err := h(args); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("ok")
		return 0
	}
	if mode != "peer" || len(args) != 1 {
		fmt.Fprintf(os.Stderr, "helper: unknown mode %q %q\n", mode, args)
		return 2
	}
	fmt.Println(peer(args[0]))
	return 0
}

func peer(socket string) string {
	conn, err := net.DialTimeout("unix", socket, waitTimeout)
	if err != nil {
		return "error " + err.Error()
	}
	uc := conn.(*net.UnixConn)
	defer uc.Close()
	// A refused peer hears from the daemon at once; an allowed one hears
	// nothing until it says Hello.
	uc.SetReadDeadline(time.Now().Add(time.Second))
	rd := protocol.NewReader(uc, protocol.DefaultMaxFrame)
	defer rd.Close()
	f, err := rd.ReadFrame(nil)
	switch {
	case err == nil:
		m, err := protocol.DecodeFrame(&f)
		if e, ok := m.(*protocol.Error); ok && err == nil {
			return fmt.Sprintf("refused %v", e.Code)
		}
		return fmt.Sprintf("error unexpected %v frame before Hello (%v)", f.Type, err)
	case errors.Is(err, io.EOF):
		return "error connection closed without an Error frame"
	case !errors.Is(err, os.ErrDeadlineExceeded):
		return "error " + err.Error()
	}
	uc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.Dial(ctx, socket)
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return fmt.Sprintf("refused %v", pe.Code) // the refusal came late
	}
	if err != nil {
		return "error " + err.Error()
	}
	defer c.Close()
	if err := c.Ping(ctx); err != nil {
		return "error " + err.Error()
	}
	return "ok"
}

var helperOnce struct {
	sync.Once
	path string
	err  error
}

// helperBinary returns a copy of this test binary that any user may run.
func helperBinary(t *testing.T) string {
	t.Helper()
	helperOnce.Do(func() {
		self, err := os.Executable()
		if err != nil {
			helperOnce.err = err
			return
		}
		b, err := os.ReadFile(self)
		if err != nil {
			helperOnce.err = err
			return
		}
		helperOnce.path = filepath.Join(binDir, "helper")
		helperOnce.err = os.WriteFile(helperOnce.path, b, 0o755)
	})
	if helperOnce.err != nil {
		t.Fatalf("copy of the test binary for the child: %v", helperOnce.err)
	}
	return helperOnce.path
}

// TestPeerCredentials checks the SO_PEERCRED policy with a child process
// that runs as nobody: refused (PermissionDenied, before it says anything)
// by a daemon that allows only root and itself, served by one that lists
// its uid, or its group.
func TestPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a child as another uid; root is always allowed, so the policy cannot be tested from one uid")
	}
	helper := helperBinary(t)
	// The socket's directory and the socket itself must let nobody
	// connect, so that only the daemon's policy stands in its way.
	dir, err := os.MkdirTemp("", "shuffled-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"default", nil, "refused PermissionDenied"},
		{"other-uid-listed", []string{"--allowed-uids", "1,2"}, "refused PermissionDenied"},
		{"other-gid-listed", []string{"--allowed-gids", "1"}, "refused PermissionDenied"},
		{"uid-listed", []string{"--allowed-uids", fmt.Sprint(nobody)}, "ok"},
		{"gid-listed", []string{"--allowed-gids", fmt.Sprint(nobody)}, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket := filepath.Join(dir, tc.name+".sock")
			d := startDaemon(t, config{socket: socket, args: append([]string{"--socket-mode", "0666"}, tc.args...)})
			cmd := exec.Command(helper, socket)
			cmd.Env = append(os.Environ(), helperEnv+"=peer")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child as uid %d: %v (%s)", nobody, err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("child as uid %d with %q: %s, want %s", nobody, tc.args, got, tc.want)
			}
			// The daemon goes on serving its own uid.
			c, _ := d.dial(t, "app", nil)
			if err := c.Ping(context.Background()); err != nil {
				t.Errorf("Ping from root after the child: %v", err)
			}
			d.stop()
		})
	}
}
