package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// listen opens a datagram socket standing in for systemd's notify socket and
// points $NOTIFY_SOCKET at it.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatalf("ListenUnixgram(%q): %v", name, err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv(envSocket, name)
	return conn
}

// receive reads one datagram. The deadline only guards against a hung test;
// nothing is timed.
func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("read notification: %v", err)
	}
	return string(buf[:n])
}

func TestNotifyWithoutSocket(t *testing.T) {
	t.Setenv(envSocket, "")
	os.Unsetenv(envSocket)
	sent, err := Ready()
	if sent || err != nil {
		t.Errorf("Ready() without NOTIFY_SOCKET = %v, %v, want false, nil", sent, err)
	}
}

func TestNotifyStates(t *testing.T) {
	tests := []struct {
		name string
		send func() (bool, error)
		want string
	}{
		{"Ready", Ready, "READY=1"},
		{"Stopping", Stopping, "STOPPING=1"},
		{"Watchdog", Watchdog, "WATCHDOG=1"},
		{"Status", func() (bool, error) { return Status("draining %d outputs", 3) }, "STATUS=draining 3 outputs"},
		{"StatusNewline", func() (bool, error) { return Status("a\nb") }, "STATUS=a b"},
		{"Notify", func() (bool, error) { return Notify("READY=1\nSTATUS=up") }, "READY=1\nSTATUS=up"},
	}
	for _, socket := range []string{"path", "abstract"} {
		t.Run(socket, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "notify.sock")
			if socket == "abstract" {
				name = fmt.Sprintf("@shuffled-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
			}
			conn := listen(t, name)
			for _, tt := range tests {
				sent, err := tt.send()
				if !sent || err != nil {
					t.Fatalf("%s() = %v, %v, want true, nil", tt.name, sent, err)
				}
				if got := receive(t, conn); got != tt.want {
					t.Errorf("%s() sent %q, want %q", tt.name, got, tt.want)
				}
			}
		})
	}
}

func TestNotifyErrors(t *testing.T) {
	tests := []struct {
		socket string
		is     error
	}{
		{"vsock:2:1234", ErrUnsupportedSocket},
		{"relative/notify.sock", ErrUnsupportedSocket},
		{filepath.Join(t.TempDir(), "missing.sock"), nil},
	}
	for _, tt := range tests {
		t.Setenv(envSocket, tt.socket)
		sent, err := Ready()
		if sent || err == nil {
			t.Errorf("Ready() with NOTIFY_SOCKET=%q = %v, %v, want false and an error", tt.socket, sent, err)
			continue
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("Ready() with NOTIFY_SOCKET=%q = %v, want %v", tt.socket, err, tt.is)
		}
	}
}

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	tests := []struct {
		usec, pid string // "-" leaves the variable unset
		want      time.Duration
		wantOK    bool
	}{
		{"-", "-", 0, false},
		{"30000000", "-", 30 * time.Second, true},
		{"30000000", self, 30 * time.Second, true},
		{"30000000", "1", 0, false},
		{"30000000", "x", 0, false},
		{"0", self, 0, false},
		{"-5", self, 0, false},
		{"abc", self, 0, false},
		{"9223372036854775807", self, 0, false},
	}
	for _, tt := range tests {
		setOrUnset(t, envWatchdogUsec, tt.usec)
		setOrUnset(t, envWatchdogPID, tt.pid)
		got, ok := WatchdogInterval()
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("WatchdogInterval() with WATCHDOG_USEC=%q WATCHDOG_PID=%q = %v, %v, want %v, %v",
				tt.usec, tt.pid, got, ok, tt.want, tt.wantOK)
		}
	}
}

func setOrUnset(t *testing.T, key, value string) {
	t.Helper()
	t.Setenv(key, value) // restores the old value at cleanup
	if value == "-" {
		os.Unsetenv(key)
	}
}

func TestRunWatchdogDisabled(t *testing.T) {
	setOrUnset(t, envWatchdogUsec, "-")
	// A disabled watchdog returns without waiting for ctx.
	if err := RunWatchdog(context.Background(), func() bool { return true }); err != nil {
		t.Errorf("RunWatchdog() with the watchdog disabled = %v, want nil", err)
	}
}

func TestRunWatchdogSkipsUnhealthyTicks(t *testing.T) {
	conn := listen(t, filepath.Join(t.TempDir(), "notify.sock"))
	t.Setenv(envWatchdogUsec, "2000")
	t.Setenv(envWatchdogPID, strconv.Itoa(os.Getpid()))

	const unhealthy = 3
	var calls atomic.Int64
	healthy := func() bool { return calls.Add(1) > unhealthy }

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunWatchdog(ctx, healthy) }()

	for i := range 2 {
		if got := receive(t, conn); got != StateWatchdog {
			t.Errorf("keep-alive %d = %q, want %q", i, got, StateWatchdog)
		}
	}
	// Each keep-alive follows one healthy check; the unhealthy ones sent nothing.
	if n := calls.Load(); n < unhealthy+2 {
		t.Errorf("healthy called %d times before 2 keep-alives, want at least %d", n, unhealthy+2)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunWatchdog() after cancel = %v, want nil", err)
	}
}

func TestRunWatchdogSendError(t *testing.T) {
	t.Setenv(envSocket, filepath.Join(t.TempDir(), "gone.sock"))
	t.Setenv(envWatchdogUsec, "2000")
	setOrUnset(t, envWatchdogPID, "-")
	if err := RunWatchdog(context.Background(), func() bool { return true }); err == nil {
		t.Error("RunWatchdog() with an unreachable NOTIFY_SOCKET = nil, want an error")
	}
}
