package wakeup

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

const pipeSupported = true

// pipeWaiter starts a thread that blocks in read(2) on a pipe and records,
// for each 8-byte time it reads, how long after it the read returned. It
// returns the function that writes a time to the pipe, and the one that
// closes the pipe and returns the latencies.
func pipeWaiter(b *testing.B) (write func(time.Time), results func() []time.Duration) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer syscall.Close(fds[0])
		runtime.LockOSThread() // the thread blocks in the kernel, not in Go's scheduler
		defer runtime.UnlockOSThread()
		buf := make([]byte, 8)
		for {
			n, err := syscall.Read(fds[0], buf)
			if err != nil || n < len(buf) {
				return
			}
			lat = append(lat, since(buf))
		}
	}()
	buf := make([]byte, 8)
	write = func(t time.Time) {
		stamp(buf, t)
		if _, err := syscall.Write(fds[1], buf); err != nil {
			b.Fatal(err)
		}
	}
	results = func() []time.Duration {
		syscall.Close(fds[1])
		<-done
		return lat
	}
	return write, results
}

// threadWaiters starts n threads, each blocked in read(2) on a pipe of its
// own.
var threadWaiters waiters = func(b *testing.B, n int) (func(int, time.Time), func() [][]time.Duration) {
	writes := make([]func(time.Time), n)
	results := make([]func() []time.Duration, n)
	for i := range n {
		writes[i], results[i] = pipeWaiter(b)
	}
	return func(i int, t time.Time) { writes[i](t) }, func() [][]time.Duration {
		lat := make([][]time.Duration, n)
		for i, r := range results {
			lat[i] = r()
		}
		return lat
	}
}
