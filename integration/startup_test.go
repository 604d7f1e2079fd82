package integration

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// TestStartup starts the daemon and logs how long it took to serve: from
// exec to the ready line, to the first Ping answered, and the startup figure
// the daemon itself logs. Nothing is asserted about the times (the goal,
// under 50 ms, lives in BenchmarkStartup); the ready line must carry its
// figure, and nothing is primed: the first map output works.
func TestStartup(t *testing.T) {
	leakcheck.Check(t)
	d := launch(t, config{})
	if err := d.waitReady(); err != nil {
		t.Fatal(err)
	}
	pinged := time.Now()
	if d.startup <= 0 {
		t.Errorf("the ready line has no startup figure: %q", d.log.tail(5))
	}
	t.Logf("exec → ready line %v, → first Ping answered %v; the daemon logs startup=%v",
		d.ready.Sub(d.launched), pinged.Sub(d.launched), d.startup)

	c, reg := d.dial(t, "app", nil)
	o := plan(5, "app", layoutOf(reg, nil), shufflefile.ID{Shuffle: 1, Map: 1})
	res, err := o.write(context.Background(), c)
	if err != nil {
		t.Fatalf("first map output: %v", err)
	}
	if err := o.verify(&res); err != nil {
		t.Error(err)
	}
	d.stop()
}

// BenchmarkStartup restarts the daemon b.N times on one root and socket and
// measures exec to the first Ping answered (ns/op); startup-ns/op is the
// daemon's own figure (flag parsing to ready). Target: under 50 ms.
func BenchmarkStartup(b *testing.B) {
	dir := b.TempDir()
	cfg := config{socket: filepath.Join(dir, "shuffled.sock"), root: filepath.Join(dir, "root")}
	var own time.Duration
	for i := 0; i < b.N; i++ {
		d := launch(b, cfg)
		if err := d.waitReady(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		own += d.startup
		d.stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(own.Nanoseconds())/float64(b.N), "startup-ns/op")
}

// unitFile is the systemd service the repository ships.
const unitFile = "../contrib/systemd/shuffled.service"

// execStart returns the arguments of the unit's ExecStart= line, the
// binary's path first.
func execStart(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "ExecStart="); ok {
			return strings.Fields(rest)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("%s has no ExecStart= line", unitFile)
	return nil
}

// TestServeHelpCoversUnit checks that `shuffled serve --help` lists every
// flag the systemd unit's ExecStart= passes and every SHUFFLED_* variable its
// comments tell operators to set, and that the unit's command line itself
// starts the daemon (with its paths moved into a temp dir).
func TestServeHelpCoversUnit(t *testing.T) {
	leakcheck.Check(t)
	args := execStart(t)
	if len(args) < 2 || filepath.Base(args[0]) != "shuffled" || args[1] != "serve" {
		t.Fatalf("ExecStart= runs %q, want shuffled serve", args)
	}
	out, err := exec.Command(binPath, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("shuffled serve --help: %v\n%s", err, out)
	}
	help := string(out)

	flags := map[string]string{} // name → value in the unit
	for _, a := range args[2:] {
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			t.Fatalf("ExecStart= argument %q is not a flag", a)
		}
		flags[name] = value
		if !regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(name) + `(\s|$)`).MatchString(help) {
			t.Errorf("ExecStart= passes --%s, which serve --help does not list:\n%s", name, help)
		}
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range regexp.MustCompile(`SHUFFLED_[A-Z_]+`).FindAllString(string(unit), -1) {
		if !strings.Contains(help, "(env "+env+")") {
			t.Errorf("%s names %s, which serve --help does not list", unitFile, env)
		}
	}

	// The unit's own command line, with its paths moved here.
	dir := t.TempDir()
	var run []string
	for name, value := range flags {
		switch name {
		case "socket":
			value = filepath.Join(dir, "shuffled.sock")
		case "root":
			value = filepath.Join(dir, "root")
		}
		run = append(run, "--"+name+"="+value)
	}
	d := launch(t, config{socket: filepath.Join(dir, "shuffled.sock"), root: filepath.Join(dir, "root"), args: run})
	if err := d.waitReady(); err != nil {
		t.Fatalf("the unit's ExecStart= flags %q: %v", run, err)
	}
	d.stop()
}

// TestSocketActivation hands the daemon a listening socket the way
// shuffled.socket does. It serves on it, says so in its ready line, and
// leaves the socket file (systemd's) in place when it stops.
func TestSocketActivation(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "activated.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false) // the socket file is the service manager's
	f, err := ln.File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// --socket names another path: the daemon must use the socket it was
	// handed, not listen on its own.
	own := filepath.Join(dir, "own.sock")
	d := launch(t, config{socket: socket, activated: f, args: []string{"--socket", own}})
	f.Close() // the daemon holds its own copy
	if err := d.waitReady(); err != nil {
		t.Fatal(err)
	}
	if line, _ := d.log.waitFor("shuffled ready", d.exited); !strings.Contains(line, "activated=true") {
		t.Errorf("ready line %q does not say activated=true", line)
	}
	if _, err := os.Lstat(own); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the activated daemon made its own socket %s too (Lstat: %v)", own, err)
	}
	c, reg := d.dial(t, "app", nil)
	o := plan(9, "app", layoutOf(reg, nil), shufflefile.ID{Shuffle: 1, Map: 1})
	res, err := o.write(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.verify(&res); err != nil {
		t.Error(err)
	}
	d.stop()
	if _, err := os.Lstat(socket); err != nil {
		t.Errorf("the activated socket's file after the daemon stopped: %v, want it left to the service manager", err)
	}
}
