package gpu

import "github.com/shuffled/shuffled/checksum"

// combineAdler32 returns the Adler-32 of every stream from those of its
// framed blocks: sums[j] is block j's, of bytes [offs[j], offs[j+1]) of
// the streams, and stream i is blocks first[i] to first[i+1]-1. A stream's
// sum folds its blocks in order into the sum of nothing,
// checksum.Adler32.Combine(sum, sums[j], offs[j+1]-offs[j]).
func combineAdler32(sums []uint32, offs []int64, first []int) []uint32 {
	alg := checksum.Adler32
	out := make([]uint32, len(first)-1)
	for i := range out {
		sum := alg.Empty()
		for j := first[i]; j < first[i+1]; j++ {
			sum = alg.Combine(sum, sums[j], offs[j+1]-offs[j])
		}
		out[i] = sum
	}
	return out
}
