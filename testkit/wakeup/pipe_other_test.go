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

var threadWaiters waiters // no thread waiters on this platform
