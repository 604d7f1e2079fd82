package loadgen

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/shuffled/shuffled/internal/buildinfo"
)

// Exit codes of Main.
const (
	ExitOK    = 0
	ExitError = 1 // the run failed, or verification found a difference
	ExitUsage = 2 // a flag's value is wrong
)

// errVersion is what ParseArgs returns for --version: Main prints the build
// and exits 0.
var errVersion = errors.New("--version")

// Main is the shuffled-loadgen command: it parses args, runs the workload
// (or the compare mode), prints the report on stdout and progress and
// errors on stderr, and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "shuffled-loadgen %s\n", buildinfo.Get())
		return ExitOK
	case err != nil:
		fmt.Fprintf(stderr, "shuffled-loadgen: %v\n", err)
		return ExitUsage
	}
	type report interface {
		WriteJSON(io.Writer) error
		WriteTable(io.Writer) error
	}
	if cfg.member, err = memberFromEnv(os.Stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "shuffled-loadgen: %v\n", err)
		return ExitUsage
	}
	var rep report
	switch {
	case cfg.Processes > 1:
		self, serr := os.Executable()
		if serr != nil {
			fmt.Fprintf(stderr, "shuffled-loadgen: --processes %d: this program's path: %v\n", cfg.Processes, serr)
			return ExitError
		}
		r, rerr := RunProcesses(ctx, cfg, self, stderr)
		if r != nil {
			rep = r
		}
		err = rerr
	case cfg.Compare:
		c, cerr := Compare(ctx, cfg, stderr)
		if c != nil {
			rep = c
		}
		err = cerr
	default:
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
