// Package systemd_test checks the systemd units shipped in contrib/systemd:
// systemd-analyze verify accepts them without a warning, and they keep the
// promises the daemon relies on (Type=notify, a stop timeout beyond the drain
// deadline, one socket path for the service and the socket unit).
package systemd_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// docBlock returns the indented code block that follows the heading in
// docs/operations.md, its lines without the indent.
func docBlock(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/operations.md has no heading %q", heading)
	}
	var block []string
	for line := range strings.Lines(rest) {
		line = strings.TrimRight(line, "\n")
		if code, ok := strings.CutPrefix(line, "    "); ok {
			block = append(block, code)
		} else if len(block) > 0 || strings.HasPrefix(line, "#") {
			break
		}
	}
	if len(block) == 0 {
		t.Fatalf("docs/operations.md, %q: no indented code block", heading)
	}
	return block
}

// absPath is an absolute path in a shell line, after a space or a '>'.
var absPath = regexp.MustCompile(`([\s>])(/(?:etc|usr|var|run|opt)/)`)

// runInRoot runs lines of a documented block with bash, from dir, with every
// absolute path under /etc, /usr, /var, /run or /opt moved under root and
// the commands that need a real system (users, systemctl, curl) recorded in
// log instead of run.
func runInRoot(t *testing.T, dir, root, log string, lines []string) {
	t.Helper()
	var script strings.Builder
	for _, stub := range []string{"useradd", "usermod", "groupadd", "systemctl", "curl"} {
		fmt.Fprintf(&script, "%s() { echo \"%s $*\" >>%q; }\n", stub, stub, log)
	}
	fmt.Fprintf(&script, "cd %q\n", dir)
	for _, line := range lines {
		script.WriteString(absPath.ReplaceAllString(line, "${1}"+root+"${2}") + "\n")
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the documented block failed: %v\n%s\nscript:\n%s", err, out, script.String())
	}
}

// TestInstallBlock runs docs/operations.md's install block from a directory
// laid out as the release tarball is, into a temporary root, then the
// metrics drop-in block, and has systemd-analyze verify check the units as
// installed there (--root): the binary at ExecStart='s path, the drop-in
// read. The unit's own comment must give the same install lines.
func TestInstallBlock(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not found: the units cannot be verified; install it with `apt-get install systemd`")
	}
	install := docBlock(t, "### Install a node from the tarball")
	dropIn := docBlock(t, "### Metrics under systemd")

	// The unit's install comment: the same lines.
	data, err := os.ReadFile("shuffled.service")
	if err != nil {
		t.Fatal(err)
	}
	var comment []string
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "#   "); ok && len(comment) < len(install) && (len(comment) > 0 || rest == install[0]) {
			comment = append(comment, rest)
		}
	}
	if !slices.Equal(comment, install) {
		t.Errorf("shuffled.service's install comment gives\n%s\ndocs/operations.md gives\n%s", strings.Join(comment, "\n"), strings.Join(install, "\n"))
	}

	// The unpacked tarball: binaries (this test binary stands in) and units.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tarball := t.TempDir()
	copies := map[string]string{"shuffled": self, "shuffled-loadgen": self}
	for _, u := range units {
		copies["contrib/systemd/"+u] = u
	}
	for dst, src := range copies {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst = filepath.Join(tarball, dst)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The root: the directories every system has, and systemd's own units
	// (sysinit.target and the rest), which verify loads.
	root := t.TempDir()
	for _, d := range []string{"usr/local/bin", "etc/systemd/system", "etc/default", "usr/lib/systemd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	system := "/usr/lib/systemd/system"
	if _, err := os.Stat(system); err != nil {
		system = "/lib/systemd/system"
	}
	if out, err := exec.Command("cp", "-a", system, filepath.Join(root, "usr/lib/systemd/system")).CombinedOutput(); err != nil {
		t.Fatalf("copy systemd's units: %v\n%s", err, out)
	}
	log := filepath.Join(t.TempDir(), "calls")
	runInRoot(t, tarball, root, log, install)

	bin, err := os.Stat(filepath.Join(root, installedBinary))
	if err != nil || bin.Mode().Perm() != 0o755 {
		t.Fatalf("after the block, %s: %v (mode %v), want an executable 0755", installedBinary, err, bin)
	}
	for _, u := range units {
		if _, err := os.Stat(filepath.Join(root, "etc/systemd/system", u)); err != nil {
			t.Errorf("after the block: %v", err)
		}
	}
	verify := func() {
		t.Helper()
		cmd := exec.Command(analyze, "verify", "--root="+root, "shuffled.service", "shuffled.socket")
		cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0")
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify --root=%s shuffled.service shuffled.socket: %v\n%s", root, err, out)
		}
	}
	verify()

	runInRoot(t, tarball, root, log, dropIn)
	conf, err := filepath.Glob(filepath.Join(root, "etc/systemd/system/shuffled.service.d/*.conf"))
	if err != nil || len(conf) != 1 {
		t.Fatalf("after the drop-in block: drop-ins %v (%v), want one", conf, err)
	}
	d := parseUnit(t, conf[0])
	addr, _ := d.get("Service", "Environment")
	if v, ok := strings.CutPrefix(addr, "SHUFFLED_METRICS_ADDR="); !ok || v == "" {
		t.Errorf("the drop-in sets Environment=%q, want SHUFFLED_METRICS_ADDR=HOST:PORT", addr)
	}
	verify()

	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"systemctl daemon-reload", "systemctl enable --now shuffled.service", "useradd --system", "curl -fsS 127.0.0.1:9464/readyz"} {
		if !strings.Contains(string(calls), want) {
			t.Errorf("the blocks ran %q, want a %q", calls, want)
		}
	}
}

// TestMetricsDefault checks that the unit turns the metrics on, on a
// loopback address, through the variable a drop-in can change (a flag on
// ExecStart= would win over any drop-in's variable).
func TestMetricsDefault(t *testing.T) {
	svc := parseUnit(t, "shuffled.service")
	start, _ := svc.get("Service", "ExecStart")
	if strings.Contains(start, "--metrics-addr") {
		t.Errorf("ExecStart=%q sets --metrics-addr: a drop-in's SHUFFLED_METRICS_ADDR could not change it", start)
	}
	var addr string
	for _, env := range svc["Service"]["Environment"] {
		if v, ok := strings.CutPrefix(env, "SHUFFLED_METRICS_ADDR="); ok {
			addr = v
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		t.Fatalf("shuffled.service Environment=SHUFFLED_METRICS_ADDR=%q: %v; want a loopback HOST:PORT", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		t.Errorf("SHUFFLED_METRICS_ADDR=%s is not loopback", addr)
	}
	if allow, _ := svc.get("Service", "IPAddressAllow"); allow != "localhost" {
		t.Errorf("IPAddressAllow=%q, want localhost (the metrics endpoint's scrapers on this host)", allow)
	}
}
