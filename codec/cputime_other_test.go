//go:build !linux

package codec

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
