package server

import (
	"context"
	"testing"

	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/protocol"
)

// A new server exports errors_total and requests_refused_total at 0 for
// every wire error code (and, refusals, every request) before any event,
// so that a dashboard's rates and an operator's grep see them from the
// start.
func TestMetricsZeroFromStart(t *testing.T) {
	m := metrics.New()
	cfg := Config{SocketPath: t.TempDir() + "/s.sock", Root: t.TempDir()}
	s, err := New(cfg, WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]float64{} // family -> joined labels -> value
	for _, f := range families {
		series[f.GetName()] = map[string]float64{}
		for _, metric := range f.GetMetric() {
			key := ""
			for _, l := range metric.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			series[f.GetName()][key] = metric.GetCounter().GetValue()
		}
	}
	codes := protocol.Codes()
	if len(codes) < 10 {
		t.Fatalf("protocol.Codes() = %v: fewer codes than protocol.md §6 lists", codes)
	}
	for _, c := range codes {
		if v, ok := series["shuffled_errors_total"]["code="+c.String()+","]; !ok || v != 0 {
			t.Errorf("shuffled_errors_total{code=%q}: exported %v, value %v; want 0 from the start", c, ok, v)
		}
		for _, req := range []string{metrics.RequestConnection, metrics.RequestRegister, metrics.RequestOpen} {
			key := "code=" + c.String() + ",request=" + req + ","
			if v, ok := series["shuffled_requests_refused_total"][key]; !ok || v != 0 {
				t.Errorf("shuffled_requests_refused_total{%s}: exported %v, value %v; want 0 from the start", key, ok, v)
			}
		}
	}
	if _, ok := series["shuffled_errors_total"]["code=OK,"]; ok {
		t.Error("shuffled_errors_total{code=\"OK\"} is exported: OK is no error")
	}
	if n, want := len(series["shuffled_requests_refused_total"]), 3*len(codes); n != want {
		t.Errorf("%d requests_refused_total series, want %d", n, want)
	}
}
