package checksum

import "hash"

// digest is the streaming form of Algorithm.Update.
type digest struct {
	alg Algorithm
	sum uint32
}

var _ hash.Hash32 = (*digest)(nil)

func (d *digest) Write(p []byte) (int, error) {
	d.sum = d.alg.Update(d.sum, p)
	return len(p), nil
}

func (d *digest) Sum32() uint32 { return d.sum }

// Sum appends the checksum in big-endian order, as hash/adler32 and
// hash/crc32 do.
func (d *digest) Sum(b []byte) []byte {
	s := d.sum
	return append(b, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}

func (d *digest) Reset()         { d.sum = d.alg.Empty() }
func (d *digest) Size() int      { return 4 }
func (d *digest) BlockSize() int { return 1 }
