package loadgen

import (
	"time"

	"golang.org/x/sys/unix"
)

// selfPeakRSS returns getrusage(RUSAGE_SELF) ru_maxrss in bytes: the peak
// resident set of this process (Linux reports KiB).
func selfPeakRSS() (int64, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return ru.Maxrss << 10, true
}

// selfCPU returns the CPU time, user and system, this process has used.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
