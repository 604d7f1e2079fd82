//go:build amd64 && !purego

package codec

import "golang.org/x/sys/cpu"

// xxUseSSE41 says whether xxStripes takes the SSE4.1 loop: on x86 the
// multiplications bound xxStripesGeneric, and the input's products with
// xxPrime2 (PMULLD, four lanes at once) move half of them off the scalar
// multiplier, which then only does the one on each lane's dependency chain.
var xxUseSSE41 = cpu.X86.HasSSE41

func xxStripes(v *[4]uint32, b []byte) {
	if xxUseSSE41 {
		xxStripesSSE41(v, b)
		return
	}
	xxStripesGeneric(v, b)
}

// xxStripesSSE41 is xxStripesGeneric in assembly (xxhash32_amd64.s).
//
//go:noescape
func xxStripesSSE41(v *[4]uint32, b []byte)
