//go:build ignore

// gobench is the Go side of the JVM client benchmark (Bench.java runs it):
// the same workload as the Java client, through the Go client, on one
// connection. It prints one JSON line: bytes sent, wall and CPU seconds of
// this process.
//
//	go run jvm/client/src/test/go/gobench.go --socket S --payload FILE ...
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
)

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func main() {
	socket := flag.String("socket", "", "daemon socket")
	payload := flag.String("payload", "", "file with one batch's bytes")
	tasks := flag.Int("tasks", 32, "map outputs")
	conc := flag.Int("concurrency", 4, "map outputs in flight on the one connection")
	batches := flag.Int("batches", 4, "batches per map output")
	parts := flag.Int("partitions", 200, "partitions")
	codec := flag.String("codec", "lz4", "codec")
	plane := flag.String("plane", "memfd", "inline or memfd")
	app := flag.String("app", "bench-go", "application id")
	shuffle := flag.Int("shuffle", 0, "shuffle id")
	flag.Parse()
	if err := run(*socket, *payload, *tasks, *conc, *batches, *parts, *codec, *plane, *app, int32(*shuffle)); err != nil {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
}

func run(socket, payload string, tasks, conc, batches, parts int, codec, plane, app string, shuffle int32) error {
	data, err := os.ReadFile(payload)
	if err != nil {
		return err
	}
	offsets := make([]int64, parts+1)
	for p := 1; p <= parts; p++ {
		offsets[p] = int64(len(data)) * int64(p) / int64(parts)
	}
	dp := client.PlaneInline
	if plane == "memfd" {
		dp = client.PlaneMemfd
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, socket, client.WithDataPlane(dp), client.WithName("gobench"))
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: app, ExecutorID: "exec"}); err != nil {
		return err
	}
	cpu0, t0 := cpuSeconds(), time.Now()
	next := make(chan int)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for map_ := range next {
				m, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: shuffle, MapID: int64(map_), NumPartitions: int32(parts), Kind: protocol.KindOpaque, Codec: codec, Checksum: "ADLER32"})
				if err != nil {
					errs <- err
					return
				}
				for b := 0; b < batches; b++ {
					if err := m.WriteOpaque(ctx, data, offsets); err != nil {
						errs <- err
						return
					}
				}
				if _, err := m.Commit(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < tasks; i++ {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			return err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	wall, cpu := time.Since(t0).Seconds(), cpuSeconds()-cpu0
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"bytes": int64(len(data)) * int64(tasks) * int64(batches), "wall_s": wall, "cpu_s": cpu,
	})
}
