package writer

import (
	"sync"
	"sync/atomic"
)

// A handoffMutex is a mutex that workers share with goroutines that are
// not workers (producers, merges), whose unlock reports whether a
// goroutine slept waiting for it. The runtime readies that goroutine on
// the unlocking worker's P, where it waits until the worker yields (see
// worker.yield): a worker that let it go yields after its record.
type handoffMutex struct {
	sync.Mutex
	sleepers atomic.Int32 // goroutines in Lock that did not get it at once
}

func (m *handoffMutex) Lock() {
	if m.TryLock() {
		return
	}
	m.sleepers.Add(1)
	m.Mutex.Lock()
	m.sleepers.Add(-1)
}

// unlockWoke unlocks m and reports whether a goroutine was waiting for it.
func (m *handoffMutex) unlockWoke() bool {
	waiting := m.sleepers.Load() > 0
	m.Mutex.Unlock()
	return waiting
}

// wake marks wk (when not nil) as having woken a goroutine if woke.
func (wk *worker) wake(woke bool) {
	if woke && wk != nil {
		wk.woke = true
	}
}
