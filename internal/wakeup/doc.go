// Package wakeup holds a benchmark of the machine, not of shuffled: how
// long a goroutine, or a thread, that another one readies waits to run
// when the CPU it needs is idle. The writer's workers sleep when the job
// queue is empty, and every batch a producer hands over wakes some of
// them; on a virtual machine an idle vCPU takes tens of microseconds to
// wake, which shows as idle cores in the node-scale figures
// (docs/benchmarks.md, "Preallocation and wake-ups").
//
//	go test -c -o wakeup.test ./internal/wakeup
//	./wakeup.test -test.run '^$' -test.bench Wakeup -test.benchtime 400x
//
// Each iteration is one wake-up, after the waiter's CPU has been idle for
// 2 ms; the benchmark reports the latencies' median and 90th and 99th
// percentiles (p50-us, p90-us, p99-us). Its ns/op is the loop's and means
// nothing.
package wakeup
