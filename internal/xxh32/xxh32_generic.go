//go:build !amd64 || purego

package xxh32

func xxStripes(v *[4]uint32, b []byte) { xxStripesGeneric(v, b) }
