// Package command implements the shuffled sub-commands.
package command

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/shuffled/shuffled/internal/buildinfo"
)

// subcommand runs one sub-command with its arguments.
type subcommand struct {
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	help string
}

var subcommands = map[string]subcommand{
	"apps":    {apps, "list the daemon's applications: owner, connections, shuffles, bytes (--json)"},
	"rm":      {rm, "remove an application's outputs, or one shuffle's: rm APP [SHUFFLE]"},
	"stats":   {stats, "print the daemon's figures (--json)"},
	"cat":     {cat, "read a committed map output: partitions, checksums, rows"},
	"inspect": {cat, "the same as cat"},
	"serve":   {serve, "run the daemon"},
	"version": {version, "print the version, commit and Go version (--json: as JSON)"},
}

// errUsage marks a mistake on the command line (exit status 2).
var errUsage = errors.New("usage")

// errNothing marks a command that found nothing to act on: rm of an
// application or shuffle with no map outputs (exit status 3).
var errNothing = errors.New("nothing found")

// errHelped says that a command printed its usage for -h or --help: no
// error (exit status 0), and nothing more to do.
var errHelped = errors.New("usage printed")

// ExitCode returns the process exit status for an error of Run: 0 for
// none, 2 for a usage mistake, 3 when there was nothing to act on, 1 for
// any other error.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp):
		return 2
	case errors.Is(err, errNothing):
		return 3
	}
	return 1
}

// Run runs the sub-command named by args[0].
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return fmt.Errorf("%w: no sub-command", errUsage)
		}
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" {
		return version(ctx, args[1:], stdout, stderr)
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		usage(stderr)
		return fmt.Errorf("%w: unknown sub-command %q", errUsage, args[0])
	}
	if err := sc.run(ctx, args[1:], stdout, stderr); !errors.Is(err, errHelped) {
		return err
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: shuffled <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, subcommands[n].help)
	}
	fmt.Fprintln(w, "\nRun 'shuffled <command> -h' for the flags of a command; 'shuffled --version' is 'shuffled version'.")
}

func version(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shuffled version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print version, commit, go_version and platform as one JSON object")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: version takes no arguments, got %q", errUsage, fs.Args())
	}
	info := buildinfo.Get()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(info)
	}
	_, err := fmt.Fprintf(stdout, "shuffled %s\n", info)
	return err
}
