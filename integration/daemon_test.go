package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
)

// waitTimeout bounds every wait on the daemon; reaching it fails the test
// rather than hanging it. It is no speed goal.
const waitTimeout = 60 * time.Second

// daemon is one running shuffled process.
type daemon struct {
	t      testing.TB
	cmd    *exec.Cmd
	socket string
	root   string
	log    *logBuffer

	exited  chan struct{} // closed once the process has exited and been reaped
	waitErr error         // cmd.Wait's error, set before exited closes

	launched time.Time     // just before exec
	ready    time.Time     // when the ready line was seen
	startup  time.Duration // the startup= figure of the ready line
}

// config describes a daemon to start. Zero socket or root get fresh temp
// paths.
type config struct {
	socket, root string
	args         []string // more flags of `shuffled serve`
	env          []string // more environment variables
	// activated, when set, is a listening socket handed over as systemd
	// socket activation does: descriptor 3, LISTEN_PID, LISTEN_FDS and
	// LISTEN_FDNAMES.
	activated *os.File
	// cred, when set, runs the daemon as that uid, gid and groups.
	cred *syscall.Credential
}

// startDaemon starts shuffled and waits until its socket serves. The daemon
// is killed, if still running, when t ends.
func startDaemon(t testing.TB, cfg config) *daemon {
	t.Helper()
	d := launch(t, cfg)
	if err := d.waitReady(); err != nil {
		t.Fatal(err)
	}
	return d
}

// launch execs shuffled without waiting for it.
func launch(t testing.TB, cfg config) *daemon {
	t.Helper()
	if cfg.socket == "" || cfg.root == "" {
		dir := t.TempDir()
		if cfg.socket == "" {
			cfg.socket = filepath.Join(dir, "shuffled.sock")
		}
		if cfg.root == "" {
			cfg.root = filepath.Join(dir, "root")
		}
	}
	args := append([]string{"serve", "--socket", cfg.socket, "--root", cfg.root, "--pool", "2", "--log-level", "debug"}, cfg.args...)
	cmd := exec.Command(binPath, args...)
	if cfg.activated != nil {
		// LISTEN_PID must be the daemon's own pid: a shell learns it
		// ($$) and execs the daemon in its place.
		cmd = exec.Command("/bin/sh", append([]string{"-c", `LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=shuffled exec "$0" "$@"`, binPath}, args...)...)
		cmd.ExtraFiles = []*os.File{cfg.activated}
	}
	d := &daemon{
		t:      t,
		cmd:    cmd,
		socket: cfg.socket,
		root:   cfg.root,
		log:    newLogBuffer(),
		exited: make(chan struct{}),
	}
	d.cmd.Env = append(os.Environ(), cfg.env...)
	if cfg.cred != nil {
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cfg.cred}
	}
	d.cmd.Stdout = d.log
	d.cmd.Stderr = d.log
	d.launched = time.Now()
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start shuffled: %v", err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
		d.log.wake()
	}()
	t.Cleanup(func() {
		if d.running() {
			d.kill()
		}
		if t.Failed() {
			t.Logf("shuffled (pid %d) log:\n%s", d.cmd.Process.Pid, d.log.tail(80))
		}
	})
	return d
}

var startupRE = regexp.MustCompile(`startup=(\S+)`)

// waitReady waits for the "shuffled ready" log line, which the daemon
// writes once its socket listens, then proves it by a handshake and a
// Ping.
func (d *daemon) waitReady() error {
	line, err := d.log.waitFor("msg=\"shuffled ready\"", d.exited)
	if err != nil {
		return fmt.Errorf("shuffled did not get ready: %w\n%s", err, d.log.tail(40))
	}
	d.ready = time.Now()
	if m := startupRE.FindStringSubmatch(line); m != nil {
		d.startup, _ = time.ParseDuration(m[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.socket)
	if err != nil {
		return fmt.Errorf("dial after the ready line: %w", err)
	}
	defer c.Close()
	if err := c.Ping(ctx); err != nil {
		return fmt.Errorf("ping after the ready line: %w", err)
	}
	return nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to end.
func (d *daemon) kill() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// signal sends sig to the daemon.
func (d *daemon) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to exit and returns its exit status.
func (d *daemon) wait() int {
	d.t.Helper()
	select {
	case <-d.exited:
	case <-time.After(waitTimeout):
		d.t.Fatalf("shuffled still running %v after it was told to stop\n%s", waitTimeout, d.log.tail(40))
	}
	return d.cmd.ProcessState.ExitCode()
}

// stop sends SIGTERM and checks that the daemon drains and exits 0.
func (d *daemon) stop() {
	d.t.Helper()
	d.signal(syscall.SIGTERM)
	if code := d.wait(); code != 0 {
		d.t.Errorf("shuffled exited %d after SIGTERM, want 0 (%v)\n%s", code, d.waitErr, d.log.tail(40))
	}
}

// dial connects a client and registers it for app (executor "1"), into the
// daemon's root or, with localDirs, into Spark's layout under them.
func (d *daemon) dial(t testing.TB, app string, localDirs []string) (*client.Client, protocol.Registered) {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, d.socket, client.WithName("integration"))
	if err != nil {
		t.Fatalf("Dial %s: %v", d.socket, err)
	}
	t.Cleanup(func() { c.Close() })
	req := protocol.RegisterExecutor{AppID: app, ExecutorID: "1", LocalDirs: localDirs}
	if len(localDirs) > 0 {
		req.SubDirs = subDirs
	}
	reg, err := c.Register(ctx, req)
	if err != nil {
		t.Fatalf("Register %s: %v", app, err)
	}
	return c, reg
}

// vmRSS returns the resident set of process pid in bytes.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// logBuffer collects a daemon's output and lets tests wait for a line.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newLogBuffer() *logBuffer { return &logBuffer{changed: make(chan struct{})} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

// wake wakes the waiters without new output (the process ended).
func (l *logBuffer) wake() { l.Write(nil) }

// waitFor returns the first complete line that contains substr, waiting for
// it until done is closed (the process ended) or waitTimeout passes.
func (l *logBuffer) waitFor(substr string, done <-chan struct{}) (string, error) {
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		line, ok := l.find(substr)
		changed := l.changed
		l.mu.Unlock()
		if ok {
			return line, nil
		}
		select {
		case <-changed:
		case <-done:
			l.mu.Lock()
			line, ok := l.find(substr)
			l.mu.Unlock()
			if ok {
				return line, nil
			}
			return "", fmt.Errorf("process ended without logging %q", substr)
		case <-timeout.C:
			return "", fmt.Errorf("no %q logged within %v", substr, waitTimeout)
		}
	}
}

func (l *logBuffer) find(substr string) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			return sc.Text(), true
		}
	}
	return "", false
}

// contains reports whether any output so far contains substr.
func (l *logBuffer) contains(substr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.buf.Bytes(), []byte(substr))
}

// tail returns the last n lines.
func (l *logBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimRight(l.buf.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
