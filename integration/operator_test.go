package integration

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var metricsRE = regexp.MustCompile(`metrics=(\S+)`)

// metricsURL returns the address a daemon's ready line names.
func (d *daemon) metricsURL(t *testing.T) string {
	t.Helper()
	line, ok := d.log.find(`msg="shuffled ready"`)
	m := metricsRE.FindStringSubmatch(line)
	if !ok || m == nil || m[1] == "off" {
		t.Fatalf("ready line %q names no metrics address", line)
	}
	return "http://" + m[1]
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// TestHealthEndpoints: a serving daemon answers /healthz and /readyz with
// 200, and its /metrics names its build.
func TestHealthEndpoints(t *testing.T) {
	d := startDaemon(t, config{args: []string{"--metrics-addr", "127.0.0.1:0"}})
	base := d.metricsURL(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, base+path); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
			t.Errorf("GET %s = %d %q, want 200 ok", path, code, body)
		}
	}
	if code, body := get(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "\nshuffled_build_info{") {
		t.Errorf("GET /metrics = %d without shuffled_build_info:\n%.2000s", code, body)
	}
	d.stop()
}

// TestMetricsAddrInUse: a metrics address that cannot be bound fails the
// start (exit 1, naming the address) rather than running without metrics.
func TestMetricsAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := launch(t, config{args: []string{"--metrics-addr", ln.Addr().String()}})
	if code := d.wait(); code != 1 {
		t.Fatalf("shuffled with --metrics-addr %s in use exited %d, want 1", ln.Addr(), code)
	}
	if !d.log.contains("--metrics-addr") || !d.log.contains("address already in use") {
		t.Errorf("log does not say the metrics address is in use:\n%s", d.log.tail(10))
	}
	if d.log.contains("shuffled ready") {
		t.Errorf("shuffled logged ready with its metrics address in use:\n%s", d.log.tail(10))
	}
}

// TestMetricsAllowRemote: a non-loopback metrics address is refused unless
// --metrics-allow-remote is given.
func TestMetricsAllowRemote(t *testing.T) {
	d := launch(t, config{args: []string{"--metrics-addr", "0.0.0.0:0"}})
	if code := d.wait(); code != 2 {
		t.Errorf("shuffled with --metrics-addr 0.0.0.0:0 exited %d, want 2 (usage)", code)
	}
	if !d.log.contains("--metrics-allow-remote") {
		t.Errorf("the refusal does not name --metrics-allow-remote:\n%s", d.log.tail(10))
	}
	d = startDaemon(t, config{args: []string{"--metrics-addr", "0.0.0.0:0", "--metrics-allow-remote"}})
	if !d.log.contains("--metrics-allow-remote") {
		t.Errorf("an open metrics endpoint is not logged:\n%s", d.log.tail(10))
	}
	d.stop()
}

// TestSecondDaemonOnOneRoot: a second daemon on another socket but the same
// root exits 1 naming the first's pid, and the first serves on.
func TestSecondDaemonOnOneRoot(t *testing.T) {
	first := startDaemon(t, config{})
	second := launch(t, config{root: first.root, socket: filepath.Join(t.TempDir(), "other.sock")})
	if code := second.wait(); code != 1 {
		t.Fatalf("second daemon on root %s exited %d, want 1", first.root, code)
	}
	want := "locked by pid " + strconv.Itoa(first.pid())
	if !second.log.contains(want) {
		t.Errorf("second daemon's log lacks %q:\n%s", want, second.log.tail(10))
	}
	if err := first.waitReady(); err != nil {
		t.Errorf("first daemon after the second's attempt: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(first.root, ".shuffled.lock")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(first.pid()) {
		t.Errorf("lock file holds %q, %v; want the first daemon's pid %d", b, err, first.pid())
	}
	first.stop()
	// The lock goes with the process: a third daemon on the root starts.
	third := startDaemon(t, config{root: first.root})
	third.stop()
}
