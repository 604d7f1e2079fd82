package writer

import (
	"sync/atomic"
)

// memoryBudget bounds, across an engine, the bytes that runs keep in
// memory until their map output commits. Those bytes also stay counted by
// the limiter (a record hands its quota over to the run that keeps its
// encoding), so they are bytes in flight; the budget keeps them to a
// quarter of the limit, and to an eighth for one map output, so that
// records always find room and a map output larger than that spills to
// run files. An engine whose limit is under 16 records gets no budget: its
// runs go to files. (A record larger than the limit, admitted only with
// nothing else in flight, can then be one the writer cut itself; with a
// budget only WriteEncoded could bring one, and it refuses them.)
type memoryBudget struct {
	total, perOutput int64
	used             atomic.Int64
}

func newMemoryBudget(limit int64, recordSize int) memoryBudget {
	if limit < 16*int64(recordSize) {
		return memoryBudget{}
	}
	return memoryBudget{total: limit / 4, perOutput: limit / 8}
}

func (b *memoryBudget) reserve(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.total {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *memoryBudget) release(n int64) { b.used.Add(-n) }
