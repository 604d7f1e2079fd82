//go:build unix

package testkit

import (
	"syscall"
	"testing"
	"time"
)

// Promptly runs f and fails the test if it has not returned within 10 s:
// an open that blocks on a FIFO never returns. The FIFOs in fifos are
// then opened for writing, so that a blocked open returns and its
// goroutine ends.
func Promptly[T any](t testing.TB, what string, fifos []string, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(10 * time.Second):
		for _, p := range fifos {
			if fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				syscall.Close(fd)
			}
		}
		t.Fatalf("%s did not return in 10 s: it blocked (opening a FIFO without O_NONBLOCK?)", what)
		panic("unreachable")
	}
}
