//go:build !linux

package loadgen

// selfPeakRSS is not measured off Linux, where ru_maxrss units differ.
func selfPeakRSS() (int64, bool) { return 0, false }
