// Command shuffled-plot sweeps the load generator's compare mode over
// partitions (1 to 10 000) and batches per task (1 to 8) and draws the
// stream, legacy and ceiling writers' throughput as a PNG, with the figures
// as CSV beside it. With --from-csv it redraws a CSV without measuring.
//
//	go run ./cmd/shuffled-plot --out docs/benchmarks.png --csv docs/benchmarks.csv
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/shuffled/shuffled/loadgen/plot"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "shuffled-plot: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	s := plot.DefaultSweep()
	out := flag.String("out", "docs/benchmarks.png", "PNG to write")
	csvPath := flag.String("csv", "docs/benchmarks.csv", "CSV of the figures to write (or, with --from-csv, to read)")
	fromCSV := flag.Bool("from-csv", false, "redraw --csv without measuring")
	flag.IntVar(&s.Base.Tasks, "tasks", s.Base.Tasks, "map tasks per point and mode")
	flag.IntVar(&s.Base.Rows, "rows", s.Base.Rows, "rows per batch")
	flag.IntVar(&s.Base.Reps, "reps", s.Base.Reps, "repetitions per point and mode (medians are drawn)")
	flag.StringVar(&s.Base.Codec, "codec", s.Base.Codec, "codec")
	flag.Parse()
	if err := s.Base.Validate(); err != nil {
		return err
	}

	var r plot.Result
	if *fromCSV {
		f, err := os.Open(*csvPath)
		if err != nil {
			return err
		}
		r, err = plot.ReadCSV(f)
		f.Close()
		if err != nil {
			return err
		}
	} else {
		var err error
		if r, err = plot.Run(ctx, s, os.Stderr); err != nil {
			return err
		}
		if err := writeFile(*csvPath, r.WriteCSV); err != nil {
			return err
		}
	}
	title := fmt.Sprintf("in-process writer, %s %d rows/batch, %s/%s, %d tasks per point, %d workers, median of %d",
		s.Base.Schema, s.Base.Rows, s.Base.Codec, s.Base.Checksum, s.Base.Tasks, runtime.GOMAXPROCS(0), s.Base.Reps)
	return writeFile(*out, func(f io.Writer) error { return plot.Draw(r, title, f) })
}

// writeFile writes path through write, reporting the first error.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
