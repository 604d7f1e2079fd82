// Package procmem reads a process's resident memory from Linux's
// /proc/PID/status and samples its peaks: /proc keeps the peak of VmRSS
// alone (VmHWM), not of its shared-memory and anonymous parts.
package procmem

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory is a process's resident memory, in bytes: all of it (VmRSS), and
// its shared-memory (RssShmem: the memfd and tmpfs pages it maps) and
// anonymous (RssAnon) parts.
type Memory struct{ RSS, Shmem, Anon int64 }

// Read reads process pid's resident memory.
func Read(pid int) (Memory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	seen := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &m.RSS
		case "RssShmem":
			dst = &m.Shmem
		case "RssAnon":
			dst = &m.Anon
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("/proc/%d/status: %s %q: %w", pid, name, rest, err)
		}
		*dst = kb << 10
		seen++
	}
	if seen != 3 {
		return Memory{}, fmt.Errorf("/proc/%d/status: no VmRSS, RssShmem and RssAnon", pid)
	}
	return m, nil
}

// A Sampler reads a process's memory at a fixed interval and keeps each
// figure's peak.
type Sampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak Memory
	err  error // the first read that failed
}

// Sample starts reading process pid's memory every interval, the first
// time at once.
func Sample(pid int, every time.Duration) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			m, err := Read(pid)
			s.mu.Lock()
			if err != nil && s.err == nil {
				s.err = err
			}
			s.peak.RSS = max(s.peak.RSS, m.RSS)
			s.peak.Shmem = max(s.peak.Shmem, m.Shmem)
			s.peak.Anon = max(s.peak.Anon, m.Anon)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// Finish stops the sampling and returns the peaks (zero where no read
// succeeded) and the first read's error, if any failed. It is called
// once.
func (s *Sampler) Finish() (Memory, error) {
	close(s.stop)
	<-s.done
	return s.peak, s.err
}
