package loadgen

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// procMemory is a process's resident memory as /proc/PID/status gives it,
// in bytes: all of it (VmRSS), and its shared-memory (RssShmem: memfd and
// tmpfs pages it maps, such as the memfd batches a daemon reads) and
// anonymous (RssAnon) parts.
type procMemory struct{ rss, shmem, anon int64 }

// readProcMemory reads process pid's resident memory.
func readProcMemory(pid int) (procMemory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procMemory{}, err
	}
	var m procMemory
	seen := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &m.rss
		case "RssShmem":
			dst = &m.shmem
		case "RssAnon":
			dst = &m.anon
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return procMemory{}, fmt.Errorf("/proc/%d/status: %s %q: %w", pid, name, rest, err)
		}
		*dst = kb << 10
		seen++
	}
	if seen != 3 {
		return procMemory{}, fmt.Errorf("/proc/%d/status: no VmRSS, RssShmem and RssAnon", pid)
	}
	return m, nil
}

// memSampleEvery is how often a memSampler reads the daemon's memory:
// /proc has no peak of RssShmem or RssAnon, only of VmRSS (VmHWM).
const memSampleEvery = 10 * time.Millisecond

// memSampler keeps the peaks of a daemon process's resident memory while
// a run's tasks go.
type memSampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	peak procMemory // written by the sampling goroutine until done
	ok   bool
}

// sampleDaemonMemory starts sampling process pid's memory; nil if /proc
// does not show it to this process.
func sampleDaemonMemory(pid int) *memSampler {
	if _, err := readProcMemory(pid); err != nil {
		return nil
	}
	s := &memSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *memSampler) run() {
	defer close(s.done)
	tick := time.NewTicker(memSampleEvery)
	defer tick.Stop()
	for {
		if m, err := readProcMemory(s.pid); err == nil {
			s.ok = true
			s.peak.rss = max(s.peak.rss, m.rss)
			s.peak.shmem = max(s.peak.shmem, m.shmem)
			s.peak.anon = max(s.peak.anon, m.anon)
		}
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// finish stops the sampling and returns the peaks, false if none was
// read. A nil sampler has none. It is called once.
func (s *memSampler) finish() (procMemory, bool) {
	if s == nil {
		return procMemory{}, false
	}
	close(s.stop)
	<-s.done
	return s.peak, s.ok
}
