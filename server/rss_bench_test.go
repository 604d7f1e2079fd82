package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/protocol"
)

// vmRSS returns the process's resident set from /proc/self/status.
func vmRSS(tb testing.TB, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkPartitionStateRSS opens 40 map outputs of 2^20 partitions with
// one tiny batch each and reports the resident memory they add, and how
// many the daemon admitted.
func BenchmarkPartitionStateRSS(b *testing.B) {
	const outputs, parts = 40, 1 << 20
	offsets := make([]int64, parts+1)
	for i := 1; i <= parts; i++ {
		offsets[i] = 1
	}
	for range b.N {
		dir := b.TempDir()
		cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
		s, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			b.Fatal(err)
		}
		ln, err := unixsock.Listen(cfg.SocketPath, 0o660)
		if err != nil {
			b.Fatal(err)
		}
		go s.Serve(ln)
		ctx := context.Background()
		c, err := client.Dial(ctx, cfg.SocketPath)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "app", ExecutorID: "1"}); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		before := vmRSS(b, "VmRSS")
		admitted := 0
		for m := range int64(outputs) {
			mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: m, NumPartitions: parts, Kind: protocol.KindOpaque})
			if err != nil {
				continue
			}
			if err := mo.WriteOpaque(ctx, []byte("x"), offsets); err != nil {
				continue
			}
			admitted++
		}
		after := vmRSS(b, "VmRSS")
		b.ReportMetric(float64(after-before)/(1<<20), "MiB-RSS-added")
		b.ReportMetric(float64(admitted), "outputs-admitted")
		c.Close()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s.Shutdown(sctx)
		cancel()
	}
}
