package loadgen

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// startCPUProfile starts a CPU profile of this process into a new file at
// path and returns the function that stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	return startRecording("--cpuprofile", path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace starts an execution trace of this process into a new file at
// path and returns the function that stops it and closes the file.
func startTrace(path string) (stop func() error, err error) {
	return startRecording("--trace", path, trace.Start, trace.Stop)
}

// startRecording creates path (an existing file is an error: a recording
// overwrites nothing), starts the recording into it, and returns the
// function that ends it. flag names the recording in errors.
func startRecording(flag, path string, start func(io.Writer) error, end func()) (stop func() error, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := start(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return func() error {
		end()
		if err := f.Close(); err != nil {
			return fmt.Errorf("%s %s: %w", flag, path, err)
		}
		return nil
	}, nil
}
