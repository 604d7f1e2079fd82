package partition

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// SparkSeed is the seed of Spark's hash expression (Murmur3Hash), which
// HashPartitioner applies to the partitioning keys.
const SparkSeed = 42

const (
	murmurC1 = 0xcc9e2d51
	murmurC2 = 0x1b873593
)

func mixK1(k uint32) uint32 {
	k *= murmurC1
	k = bits.RotateLeft32(k, 15)
	return k * murmurC2
}

func mixH1(h, k uint32) uint32 {
	h ^= k
	h = bits.RotateLeft32(h, 13)
	return h*5 + 0xe6546b64
}

func fmix(h uint32, length uint32) uint32 {
	h ^= length
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// HashInt is Spark's Murmur3_x86_32.hashInt: the 32-bit Murmur3 of the four
// little-endian bytes of v.
func HashInt(v, seed int32) int32 {
	return int32(fmix(mixH1(uint32(seed), mixK1(uint32(v))), 4))
}

// HashLong is Spark's Murmur3_x86_32.hashLong: the low 32 bits of v, then
// the high 32 bits, as two Murmur3 blocks.
func HashLong(v int64, seed int32) int32 {
	h := mixH1(uint32(seed), mixK1(uint32(v)))
	h = mixH1(h, mixK1(uint32(uint64(v)>>32)))
	return int32(fmix(h, 8))
}

// HashBytes is Spark's Murmur3_x86_32.hashUnsafeBytes, which Spark's hash
// expression applies to strings and binary. It differs from standard
// Murmur3 in its tail: each of the last len%4 bytes is sign-extended to an
// int and mixed as a block of its own.
func HashBytes(b []byte, seed int32) int32 {
	h := uint32(seed)
	n := len(b)
	aligned := n &^ 3
	for i := 0; i < aligned; i += 4 {
		h = mixH1(h, mixK1(binary.LittleEndian.Uint32(b[i:])))
	}
	for _, c := range b[aligned:] {
		h = mixH1(h, mixK1(uint32(int32(int8(c)))))
	}
	return int32(fmix(h, uint32(n)))
}

// float32Bits returns the int that Spark hashes for f: 0 for both zeros
// (Spark 3.2+ normalizes -0.0), Java's canonical NaN for every NaN, and
// the IEEE bits otherwise (java.lang.Float.floatToIntBits).
func float32Bits(f float32) int32 {
	switch {
	case f == 0:
		return 0
	case f != f:
		return 0x7fc00000
	}
	return int32(math.Float32bits(f))
}

// float64Bits is float32Bits for doubles (java.lang.Double.doubleToLongBits).
func float64Bits(f float64) int64 {
	switch {
	case f == 0:
		return 0
	case f != f:
		return 0x7ff8000000000000
	}
	return int64(math.Float64bits(f))
}

// HashDecimal128 is Spark's hash of a DecimalType with precision > 18:
// hashUnsafeBytes of the unscaled value's BigInteger.toByteArray, the
// shortest big-endian two's-complement bytes that hold it (at least one,
// with room for the sign bit: 0 is 00, 128 is 00 80, -129 is ff 7f). The
// unscaled value is hi × 2^64 + lo.
func HashDecimal128(lo uint64, hi int64, seed int32) int32 {
	var be [16]byte
	binary.BigEndian.PutUint64(be[:8], uint64(hi))
	binary.BigEndian.PutUint64(be[8:], lo)
	return HashBytes(be[minimalTwosComplement(be[:]):], seed)
}

// minimalTwosComplement returns how many leading bytes of the big-endian
// two's-complement value be are redundant: a leading 00 before a byte
// whose top bit is clear, or ff before one whose top bit is set.
func minimalTwosComplement(be []byte) int {
	i := 0
	for i < len(be)-1 && (be[i] == 0 && be[i+1]&0x80 == 0 || be[i] == 0xff && be[i+1]&0x80 != 0) {
		i++
	}
	return i
}

// Hash returns Spark's hash of row i of c with the given seed, as Spark's
// Murmur3Hash expression computes it for the column's type: a null returns
// seed unchanged; Bool hashes the int 1 or 0; Int8, Int16, Int32 and Date32
// hash as ints; Int64, TimestampMicros, Decimal32 and Decimal64 (precision
// <= 18: the unscaled long) as longs; Decimal128 as HashDecimal128; Float32
// and Float64 hash their Java bits after normalizing -0.0 and NaN; String
// and Binary hash their bytes; YearMonthInterval hashes as an int and
// DayTimeInterval as a long; Void is always null; a List folds its
// elements in order, a Map each entry's key then value, a Struct its fields
// in order (each a null leaving the running hash unchanged), as Spark's
// hash of arrays, maps and structs does.
func (c *Column) Hash(i int, seed int32) int32 {
	if c.IsNull(i) {
		return seed
	}
	d := c.Data
	switch c.Type {
	case Bool:
		if d[i] != 0 {
			return HashInt(1, seed)
		}
		return HashInt(0, seed)
	case Int8, Int16, Int32, Date32, YearMonthInterval:
		return HashInt(int32(c.Int(i)), seed)
	case Int64, TimestampMicros, Decimal32, Decimal64, DayTimeInterval:
		return HashLong(c.Int(i), seed)
	case Decimal128:
		lo, hi := c.Int128(i)
		return HashDecimal128(lo, hi, seed)
	case Float32:
		return HashInt(float32Bits(math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))), seed)
	case Float64:
		return HashLong(float64Bits(math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))), seed)
	case String, Binary:
		return HashBytes(c.Bytes(i), seed)
	case Void:
		return seed
	case List:
		for j := c.Offsets[i]; j < c.Offsets[i+1]; j++ {
			seed = c.Children[0].Hash(int(j), seed)
		}
		return seed
	case Map:
		kv := c.Children[0].Children
		for j := c.Offsets[i]; j < c.Offsets[i+1]; j++ {
			seed = kv[0].Hash(int(j), seed)
			seed = kv[1].Hash(int(j), seed)
		}
		return seed
	case Struct:
		for k := range c.Children {
			seed = c.Children[k].Hash(i, seed)
		}
		return seed
	}
	panic("partition: Hash of a " + c.Type.String() + " column")
}

// HashRows sets hashes[i], for each of the first b.Rows rows, to Spark's
// hash of that row's key columns: hash(k0, k1, ...) with seed SparkSeed,
// where the hash of column k_j is the seed of column k_{j+1}. b must be
// valid, every key column index in range, and len(hashes) >= b.Rows.
func HashRows(b *Batch, keyCols []int, hashes []int32) {
	hashes = hashes[:b.Rows]
	for i := range hashes {
		hashes[i] = SparkSeed
	}
	for _, k := range keyCols {
		hashColumn(&b.Columns[k], hashes)
	}
}

// hashColumn folds column c into the running hashes, one loop per type so
// that the common fixed-width cases run without per-row dispatch.
func hashColumn(c *Column, hashes []int32) {
	if len(hashes) == 0 {
		return // a 0-row String column may have no offsets at all
	}
	if c.Validity != nil || c.Type.Nested() {
		for i := range hashes {
			hashes[i] = c.Hash(i, hashes[i])
		}
		return
	}
	d := c.Data
	switch c.Type {
	case Int32, Date32:
		d = d[:4*len(hashes)]
		for i := range hashes {
			hashes[i] = HashInt(int32(binary.LittleEndian.Uint32(d[4*i:])), hashes[i])
		}
	case Int64, TimestampMicros, Decimal64:
		d = d[:8*len(hashes)]
		for i := range hashes {
			hashes[i] = HashLong(int64(binary.LittleEndian.Uint64(d[8*i:])), hashes[i])
		}
	case String, Binary:
		off := c.Offsets[:len(hashes)+1]
		for i := range hashes {
			hashes[i] = HashBytes(d[off[i]:off[i+1]], hashes[i])
		}
	default:
		for i := range hashes {
			hashes[i] = c.Hash(i, hashes[i])
		}
	}
}

// Pmod returns Spark's pmod(hash, n): the partition in [0, n) that
// HashPartitioner assigns to a row of hash h. n must be positive.
func Pmod(h int32, n int) int {
	m := int(h) % n
	if m < 0 {
		m += n
	}
	return m
}
