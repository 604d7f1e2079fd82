//go:build !amd64 || purego || clib

package codec

// The clib build links C through cgo, and a cgo package cannot hold Go
// assembly: it takes the pure-Go loop too.

func xxStripes(v *[4]uint32, b []byte) { xxStripesGeneric(v, b) }
