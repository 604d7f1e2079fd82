package procmem

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// TestReadSelf reads this process's memory: every figure present, the
// parts within the whole; a process that does not exist is an error.
func TestReadSelf(t *testing.T) {
	m, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Anon <= 0 || m.Shmem < 0 || m.Anon+m.Shmem > m.RSS {
		t.Errorf("Read(self) = %+v; want VmRSS and RssAnon above 0, RssShmem at least 0, the parts within VmRSS", m)
	}
	if _, err := Read(-1); err == nil {
		t.Error("Read(-1) gave no error")
	}
}

// TestSampler keeps the peak of a growth that came and went between the
// start and the end.
func TestSampler(t *testing.T) {
	before, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s := Sample(os.Getpid(), time.Millisecond)
	b := make([]byte, 64<<20)
	for i := range b {
		if i%4096 == 0 {
			b[i] = 1
		}
	}
	time.Sleep(20 * time.Millisecond)
	runtime.KeepAlive(b)
	peak, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if peak.RSS < before.RSS+32<<20 {
		t.Errorf("peak VmRSS %d MiB, want at least %d MiB (before, %d MiB, and most of 64 MiB touched)", peak.RSS>>20, (before.RSS+32<<20)>>20, before.RSS>>20)
	}
}
