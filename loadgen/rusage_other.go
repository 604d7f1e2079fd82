//go:build !linux

package loadgen

import (
	"errors"
	"time"
)

// selfPeakRSS is not measured off Linux, where ru_maxrss units differ.
func selfPeakRSS() (int64, bool) { return 0, false }

// selfCPU is not measured off Linux.
func selfCPU() time.Duration { return 0 }

// threadCPU is not measured off Linux.
func threadCPU() time.Duration { return 0 }

// processCPU is not measured off Linux.
func processCPU(pid int) (time.Duration, error) {
	return 0, errors.New("loadgen: a process's CPU time is read from /proc on Linux only")
}
