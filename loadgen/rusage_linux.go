package loadgen

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
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

// threadCPU returns the CPU time, user and system, the calling OS thread
// has used (CLOCK_THREAD_CPUTIME_ID). It is a goroutine's own only while
// the goroutine is locked to its thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// userHZ is the unit of /proc/PID/stat's CPU times on Linux.
const userHZ = 100

// processCPU returns the CPU time, user and system, process pid has used,
// from /proc/PID/stat (utime and stime, in 1/100 s).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(b)
}

// parseProcStatCPU returns utime + stime of a /proc/PID/stat line. The
// command name, in parentheses, may hold spaces: fields count from the
// last ')'.
func parseProcStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("loadgen: /proc stat %q: no command name", b)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("loadgen: /proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("loadgen: /proc stat: CPU ticks %q: not a count", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
