//go:build !clib

package codec

// cLZ4Block is liblz4's block compressor where a clib build switched it on
// (clib.go): never in this build.
func cLZ4Block(dst, src []byte) (int, bool) { return 0, false }
