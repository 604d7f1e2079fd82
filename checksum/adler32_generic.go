//go:build !amd64 || purego

package checksum

// adlerVector returns q as it is: no vector loop in this build.
func adlerVector(s1, s2 uint64, q []byte) (uint64, uint64, []byte) { return s1, s2, q }
