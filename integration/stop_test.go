package integration

import (
	"testing"
	"time"
)

// TestStopWithMetricsAndWatchdog stops a daemon that serves metrics and
// pings a watchdog: SIGTERM must end both and exit 0 promptly.
func TestStopWithMetricsAndWatchdog(t *testing.T) {
	d := startDaemon(t, config{
		args: []string{"--metrics-addr", "127.0.0.1:0", "--drain-timeout", "1s"},
		env:  []string{"WATCHDOG_USEC=1000000"},
	})
	start := time.Now()
	d.stop()
	t.Logf("stopped %v after SIGTERM", time.Since(start))
}
