//go:build !linux

package loadgen

import "time"

// selfPeakRSS is not measured off Linux, where ru_maxrss units differ.
func selfPeakRSS() (int64, bool) { return 0, false }

// selfCPU is not measured off Linux.
func selfCPU() time.Duration { return 0 }
