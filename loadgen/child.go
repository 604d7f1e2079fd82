package loadgen

import (
	"bufio"
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
	"time"
)

// Bounds on a --daemon-bin child: how long it may take to say READY, and
// to exit after SIGTERM (its drain finds nothing open after a clean run).
const (
	childReadyTimeout = time.Minute
	childStopTimeout  = 30 * time.Second
	// childLogLines is how much of the child's log an error quotes.
	childLogLines = 8
)

// child is a daemon binary run as a child process (--daemon-bin): shuffled
// serve on a socket in a temporary directory, told to report READY on a
// notification socket of ours, as systemd would (sd_notify). It is a
// daemon in another process, as CUDA IPC needs, whose start-up the run
// measures.
type child struct {
	cmd    *exec.Cmd
	tmp    string // holds the sockets, and the root unless --root was given
	socket string
	root   string
	// ready is the time from exec to the READY notification.
	ready time.Duration

	notify *net.UnixConn
	exited chan struct{} // closed once the process is reaped; then err is set
	err    error

	mu struct {
		sync.Mutex
		tail []string // the last lines of its log
	}
}

// startChild starts cfg.DaemonBin and waits for it to notify READY.
func startChild(ctx context.Context, cfg *Config) (_ *child, err error) {
	tmp, err := os.MkdirTemp("", "shuffled-loadgen-")
	if err != nil {
		return nil, fmt.Errorf("loadgen: --daemon-bin: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	d := &child{tmp: tmp, socket: filepath.Join(tmp, "shuffled.sock"), root: cfg.Root, exited: make(chan struct{})}
	if d.root == "" {
		d.root = filepath.Join(tmp, "root")
	}
	notifyPath := filepath.Join(tmp, "notify.sock")
	if d.notify, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"}); err != nil {
		return nil, fmt.Errorf("loadgen: --daemon-bin: notification socket: %w", err)
	}
	readyc := make(chan struct{})
	go d.awaitReady(readyc)

	args := []string{"serve", "--socket", d.socket, "--root", d.root}
	if cfg.CPUCompress {
		args = append(args, "--no-cuda-compress")
	}
	d.cmd = exec.Command(cfg.DaemonBin, args...)
	d.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notifyPath)
	logs, err := d.cmd.StderrPipe()
	if err != nil {
		d.notify.Close()
		return nil, fmt.Errorf("loadgen: --daemon-bin: %w", err)
	}
	start := time.Now()
	if err := d.cmd.Start(); err != nil {
		d.notify.Close()
		return nil, usagef("--daemon-bin %s: %v", cfg.DaemonBin, err)
	}
	go d.reap(logs)

	timer := time.NewTimer(childReadyTimeout)
	defer timer.Stop()
	select {
	case <-readyc:
		d.ready = time.Since(start)
		return d, nil
	case <-d.exited:
		d.notify.Close()
		return nil, fmt.Errorf("loadgen: --daemon-bin %s exited before it was ready (%v): %s", cfg.DaemonBin, d.err, d.logTail())
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("loadgen: --daemon-bin %s: not ready after %v: %s", cfg.DaemonBin, childReadyTimeout, d.logTail())
	}
	d.cmd.Process.Kill()
	<-d.exited
	d.notify.Close()
	return nil, err
}

// awaitReady closes readyc when a READY=1 notification arrives; it
// returns when the notification socket is closed.
func (d *child) awaitReady(readyc chan<- struct{}) {
	buf := make([]byte, 4096)
	closed := false
	for {
		n, err := d.notify.Read(buf)
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if line == "READY=1" && !closed {
				close(readyc)
				closed = true
			}
		}
	}
}

// reap keeps the last lines of the child's log until it closes, then
// waits for the process and closes d.exited.
func (d *child) reap(logs io.Reader) {
	sc := bufio.NewScanner(logs)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		d.mu.Lock()
		d.mu.tail = append(d.mu.tail, sc.Text())
		if len(d.mu.tail) > childLogLines {
			d.mu.tail = d.mu.tail[1:]
		}
		d.mu.Unlock()
	}
	io.Copy(io.Discard, logs) // a line too long for the scanner
	d.err = d.cmd.Wait()
	close(d.exited)
}

// logTail is the last lines of the child's log, on one line.
func (d *child) logTail() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.mu.tail) == 0 {
		return "it logged nothing"
	}
	return "its log ends: " + strings.Join(d.mu.tail, " | ")
}

// stop sends SIGTERM, waits for the child to drain and exit (killing it
// after childStopTimeout), and removes the temporary directory.
func (d *child) stop() error {
	var err error
	if serr := d.cmd.Process.Signal(syscall.SIGTERM); serr != nil && !errors.Is(serr, os.ErrProcessDone) {
		err = serr
	}
	timer := time.NewTimer(childStopTimeout)
	defer timer.Stop()
	select {
	case <-d.exited:
		if d.err != nil {
			err = fmt.Errorf("exited with %v: %s", d.err, d.logTail())
		}
	case <-timer.C:
		d.cmd.Process.Kill()
		<-d.exited
		err = fmt.Errorf("still running %v after SIGTERM, killed: %s", childStopTimeout, d.logTail())
	}
	d.notify.Close()
	if rerr := os.RemoveAll(d.tmp); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("loadgen: --daemon-bin daemon: %w", err)
	}
	return nil
}

// removeApp removes what a run wrote under the child's root.
func (d *child) removeApp(appID string) error {
	dir := filepath.Join(d.root, appID)
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("loadgen: remove %s: %w", dir, err)
	}
	return nil
}
