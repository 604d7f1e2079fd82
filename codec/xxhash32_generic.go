//go:build !amd64 || purego

package codec

func xxStripes(v *[4]uint32, b []byte) { xxStripesGeneric(v, b) }
