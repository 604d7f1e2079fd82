package unixsock

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a socket-activated daemon (see
// TestMain): it sets LISTEN_PID to its own pid, LISTEN_FDS to the variable's
// value, and reports what Activated returned.
const helperEnv = "UNIXSOCK_TEST_ACTIVATED_FDS"

func TestMain(m *testing.M) {
	if n, ok := os.LookupEnv(helperEnv); ok {
		activatedHelper(n)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// activatedHelper prints "ok <count> <env left>" or "error <message>" and,
// on success, says "hello" to one client of the first listener.
func activatedHelper(fds string) {
	os.Setenv(envListenPID, strconv.Itoa(os.Getpid()))
	os.Setenv(envListenFDs, fds)
	os.Setenv(envListenFDNames, "shuffled:other")
	lns, err := Activated()
	if err != nil {
		fmt.Printf("error %v\n", err)
		return
	}
	left := os.Getenv(envListenPID) + os.Getenv(envListenFDs) + os.Getenv(envListenFDNames)
	fmt.Printf("ok %d %q\n", len(lns), left)
	if len(lns) == 0 {
		return
	}
	c, err := lns[0].Accept()
	if err != nil {
		fmt.Printf("accept: %v\n", err)
		return
	}
	io.WriteString(c, "hello")
	c.Close()
}

// runActivated starts the helper with files as descriptors 3, 4, … and
// returns its first output line and the running command.
func runActivated(t *testing.T, files ...*os.File) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+strconv.Itoa(len(files)))
	cmd.ExtraFiles = files
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Wait()
		t.Fatalf("helper output: %q, %v", line, err)
	}
	return strings.TrimSpace(line), cmd
}

func unixListenerFile(t *testing.T, path string) *os.File {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestActivatedServes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	line, cmd := runActivated(t, unixListenerFile(t, path))
	defer cmd.Wait()
	if want := `ok 1 ""`; line != want {
		t.Fatalf("socket-activated helper said %q, want %q", line, want)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // guards against a hang
	got, err := io.ReadAll(c)
	if string(got) != "hello" || err != nil {
		t.Errorf("read from the activated listener = %q, %v, want %q", got, err, "hello")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("helper: %v", err)
	}
}

func TestActivatedRefusesOtherSockets(t *testing.T) {
	unixFile := unixListenerFile(t, filepath.Join(t.TempDir(), "s.sock"))
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	tcpFile, err := tcp.File()
	if err != nil {
		t.Fatal(err)
	}
	defer tcpFile.Close()

	line, cmd := runActivated(t, unixFile, tcpFile)
	if err := cmd.Wait(); err != nil {
		t.Errorf("helper: %v", err)
	}
	if !strings.HasPrefix(line, "error ") || !strings.Contains(line, "descriptor 4 (other)") {
		t.Errorf("Activated with a TCP listener at fd 4 said %q, want an error naming descriptor 4 (other)", line)
	}
}

func TestActivatedEnvironment(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	tests := []struct {
		pid, fds string // "-" leaves LISTEN_PID unset
		wantErr  bool
	}{
		{"-", "2", false},   // not activated
		{"1", "2", false},   // inherited by another process
		{"x", "2", true},    // garbage pid
		{self, "", true},    // no count
		{self, "-1", true},  // negative count
		{self, "two", true}, // garbage count
		{self, "0", false},  // activated with nothing
	}
	for _, tt := range tests {
		t.Setenv(envListenPID, tt.pid)
		if tt.pid == "-" {
			os.Unsetenv(envListenPID)
		}
		t.Setenv(envListenFDs, tt.fds)
		t.Setenv(envListenFDNames, "shuffled")
		lns, err := Activated()
		if len(lns) != 0 || (err != nil) != tt.wantErr {
			t.Errorf("Activated() with LISTEN_PID=%q LISTEN_FDS=%q = %d listeners, %v; want none, error %v",
				tt.pid, tt.fds, len(lns), err, tt.wantErr)
		}
		for _, key := range []string{envListenPID, envListenFDs, envListenFDNames} {
			if v, ok := os.LookupEnv(key); ok {
				t.Errorf("Activated() with LISTEN_PID=%q LISTEN_FDS=%q left %s=%q set", tt.pid, tt.fds, key, v)
			}
		}
	}
}
