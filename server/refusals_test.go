package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/testkit"
)

func TestRefusalLogRateLimit(t *testing.T) {
	var l refusalLog
	t0 := time.Unix(1000, 0)
	a := refusalKey{uid: 1000, code: protocol.CodePermissionDenied}
	b := refusalKey{uid: 1000, code: protocol.CodeResourceExhausted}
	c := refusalKey{uid: 1001, code: protocol.CodePermissionDenied}
	steps := []struct {
		k          refusalKey
		at         time.Duration
		ok         bool
		suppressed int
	}{
		{a, 0, true, 0},
		{a, time.Second, false, 0},
		{a, 2 * time.Second, false, 0},
		{b, 2 * time.Second, true, 0}, // another code of the same uid
		{c, 2 * time.Second, true, 0}, // another uid
		{a, refusalLogEvery - time.Nanosecond, false, 0},
		{a, refusalLogEvery, true, 3},
		{a, refusalLogEvery + time.Second, false, 0},
		{a, 3 * refusalLogEvery, true, 1},
	}
	for i, st := range steps {
		ok, n := l.allow(st.k, t0.Add(st.at))
		if ok != st.ok || n != st.suppressed {
			t.Errorf("step %d: allow(%+v, +%v) = %v, %d, want %v, %d", i, st.k, st.at, ok, n, st.ok, st.suppressed)
		}
	}
}

func TestRefusalLogBounded(t *testing.T) {
	var l refusalLog
	t0 := time.Unix(1000, 0)
	for uid := range uint32(maxRefusalKeys) {
		l.allow(refusalKey{uid: uid}, t0)
	}
	l.allow(refusalKey{uid: maxRefusalKeys}, t0.Add(refusalLogEvery))
	if n := len(l.mu.last); n != 1 {
		t.Errorf("after %d keys and one an interval later, %d keys kept, want 1", maxRefusalKeys+1, n)
	}
}

// TestRefusedRegistrationIsLoud: a Spark local dir outside the allowed
// roots (the default spark.local.dir on a daemon set up for /data) is
// logged at WARN with its reason once per interval, and counted by code.
func TestRefusedRegistrationIsLoud(t *testing.T) {
	allowed := t.TempDir()
	outside := t.TempDir()
	dir := t.TempDir()
	var logs testkit.SyncBuffer
	m := metrics.New()
	d := startDaemonWith(t, Config{
		SocketPath:   filepath.Join(dir, "s.sock"),
		Root:         filepath.Join(dir, "root"),
		LimitBytes:   4 << 20,
		PoolSize:     2,
		AllowedRoots: []string{allowed},
	}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithMetrics(m))

	ctx := context.Background()
	for i := range 3 {
		c, err := client.Dial(ctx, d.socket)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Register(ctx, protocol.RegisterExecutor{AppID: "app-1", ExecutorID: "e" + strconv.Itoa(i), LocalDirs: []string{outside}, SubDirs: 64})
		c.Close()
		if protocol.CodeOf(err) != protocol.CodePermissionDenied {
			t.Fatalf("Register of %s outside %s: %v, want PermissionDenied", outside, allowed, err)
		}
	}
	var got dto.Metric
	if err := m.RequestsRefused.WithLabelValues(metrics.RequestRegister, "PermissionDenied").Write(&got); err != nil {
		t.Fatal(err)
	}
	if n := got.GetCounter().GetValue(); n != 3 {
		t.Errorf("shuffled_requests_refused_total{request=RegisterExecutor,code=PermissionDenied} = %v, want 3", n)
	}
	var warns []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "refused RegisterExecutor") {
			warns = append(warns, line)
		}
	}
	if len(warns) != 1 {
		t.Fatalf("%d WARN lines of refused registrations, want 1 (rate-limited):\n%s", len(warns), logs.String())
	}
	for _, want := range []string{"code=PermissionDenied", "app=app-1", "uid=" + strconv.Itoa(os.Getuid()), outside} {
		if !strings.Contains(warns[0], want) {
			t.Errorf("WARN line %q lacks %q", warns[0], want)
		}
	}
}
