// Command shuffled is the GPU shuffle writer daemon and its tools:
//
//	shuffled serve     run the daemon (flags and SHUFFLED_* environment)
//	shuffled cat       read a committed map output back from disk
//	shuffled apps      list the daemon's applications (over its socket)
//	shuffled rm        remove an application's outputs, or one shuffle's
//	shuffled stats     print the daemon's figures
//	shuffled version   print the version, commit and Go version (also --version)
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/shuffled/shuffled/cmd/shuffled/command"
)

func main() {
	if err := command.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "shuffled: %v\n", err)
		os.Exit(command.ExitCode(err))
	}
}
