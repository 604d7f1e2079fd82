package writer

import (
	"github.com/shuffled/shuffled/checksum"
)

// segments counts, per partition, the bytes a sink took and their checksum.
type segments struct {
	alg       checksum.Algorithm
	lengths   []int64
	checksums []uint32
}

func newSegments(n int, alg checksum.Algorithm) segments {
	s := segments{alg: alg, lengths: make([]int64, n)}
	if alg != checksum.None {
		s.checksums = make([]uint32, n)
		if e := alg.Empty(); e != 0 {
			for i := range s.checksums {
				s.checksums[i] = e
			}
		}
	}
	return s
}

func (s *segments) add(p int, n int, sum uint32) {
	s.lengths[p] += int64(n)
	if s.alg != checksum.None {
		s.checksums[p] = s.alg.Combine(s.checksums[p], sum, int64(n))
	}
}
