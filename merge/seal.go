package merge

import (
	"crypto/cipher"
	"fmt"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/iocrypt"
)

// Encryption makes a merge write Spark's IO encryption (package iocrypt):
// every non-empty partition of the data file is one IV followed by the
// AES-CTR encryption of the partition's codec streams of every run. The
// first run (run 0) is already encrypted that way as it was written: its
// segment of partition p is IV(p) || ciphertext from keystream offset 0,
// and its checksum covers those bytes. The later runs hold plaintext: the
// merge encrypts each of their segments at the keystream offset where it
// lands in the partition, writing a fresh IV first when run 0 has no
// bytes of the partition, and computes the partition's checksum over the
// bytes it writes.
type Encryption struct {
	Key *iocrypt.Key
	// IVs holds IVSize bytes per partition: run 0's IV of each partition
	// it has bytes of (other entries are overwritten by the merge).
	IVs []byte
}

// sealBlock is the size of the buffers that hold encrypted bytes until
// they are written.
const sealBlock = 1 << 20

// A Sealer encrypts the segments of runs after the first for a merge
// that goes partition by partition (Begin, Seal for each segment of a
// later run in run order, End), and tallies what each merged partition
// holds. The bytes it returns stay valid until Reset.
type Sealer struct {
	enc     Encryption
	alg     checksum.Algorithm
	lengths []int64
	sums    []uint32

	p      int
	n      int64  // bytes of partition p so far, its IV included
	sum    uint32 // their checksum
	ivSet  bool   // partition p has its IV
	stream cipher.Stream

	bufs [][]byte // sealBlock buffers; bufs[:used] hold sealed bytes
	used int
	off  int   // bytes used of bufs[used-1]
	held int64 // bytes sealed since Reset
}

// NewSealer returns a Sealer for a map output of numPartitions.
func NewSealer(enc Encryption, numPartitions int, alg checksum.Algorithm) (*Sealer, error) {
	if enc.Key == nil {
		return nil, fmt.Errorf("merge: encryption without a key")
	}
	if len(enc.IVs) != iocrypt.IVSize*numPartitions {
		return nil, fmt.Errorf("merge: encryption with %d IV bytes for %d partitions", len(enc.IVs), numPartitions)
	}
	s := &Sealer{enc: enc, alg: alg, lengths: make([]int64, numPartitions), p: -1}
	if alg != checksum.None {
		s.sums = make([]uint32, numPartitions)
	}
	return s, nil
}

// Begin starts partition p, whose run-0 segment is n0 bytes (its IV
// included) with checksum sum0.
func (s *Sealer) Begin(p int, n0 int64, sum0 uint32) {
	s.p, s.n, s.ivSet, s.stream = p, n0, n0 > 0, nil
	s.sum = s.alg.Empty()
	if n0 > 0 {
		s.sum = sum0
	}
}

func (s *Sealer) iv() *[iocrypt.IVSize]byte {
	return (*[iocrypt.IVSize]byte)(s.enc.IVs[s.p*iocrypt.IVSize:])
}

// Seal appends to bufs the encryption of src, the next bytes of a later
// run's segment of the current partition (the partition's IV first, if
// it has none yet). src is not changed.
func (s *Sealer) Seal(bufs [][]byte, src []byte) [][]byte {
	if len(src) == 0 {
		return bufs
	}
	if !s.ivSet {
		iv := s.iv()
		iocrypt.NewIV(iv)
		b := s.alloc(iocrypt.IVSize)
		copy(b, iv[:])
		bufs = s.tally(bufs, b)
		s.ivSet = true
	}
	if s.stream == nil {
		s.stream = s.enc.Key.StreamAt(s.iv(), s.n-iocrypt.IVSize)
	}
	for len(src) > 0 {
		b := s.alloc(len(src))
		s.stream.XORKeyStream(b, src[:len(b)])
		bufs = s.tally(bufs, b)
		src = src[len(b):]
	}
	return bufs
}

func (s *Sealer) tally(bufs [][]byte, b []byte) [][]byte {
	s.n += int64(len(b))
	if s.alg != checksum.None {
		s.sum = s.alg.Update(s.sum, b)
	}
	s.held += int64(len(b))
	return append(bufs, b)
}

// alloc returns up to n bytes (at least 1) of the current buffer, or of
// a new one.
func (s *Sealer) alloc(n int) []byte {
	if s.used == 0 || s.off == sealBlock {
		if s.used == len(s.bufs) {
			s.bufs = append(s.bufs, make([]byte, sealBlock))
		}
		s.used++
		s.off = 0
	}
	b := s.bufs[s.used-1][s.off:]
	if len(b) > n {
		b = b[:n]
	}
	s.off += len(b)
	return b
}

// End records the current partition's length and checksum.
func (s *Sealer) End() {
	s.lengths[s.p] = s.n
	if s.sums != nil {
		s.sums[s.p] = s.sum
	}
}

// Held is how many sealed bytes wait to be written since Reset.
func (s *Sealer) Held() int64 { return s.held }

// Reset lets the Sealer reuse its buffers: what Seal returned has been
// written.
func (s *Sealer) Reset() { s.used, s.off, s.held = 0, 0, 0 }

// Lengths and Checksums are the merged partitions' (after their End).
func (s *Sealer) Lengths() []int64    { return s.lengths }
func (s *Sealer) Checksums() []uint32 { return s.sums }
