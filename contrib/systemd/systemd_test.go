// Package systemd_test checks the systemd units shipped in contrib/systemd:
// systemd-analyze verify accepts them without a warning, and they keep the
// promises the daemon relies on (Type=notify, a stop timeout beyond the drain
// deadline, one socket path for the service and the socket unit).
package systemd_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var units = []string{"shuffled.service", "shuffled.socket"}

// installedBinary is the ExecStart= path in the unit, which the test machine
// does not have.
const installedBinary = "/usr/local/bin/shuffled"

// TestVerify runs systemd-analyze verify on copies of both units, with the
// daemon's install path replaced by an executable that exists (this test
// binary): verify rejects an ExecStart= whose binary is missing. Verify
// reports unknown directives and bad values as warnings with exit status 0,
// so any output fails the test.
func TestVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if testing.Short() {
			t.Skip("systemd-analyze not found; -short skips the unit check")
		}
		t.Fatal("systemd-analyze not found: the units cannot be verified; install it with `apt-get install systemd`")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, name := range units {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), installedBinary, self)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	cmd := exec.Command(analyze, append([]string{"verify"}, paths...)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0")
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", strings.Join(units, " "), err, out)
	}
}

// unit is a parsed unit file: section → key → values in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, name string) unit {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: malformed line %q", name, line)
			}
			u[section][key] = append(u[section][key], value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// get returns the last value of key, as systemd does, and whether it is set.
func (u unit) get(section, key string) (string, bool) {
	v := u[section][key]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// flagValue returns the value of --name=value in a command line.
func flagValue(cmdline, name string) (string, bool) {
	for field := range strings.FieldsSeq(cmdline) {
		if v, ok := strings.CutPrefix(field, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestServiceContract(t *testing.T) {
	svc := parseUnit(t, "shuffled.service")
	sock := parseUnit(t, "shuffled.socket")

	for _, want := range []struct{ key, value string }{
		{"Type", "notify"},
		{"NotifyAccess", "main"},
		{"Restart", "on-failure"},
		{"RuntimeDirectory", "shuffled"},
		{"RuntimeDirectoryPreserve", "yes"}, // else a restart deletes the .socket unit's socket
		{"StateDirectory", "shuffled"},
		{"NoNewPrivileges", "yes"},
		{"ProtectSystem", "strict"},
		{"CapabilityBoundingSet", ""},
		{"SystemCallArchitectures", "native"},
	} {
		if got, ok := svc.get("Service", want.key); !ok || got != want.value {
			t.Errorf("shuffled.service %s=%q (set %v), want %q", want.key, got, ok, want.value)
		}
	}
	for _, key := range []string{"WatchdogSec", "LimitNOFILE", "User", "Group", "UMask"} {
		if v, ok := svc.get("Service", key); !ok || v == "" {
			t.Errorf("shuffled.service lacks %s=", key)
		}
	}
	if v, ok := svc.get("Service", "PrivateUsers"); ok && v != "no" {
		t.Errorf("shuffled.service PrivateUsers=%s: it would hide executors' uids from SO_PEERCRED", v)
	}

	exec, _ := svc.get("Service", "ExecStart")
	if !strings.HasPrefix(exec, installedBinary+" serve ") {
		t.Errorf("ExecStart=%q, want %q serve ...", exec, installedBinary)
	}
	drainText, ok := flagValue(exec, "drain-timeout")
	if !ok {
		t.Fatalf("ExecStart=%q has no --drain-timeout=; the stop timeout must be checked against it", exec)
	}
	drain, err := time.ParseDuration(drainText)
	if err != nil {
		t.Fatalf("ExecStart --drain-timeout=%q: %v", drainText, err)
	}
	stopText, _ := svc.get("Service", "TimeoutStopSec")
	stop, err := time.ParseDuration(stopText)
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v (write it as a Go duration such as 45s)", stopText, err)
	}
	if stop <= drain {
		t.Errorf("TimeoutStopSec=%v, want more than --drain-timeout=%v so SIGKILL never cuts a drain", stop, drain)
	}

	listen, _ := sock.get("Socket", "ListenStream")
	if socket, _ := flagValue(exec, "socket"); socket != listen {
		t.Errorf("ExecStart --socket=%q, shuffled.socket ListenStream=%q, want the same path", socket, listen)
	}
	if !strings.HasPrefix(listen, "/run/shuffled/") {
		t.Errorf("ListenStream=%q, want it under the service's RuntimeDirectory /run/shuffled", listen)
	}
	if mode, _ := sock.get("Socket", "SocketMode"); mode != "0660" {
		t.Errorf("shuffled.socket SocketMode=%q, want 0660", mode)
	}
}
