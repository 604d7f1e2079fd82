package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// scrape returns the text exposition of m.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d, want 200: %s", Path, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET %s Content-Type = %q, want text/plain", Path, ct)
	}
	return rec.Body.String()
}

func TestMetricsExposition(t *testing.T) {
	m := New()
	New() // a second set on its own registry does not collide

	m.BytesIn.Add(1 << 20)
	m.BytesOut.Add(4096)
	m.Records.Add(200)
	m.Commits.Inc()
	m.Aborts.Add(2)
	m.Errors.WithLabelValues("BAD_FRAME").Add(3)
	m.Errors.WithLabelValues("UNKNOWN_TYPE").Inc()
	m.LimiterWaitSeconds.Add(0.25)
	m.LimiterWaits.Add(5)
	m.LimiterLimitBytes.Set(512 << 20)
	m.WatchLimiter(func() (int64, int64) { return 1000, 7000 })
	m.OpenMapOutputs.Set(4)
	m.RunsPerMapOutput.Observe(3)
	m.MergeBytes.Add(123)
	m.CommitSeconds.Observe(0.003)
	m.CommitPhaseSeconds.WithLabelValues(PhaseMergeTail).Observe(0.02)
	m.Sessions.Set(2)
	m.DiskBytes.WithLabelValues("/data1").Set(9999)
	m.Applications.Set(1)
	m.Shuffles.Set(6)
	m.Removals.WithLabelValues(RemovalApplication).Inc()
	m.DiskFullRefusals.Inc()
	m.DisksOutOfRotation.Set(1)

	body := scrape(t, m)
	for _, line := range []string{
		"shuffled_input_bytes_total 1.048576e+06",
		"shuffled_output_bytes_total 4096",
		"shuffled_records_total 200",
		"shuffled_commits_total 1",
		"shuffled_aborts_total 2",
		`shuffled_errors_total{code="BAD_FRAME"} 3`,
		`shuffled_errors_total{code="UNKNOWN_TYPE"} 1`,
		"shuffled_limiter_wait_seconds_total 0.25",
		"shuffled_limiter_waits_total 5",
		"shuffled_limiter_limit_bytes 5.36870912e+08",
		"shuffled_limiter_in_flight_bytes 1000",
		"shuffled_limiter_peak_bytes 7000",
		"shuffled_open_map_outputs 4",
		`shuffled_map_output_runs_bucket{le="2"} 0`,
		`shuffled_map_output_runs_bucket{le="3"} 1`,
		"shuffled_map_output_runs_count 1",
		"shuffled_merge_bytes_total 123",
		`shuffled_commit_duration_seconds_bucket{le="0.001"} 0`,
		`shuffled_commit_duration_seconds_bucket{le="0.0025"} 0`,
		`shuffled_commit_duration_seconds_bucket{le="0.005"} 1`,
		`shuffled_commit_duration_seconds_bucket{le="10"} 1`,
		"shuffled_commit_duration_seconds_sum 0.003",
		`shuffled_commit_phase_duration_seconds_bucket{phase="merge_tail",le="0.0001"} 0`,
		`shuffled_commit_phase_duration_seconds_bucket{phase="merge_tail",le="0.01"} 0`,
		`shuffled_commit_phase_duration_seconds_bucket{phase="merge_tail",le="0.025"} 1`,
		`shuffled_commit_phase_duration_seconds_count{phase="merge_tail"} 1`,
		`shuffled_commit_phase_duration_seconds_count{phase="files"} 0`,
		"shuffled_sessions 2",
		`shuffled_disk_bytes{disk="/data1"} 9999`,
		"shuffled_applications 1",
		"shuffled_shuffles 6",
		`shuffled_removals_total{kind="application"} 1`,
		`shuffled_removals_total{kind="expired"} 0`,
		`shuffled_removals_total{kind="shuffle"} 0`,
		"shuffled_disk_full_refusals_total 1",
		"shuffled_disks_out_of_rotation 1",
	} {
		if !hasLine(body, line) {
			t.Errorf("scrape lacks line %q", line)
		}
	}
	for _, prefix := range []string{"go_goroutines ", "process_open_fds ", "process_resident_memory_bytes "} {
		if !strings.Contains(body, "\n"+prefix) {
			t.Errorf("scrape lacks the runtime metric %q", strings.TrimSpace(prefix))
		}
	}
}

func hasLine(body, line string) bool {
	for l := range strings.SplitSeq(body, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func TestLimiterDefaultsToZero(t *testing.T) {
	body := scrape(t, New())
	for _, line := range []string{"shuffled_limiter_in_flight_bytes 0", "shuffled_limiter_peak_bytes 0"} {
		if !hasLine(body, line) {
			t.Errorf("scrape before WatchLimiter lacks line %q", line)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:9100", true},
		{"127.8.9.10:0", true},
		{"[::1]:9100", true},
		{"localhost:9100", true},
		{"[::ffff:127.0.0.1]:9100", true},
		{"0.0.0.0:9100", false},
		{":9100", false},
		{"[::]:9100", false},
		{"10.0.0.1:9100", false},
		{"192.168.1.2:9100", false},
		{"example.com:9100", false},
		{"127.0.0.1", false},
		{"127.0.0.1:99999", false},
		{"127.0.0.1:", false},
		{"", false},
	}
	for _, tt := range tests {
		err := CheckAddr(tt.addr)
		if (err == nil) != tt.ok {
			t.Errorf("CheckAddr(%q) = %v, want ok %v", tt.addr, err, tt.ok)
		}
	}
	if err := CheckAddr("0.0.0.0:9100"); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("CheckAddr(%q) = %v, want %v", "0.0.0.0:9100", err, ErrNotLoopback)
	}
}

func TestServeRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		if err := Serve(context.Background(), addr, New()); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Serve(%q) = %v, want %v", addr, err, ErrNotLoopback)
		}
	}
}

func TestServe(t *testing.T) {
	m := New()
	m.Commits.Add(7)
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + Path
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, m) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", url, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !hasLine(string(body), "shuffled_commits_total 7") {
		t.Errorf("GET %s = %d, %v, want 200 with shuffled_commits_total 7", url, resp.StatusCode, err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeListener after cancel = %v, want nil", err)
	}
	if resp, err := client.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("GET %s after shutdown succeeded, want a connection error", url)
	}
}

// ExportCodes puts every known label value of errors_total and
// requests_refused_total into the exposition at 0 before any event, once.
func TestExportCodes(t *testing.T) {
	m := New()
	codes := []string{"InvalidArgument", "PermissionDenied", "Unavailable"}
	m.ExportCodes(codes)
	m.ExportCodes(codes) // again: no second series
	m.RequestsRefused.WithLabelValues(RequestRegister, "PermissionDenied").Add(2)
	body := scrape(t, m)
	count := func(prefix string) int { return strings.Count(body, "\n"+prefix) }
	if n := count("shuffled_errors_total{"); n != len(codes) {
		t.Errorf("%d errors_total series, want %d (one per code):\n%s", n, len(codes), body)
	}
	if n := count("shuffled_requests_refused_total{"); n != 3*len(codes) {
		t.Errorf("%d requests_refused_total series, want %d (each request, each code):\n%s", n, 3*len(codes), body)
	}
	for _, code := range codes {
		if want := `shuffled_errors_total{code="` + code + `"} 0`; !strings.Contains(body, want) {
			t.Errorf("no %q:\n%s", want, body)
		}
		for _, req := range []string{RequestConnection, RequestRegister, RequestOpen} {
			value := "0"
			if req == RequestRegister && code == "PermissionDenied" {
				value = "2"
			}
			if want := `shuffled_requests_refused_total{code="` + code + `",request="` + req + `"} ` + value; !strings.Contains(body, want) {
				t.Errorf("no %q:\n%s", want, body)
			}
		}
	}
}
