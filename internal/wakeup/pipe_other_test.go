//go:build !linux

package wakeup

import (
	"testing"
	"time"
)

const pipeSupported = false

func pipeWaiter(b *testing.B) (func(time.Time), func() []time.Duration) {
	return nil, nil
}

func threadWaiters(b *testing.B, n int) (func(int, time.Time), func() [][]time.Duration) {
	return nil, nil
}
