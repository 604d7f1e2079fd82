// Command shuffled-loadgen drives a shuffled daemon like a fleet of
// executors and reports what it measured. With no flags it starts an
// embedded daemon on a temporary socket and root, runs the default
// workload, prints the report and cleans up. See docs/benchmarks.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/shuffled/shuffled/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := loadgen.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
