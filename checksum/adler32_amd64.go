//go:build amd64 && !purego

package checksum

import "golang.org/x/sys/cpu"

// adlerUseAVX2 says whether adlerVector takes the AVX2 loop
// (adler32_amd64.s), which sums 32 bytes in a few vector instructions.
var adlerUseAVX2 = cpu.X86.HasAVX2

// adlerVector adds the whole 32-byte blocks of q (len(q) at most
// adlerChunk) to s1 and s2 where the CPU has AVX2, and returns the rest of
// q; elsewhere it returns q as it is.
func adlerVector(s1, s2 uint64, q []byte) (uint64, uint64, []byte) {
	if !adlerUseAVX2 || len(q) < 32 {
		return s1, s2, q
	}
	k := len(q) &^ 31
	s, u, w := adlerSumsAVX2(q[:k])
	// Block k's bytes add 32·s1 before it plus their weighted sum:
	// 32·(blocks·s1 + Σ_k Σ_{j<k} S_j) + Σ_k W_k.
	s2 += uint64(k)*s1 + 32*u + w
	s1 += s
	return s1, s2, q[k:]
}

// adlerSumsAVX2 returns, over the 32-byte blocks of p (len(p) rounded down
// to a multiple of 32, at most 4 MiB), the byte sum s, the sum u over the
// blocks of the byte sums of the blocks before each, and the sum w of the
// bytes weighted 32−i by their index i in their block.
//
//go:noescape
func adlerSumsAVX2(p []byte) (s, u, w uint64)
