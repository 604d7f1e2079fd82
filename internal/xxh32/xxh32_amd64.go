//go:build amd64 && !purego

package xxh32

import "golang.org/x/sys/cpu"

// xxUseAVX says whether xxStripes takes the assembly loop. On x86 the
// multiplications bound xxStripesGeneric (eight per stripe, one per cycle);
// VPMULLD takes the input's products with xxPrime2 for the four lanes at
// once, which leaves the scalar multiplier the one on each lane's chain, and
// the loop runs at the chains' latency (add, rotate, multiply: 5 cycles a
// stripe). The VEX encoding (AVX) rather than SSE4.1's PMULLD keeps it free
// of the false dependencies that legacy SSE instructions take on while
// another routine's 256-bit state is live.
var xxUseAVX = cpu.X86.HasAVX

func xxStripes(v *[4]uint32, b []byte) {
	if xxUseAVX {
		xxStripesAVX(v, b)
		return
	}
	xxStripesGeneric(v, b)
}

// xxStripesAVX is xxStripesGeneric in assembly (xxh32_amd64.s).
//
//go:noescape
func xxStripesAVX(v *[4]uint32, b []byte)
