package loadgen

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit codes of Main.
const (
	ExitOK    = 0
	ExitError = 1 // the run failed, or verification found a difference
	ExitUsage = 2 // a flag's value is wrong
)

// Main is the shuffled-loadgen command: it parses args, runs the workload
// (or the compare mode), prints the report on stdout and progress and
// errors on stderr, and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case err != nil:
		fmt.Fprintf(stderr, "shuffled-loadgen: %v\n", err)
		return ExitUsage
	}
	type report interface {
		WriteJSON(io.Writer) error
		WriteTable(io.Writer) error
	}
	var rep report
	if cfg.Compare {
		c, cerr := Compare(ctx, cfg, stderr)
		if c != nil {
			rep = c
		}
		err = cerr
	} else {
		r, rerr := Run(ctx, cfg, stderr)
		if r != nil {
			rep = r
		}
		err = rerr
	}
	if rep != nil {
		write := rep.WriteTable
		if cfg.JSON {
			write = rep.WriteJSON
		}
		if werr := write(stdout); werr != nil && err == nil {
			err = werr
		}
	}
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(stderr, "shuffled-loadgen: %v\n", err)
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "shuffled-loadgen: %v\n", err)
		return ExitError
	}
}
