package loadgen

import (
	"time"

	"github.com/shuffled/shuffled/internal/procmem"
)

// memSampleEvery is how often the load generator reads a daemon's memory.
const memSampleEvery = 10 * time.Millisecond

// sampleDaemonMemory starts sampling process pid's memory; nil if /proc
// does not show it to this process.
func sampleDaemonMemory(pid int) *procmem.Sampler {
	if _, err := procmem.Read(pid); err != nil {
		return nil
	}
	return procmem.Sample(pid, memSampleEvery)
}

// daemonPeak stops s and returns the peaks, false if none was read (a
// nil s has none). A daemon that exits before the end keeps the peaks
// read until then.
func daemonPeak(s *procmem.Sampler) (procmem.Memory, bool) {
	if s == nil {
		return procmem.Memory{}, false
	}
	m, _ := s.Finish()
	return m, m.RSS > 0
}
