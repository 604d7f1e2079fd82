// Package wakeup holds a benchmark of the machine, not of shuffled: how
// long a goroutine, or a thread, that another one readies waits to run
// when the CPU it needs is idle. The writer's workers sleep when the job
// queue is empty, and every batch a producer hands over wakes some of
// them; on a virtual machine an idle vCPU takes tens of microseconds to
// wake (docs/benchmarks.md, "Preallocation and wake-ups", weighs that
// against the idle cores of the node-scale figures).
//
//	go test -c -o wakeup.test ./testkit/wakeup
//	./wakeup.test -test.run '^$' -test.bench Wakeup -test.benchtime 400x
//
// Each iteration of BenchmarkWakeup is one wake-up, and of
// BenchmarkWakeupBurst one burst of 15 at once, after the waiters' CPUs
// have been idle for 2 ms; they report the latencies' median and 90th and
// 99th percentiles (p50-us, p90-us, p99-us; a burst's slowest, last-us).
// Their ns/op is the loop's and means nothing.
package wakeup
