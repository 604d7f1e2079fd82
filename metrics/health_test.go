package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shuffled/shuffled/internal/buildinfo"
)

func TestProbes(t *testing.T) {
	m := New()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux := http.NewServeMux()
		mux.Handle(HealthzPath, m.probeHandler(false))
		mux.Handle(ReadyzPath, m.probeHandler(true))
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	for _, path := range []string{HealthzPath, ReadyzPath} {
		if code, body := get(path); code != http.StatusServiceUnavailable || body != "starting" {
			t.Errorf("GET %s before WatchHealth = %d %q, want 503 \"starting\"", path, code, body)
		}
	}
	var draining atomic.Bool
	m.WatchHealth(func() error { return nil }, func() error {
		if draining.Load() {
			return errors.New("draining")
		}
		return nil
	})
	for _, path := range []string{HealthzPath, ReadyzPath} {
		if code, body := get(path); code != http.StatusOK || body != "ok" {
			t.Errorf("GET %s serving = %d %q, want 200 \"ok\"", path, code, body)
		}
	}
	draining.Store(true)
	if code, body := get(ReadyzPath); code != http.StatusServiceUnavailable || body != "draining" {
		t.Errorf("GET %s draining = %d %q, want 503 \"draining\"", ReadyzPath, code, body)
	}
	if code, _ := get(HealthzPath); code != http.StatusOK {
		t.Errorf("GET %s draining = %d, want 200", HealthzPath, code)
	}
}

func TestValidateAddrAllowRemote(t *testing.T) {
	for _, tt := range []struct {
		addr string
		ok   bool
	}{
		{"0.0.0.0:9100", true},
		{":9100", true},
		{"10.0.0.1:9100", true},
		{"[::]:9100", true},
		{"127.0.0.1:9100", true},
		{"10.0.0.1", false},
		{"10.0.0.1:99999", false},
	} {
		if err := ValidateAddr(tt.addr, true); (err == nil) != tt.ok {
			t.Errorf("ValidateAddr(%q, true) = %v, want ok %v", tt.addr, err, tt.ok)
		}
	}
	if err := ValidateAddr("0.0.0.0:9100", false); !errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), "--metrics-allow-remote") {
		t.Errorf("ValidateAddr(%q, false) = %v, want %v naming --metrics-allow-remote", "0.0.0.0:9100", err, ErrNotLoopback)
	}
	ln, err := Listen("0.0.0.0:0", true)
	if err != nil {
		t.Fatalf("Listen(0.0.0.0:0, true) = %v", err)
	}
	ln.Close()
}

func TestBuildInfoAndRefusals(t *testing.T) {
	m := New()
	m.RequestsRefused.WithLabelValues(RequestRegister, "PermissionDenied").Add(2)
	m.DiskFreeBytes.WithLabelValues("/data1").Set(100)
	m.DiskSizeBytes.WithLabelValues("/data1").Set(1000)
	body := scrape(t, m)
	bi := buildinfo.Get()
	for _, line := range []string{
		`shuffled_build_info{commit="` + bi.Commit + `",go_version="` + bi.GoVersion + `",version="` + bi.Version + `"} 1`,
		`shuffled_requests_refused_total{code="PermissionDenied",request="RegisterExecutor"} 2`,
		`shuffled_disk_free_bytes{disk="/data1"} 100`,
		`shuffled_disk_size_bytes{disk="/data1"} 1000`,
	} {
		if !hasLine(body, line) {
			t.Errorf("scrape lacks line %q", line)
		}
	}
}
