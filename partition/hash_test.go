package partition

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// Expected values below come from Spark itself:
//
//   - [spark-sql] `SELECT hash(1)` = -559580957 (seed 42).
//   - [spark-doc] apache/spark sql/catalyst/.../expressions/hash.scala,
//     Murmur3Hash's documented example: `SELECT hash('Spark', array(123), 2)`
//     = -1321691492 (the array folds its element as an int).
//   - [spark-unsafe] apache/spark common/unsafe/src/test/java/org/apache/
//     spark/unsafe/hash/Murmur3_x86_32Suite.java, testKnownIntegerInputs and
//     testKnownLongInputs (seed 0).
//   - [spark-35113] apache/spark HashExpressionsSuite, "SPARK-35113:
//     HashExpression support DayTimeIntervalType/YearMonthIntervalType":
//     Murmur3Hash(Duration.ofSeconds(1237123123)) with seed 10 hashes the
//     long 1237123123000000 µs = -428664612; Period.ofMonths(1234) hashes the
//     int 1234 = -686520021.
//   - [cudf-spark] rapidsai/cudf cpp/tests/hashing, SparkMurmurHash3Test
//     MultiValueWithSeeds and StringsWithSeed, whose comments give the Scala
//     that produced each value in Apache Spark (`df.select(hash(col(c)))`
//     and Murmur3HashFunction.hash(..., StringType, 314)). Its -0.0 rows were
//     taken with Spark < 3.2; Spark 3.2+ (SPARK-35207) hashes -0.0 as 0.0, so
//     those rows are not used here.

func TestHashIntLong(t *testing.T) {
	ints := []struct {
		v, seed, want int32
	}{
		{1, 42, -559580957},                    // spark-sql
		{0, 0, 593689054},                      // spark-unsafe
		{-42, 0, -189366624},                   // spark-unsafe
		{42, 0, -1134849565},                   // spark-unsafe
		{math.MinInt32, 0, -1718298732},        // spark-unsafe
		{math.MaxInt32, 0, -1653689534},        // spark-unsafe
		{1234, 10, -686520021},                 // spark-35113
		{0, 42, 933211791},                     // cudf-spark ints
		{100, 42, 751823303},                   // cudf-spark ints
		{-100, 42, -1080202046},                // cudf-spark ints
		{math.MinInt32, 42, 723455942},         // cudf-spark ints
		{math.MaxInt32, 42, 133916647},         // cudf-spark ints
		{math.MinInt32 / 100, 42, -1906567553}, // cudf-spark dates
		{math.MaxInt32 / 100, 42, -1503850410}, // cudf-spark dates
	}
	for _, tt := range ints {
		if got := HashInt(tt.v, tt.seed); got != tt.want {
			t.Errorf("HashInt(%d, %d) = %d, want %d", tt.v, tt.seed, got, tt.want)
		}
	}
	longs := []struct {
		v          int64
		seed, want int32
	}{
		{0, 0, 1669671676},                    // spark-unsafe
		{-42, 0, -846261623},                  // spark-unsafe
		{42, 0, 1871679806},                   // spark-unsafe
		{math.MinInt64, 0, 1366273829},        // spark-unsafe
		{math.MaxInt64, 0, -2106506049},       // spark-unsafe
		{1237123123000000, 10, -428664612},    // spark-35113
		{0, 42, -1670924195},                  // cudf-spark longs
		{100, 42, 1114849490},                 // cudf-spark longs
		{-100, 42, 904948192},                 // cudf-spark longs
		{math.MinInt64, 42, -853646085},       // cudf-spark longs
		{math.MaxInt64, 42, -1604625029},      // cudf-spark longs
		{-999999999999999999, 42, 1962370902}, // cudf-spark decimal64(18,7)
		{999999999999999999, 42, -1795328666}, // cudf-spark decimal64(18,7)
		{-999999999, 42, -1454351396},         // cudf-spark decimal32(9,3)
		{999999999, 42, -193774131},           // cudf-spark decimal32(9,3)
	}
	for _, tt := range longs {
		if got := HashLong(tt.v, tt.seed); got != tt.want {
			t.Errorf("HashLong(%d, %d) = %d, want %d", tt.v, tt.seed, got, tt.want)
		}
	}
}

var hashStrings = []string{
	"",
	"The quick brown fox",
	"jumps over the lazy dog.",
	"All work and no play makes Jack a dull boy",
	// Two Hangul syllables close it: 3-byte UTF-8 sequences whose tail
	// bytes (>= 0x80) Spark sign-extends.
	"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\ud720\ud721",
}

func TestHashBytes(t *testing.T) {
	tests := []struct {
		seed int32
		want []int32
	}{
		{42, []int32{142593372, 1217302703, -715697185, -2061143941, -111635966}},   // cudf-spark strings
		{314, []int32{1467149710, 723257560, -1620282500, -2001858707, 1588473657}}, // cudf-spark StringsWithSeed
	}
	for _, tt := range tests {
		for i, s := range hashStrings {
			if got := HashBytes([]byte(s), tt.seed); got != tt.want[i] {
				t.Errorf("HashBytes(%q, %d) = %d, want %d", s, tt.seed, got, tt.want[i])
			}
		}
	}
}

// column builders for tests

func int8Col(vs ...int8) Column {
	d := make([]byte, len(vs))
	for i, v := range vs {
		d[i] = byte(v)
	}
	return Column{Type: Int8, Data: d}
}

func int16Col(vs ...int16) Column {
	d := make([]byte, 0, 2*len(vs))
	for _, v := range vs {
		d = append(d, byte(v), byte(uint16(v)>>8))
	}
	return Column{Type: Int16, Data: d}
}

func float32Col(vs ...float32) Column {
	d := make([]int32, len(vs))
	for i, v := range vs {
		d[i] = int32(math.Float32bits(v))
	}
	return Column{Type: Float32, Data: le32(d...)}
}

func float64Col(vs ...float64) Column {
	d := make([]int64, len(vs))
	for i, v := range vs {
		d[i] = int64(math.Float64bits(v))
	}
	return Column{Type: Float64, Data: le64(d...)}
}

func stringCol(t Type, vs ...string) Column {
	c := Column{Type: t, Offsets: []int32{0}}
	for _, v := range vs {
		c.Data = append(c.Data, v...)
		c.Offsets = append(c.Offsets, int32(len(c.Data)))
	}
	return c
}

// TestColumnHash checks each type's mapping onto Spark's hash functions
// with the values Spark printed for `hash(col)` (cudf-spark).
func TestColumnHash(t *testing.T) {
	negNaN32 := math.Float32frombits(0xffc00000)
	negNaN64 := math.Float64frombits(0xfff8000000000000)
	tests := []struct {
		name string
		col  Column
		want []int32
	}{
		{"bools", Column{Type: Bool, Data: []byte{0, 1, 2, 255, 0}},
			[]int32{933211791, -559580957, -559580957, -559580957, 933211791}},
		{"bytes", int8Col(0, 100, -100, -128, 127),
			[]int32{933211791, 751823303, -1080202046, 1110053733, 1135925485}},
		{"shorts", int16Col(0, 100, -100, -32768, 32767),
			[]int32{933211791, 751823303, -1080202046, -1871935946, 1249274084}},
		{"ints", Column{Type: Int32, Data: le32(0, 100, -100, math.MinInt32, math.MaxInt32)},
			[]int32{933211791, 751823303, -1080202046, 723455942, 133916647}},
		{"dates", Column{Type: Date32, Data: le32(0, 100, -100, math.MinInt32/100, math.MaxInt32/100)},
			[]int32{933211791, 751823303, -1080202046, -1906567553, -1503850410}},
		{"longs", Column{Type: Int64, Data: le64(0, 100, -100, math.MinInt64, math.MaxInt64)},
			[]int32{-1670924195, 1114849490, 904948192, -853646085, -1604625029}},
		// Spark's timestamps are microseconds: toJavaTimestamp(100) is 100 µs.
		{"timestamps", Column{Type: TimestampMicros, Data: le64(0, 100, -100)},
			[]int32{-1670924195, 1114849490, 904948192}},
		{"decimal64(18,7)", Column{Type: Decimal64, Precision: 18, Scale: 7,
			Data: le64(0, 100, -100, -999999999999999999, 999999999999999999)},
			[]int32{-1670924195, 1114849490, 904948192, 1962370902, -1795328666}},
		{"decimal(9,3)", Column{Type: Decimal64, Precision: 9, Scale: 3,
			Data: le64(0, 100, -100, -999999999, 999999999)},
			[]int32{-1670924195, 1114849490, 904948192, -1454351396, -193774131}},
		// Spark hashes every DecimalType(p <= 18) as the unscaled long.
		{"decimal32(9,3)", Column{Type: Decimal32, Precision: 9, Scale: 3,
			Data: le32(0, 100, -100, -999999999, 999999999)},
			[]int32{-1670924195, 1114849490, 904948192, -1454351396, -193774131}},
		// DecimalType(38, 11): hashUnsafeBytes of BigInteger.toByteArray.
		// Values and hashes from cudf's Spark Murmur3 test (derived in
		// Spark): 0, 100, -1, then two 16-byte values given as hi, lo.
		{"decimal128(38,11)", Column{Type: Decimal128, Precision: 38, Scale: 11,
			Data: slices.Concat(le64(0, 0, 100, 0, -1, -1),
				le64(0x602F7FC318000001, -0x33b2e3d), // hi 0xFFFFFFFFFCC4D1C3
				le64(0x00F4369FFFFFFFFF, 0x0785EE10D5DA46D9))},
			[]int32{-783713497, -295670906, 1398487324, -52622807, -1359749815}},
		// -0.0 hashes as 0.0 (SPARK-35207); every NaN as Java's canonical NaN.
		{"floats", float32Col(0, float32(math.Copysign(0, -1)), negNaN32, -math.MaxFloat32, math.MaxFloat32),
			[]int32{933211791, 933211791, -349261430, -1225560532, -338752985}},
		{"doubles", float64Col(0, math.Copysign(0, -1), negNaN64, -math.MaxFloat64, math.MaxFloat64),
			[]int32{-1670924195, -1670924195, -1281358385, 1897734433, -508695674}},
		{"strings", stringCol(String, hashStrings...),
			[]int32{142593372, 1217302703, -715697185, -2061143941, -111635966}},
		{"binary", stringCol(Binary, hashStrings...),
			[]int32{142593372, 1217302703, -715697185, -2061143941, -111635966}},
	}
	for _, tt := range tests {
		b := &Batch{Rows: len(tt.want), Columns: []Column{tt.col}}
		if err := b.Validate(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		hashes := make([]int32, b.Rows)
		HashRows(b, []int{0}, hashes)
		for i, want := range tt.want {
			if got := tt.col.Hash(i, SparkSeed); got != want {
				t.Errorf("%s: Hash(%d, 42) = %d, want %d", tt.name, i, got, want)
			}
			if hashes[i] != want {
				t.Errorf("%s: HashRows row %d = %d, want %d", tt.name, i, hashes[i], want)
			}
		}
		// With every row null, each hash is the seed (Spark: null → seed).
		tt.col.Validity = []byte{0}
		b.Columns[0].Validity = tt.col.Validity
		HashRows(b, []int{0}, hashes)
		for i := range tt.want {
			if got := tt.col.Hash(i, 7); got != 7 {
				t.Errorf("%s: Hash(%d, 7) of a null = %d, want 7", tt.name, i, got)
			}
			if hashes[i] != SparkSeed {
				t.Errorf("%s: HashRows of a null row %d = %d, want 42", tt.name, i, hashes[i])
			}
		}
	}
}

// TestHashRowsMultiColumn checks that the hash of one key column seeds the
// next: Spark's documented hash('Spark', array(123), 2) (spark-doc), with
// the array's single element as a column of its own, and with a null in
// the middle, which leaves the running hash unchanged.
func TestHashRowsMultiColumn(t *testing.T) {
	b := &Batch{Rows: 2, Columns: []Column{
		stringCol(String, "Spark", "Spark"),
		{Type: Int32, Data: le32(123, 123)},
		{Type: Int8, Data: []byte{0, 0}, Validity: []byte{0b01}},
		{Type: Int32, Data: le32(2, 2)},
	}}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	hashes := make([]int32, 2)
	HashRows(b, []int{0, 1, 3}, hashes)
	if hashes[0] != -1321691492 {
		t.Errorf("hash('Spark', 123, 2) = %d, want -1321691492", hashes[0])
	}
	HashRows(b, []int{0, 1, 2, 3}, hashes)
	if hashes[1] != -1321691492 {
		t.Errorf("hash('Spark', 123, null, 2) = %d, want -1321691492", hashes[1])
	}
	if hashes[0] == -1321691492 {
		t.Errorf("hash('Spark', 123, 0, 2) = %d, the same as with a null", hashes[0])
	}
}

func TestPmod(t *testing.T) {
	tests := []struct {
		h    int32
		n    int
		want int
	}{
		{0, 7, 0}, {13, 7, 6}, {-1, 7, 6}, {-7, 7, 0}, {-559580957, 200, 43},
		{math.MinInt32, 200, 152}, {math.MaxInt32, 1, 0}, {math.MinInt32, 3, 1},
	}
	for _, tt := range tests {
		if got := Pmod(tt.h, tt.n); got != tt.want {
			t.Errorf("Pmod(%d, %d) = %d, want %d", tt.h, tt.n, got, tt.want)
		}
	}
}

// TestHashDecimal128Bytes checks the bytes HashDecimal128 hashes against
// BigInteger.toByteArray computed another way (math/big): the minimal
// big-endian two's complement, at least one byte.
func TestHashDecimal128Bytes(t *testing.T) {
	toByteArray := func(v *big.Int) []byte {
		if v.Sign() >= 0 {
			b := v.Bytes()
			if len(b) == 0 || b[0]&0x80 != 0 {
				b = append([]byte{0}, b...)
			}
			return b
		}
		// -v - 1 has the complement bits of v.
		m := new(big.Int).Neg(v)
		m.Sub(m, big.NewInt(1))
		b := m.Bytes()
		for i := range b {
			b[i] = ^b[i]
		}
		if len(b) == 0 || b[0]&0x80 == 0 {
			b = append([]byte{0xff}, b...)
		}
		return b
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		lo, hi := r.Uint64(), int64(r.Uint64())
		switch i % 4 {
		case 0:
			hi = hi >> r.IntN(64) // small magnitudes, both signs
			lo = lo >> r.IntN(64)
		case 1:
			hi, lo = -1, ^(lo >> r.IntN(64))
		}
		v := bigInt128(lo, hi)
		want := HashBytes(toByteArray(v), 42)
		if got := HashDecimal128(lo, hi, 42); got != want {
			t.Fatalf("HashDecimal128(%v) = %d, want %d (bytes %x)", v, got, want, toByteArray(v))
		}
	}
	for _, c := range []struct {
		v    int64
		want string
	}{{0, "00"}, {127, "7f"}, {128, "0080"}, {-1, "ff"}, {-128, "80"}, {-129, "ff7f"}, {255, "00ff"}} {
		lo, hi := uint64(c.v), c.v>>63
		var be [16]byte
		binary.BigEndian.PutUint64(be[:8], uint64(hi))
		binary.BigEndian.PutUint64(be[8:], lo)
		if got := hex.EncodeToString(be[minimalTwosComplement(be[:]):]); got != c.want {
			t.Errorf("toByteArray(%d) = %s, want %s", c.v, got, c.want)
		}
	}
}
