package partition

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func le32(vs ...int32) []byte {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func le64(vs ...int64) []byte {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func TestAppendText(t *testing.T) {
	tests := []struct {
		col  Column
		row  int
		want string
	}{
		{Column{Type: Bool, Data: []byte{0, 2}}, 0, "false"},
		{Column{Type: Bool, Data: []byte{0, 2}}, 1, "true"},
		{Column{Type: Int8, Data: []byte{0x80}}, 0, "-128"},
		{Column{Type: Int16, Data: []byte{0xff, 0x7f}}, 0, "32767"},
		{Column{Type: Int32, Data: le32(7, -9)}, 1, "-9"},
		{Column{Type: Int64, Data: le64(math.MinInt64)}, 0, "-9223372036854775808"},
		{Column{Type: Float32, Data: le32(int32(math.Float32bits(1.5)))}, 0, "1.5"},
		{Column{Type: Float64, Data: le64(int64(math.Float64bits(-0.1)))}, 0, "-0.1"},
		{Column{Type: Date32, Data: le32(0, 19000, -1)}, 1, "2022-01-08"},
		{Column{Type: Date32, Data: le32(0, 19000, -1)}, 2, "1969-12-31"},
		{Column{Type: TimestampMicros, Data: le64(1_700_000_000_123_456)}, 0, "2023-11-14 22:13:20.123456"},
		{Column{Type: TimestampMicros, Data: le64(1_700_000_000_000_000)}, 0, "2023-11-14 22:13:20"},
		{Column{Type: Decimal64, Precision: 15, Scale: 2, Data: le64(12345)}, 0, "123.45"},
		{Column{Type: Decimal64, Precision: 15, Scale: 2, Data: le64(-5)}, 0, "-0.05"},
		{Column{Type: Decimal64, Precision: 4, Scale: 4, Data: le64(1234)}, 0, "0.1234"},
		{Column{Type: Decimal64, Precision: 18, Scale: 0, Data: le64(-42)}, 0, "-42"},
		{Column{Type: Decimal32, Precision: 9, Scale: 2, Data: le32(-12345)}, 0, "-123.45"},
		{Column{Type: Decimal32, Precision: 9, Scale: 9, Data: le32(999999999)}, 0, "0.999999999"},
		// Decimal128 as (lo, hi) int64 pairs: ±12345678901234567890123 and
		// ±(10^38 - 1), the halves worked out separately.
		{Column{Type: Decimal128, Precision: 38, Scale: 2, Data: le64(0x42b64e76714244cb, 669)}, 0, "123456789012345678901.23"},
		{Column{Type: Decimal128, Precision: 38, Scale: 2, Data: le64(-0x42b64e76714244cb, -670)}, 0, "-123456789012345678901.23"},
		{Column{Type: Decimal128, Precision: 38, Scale: 0, Data: le64(0x098a223fffffffff, 5421010862427522170)}, 0, "99999999999999999999999999999999999999"},
		{Column{Type: Decimal128, Precision: 38, Scale: 38, Data: le64(-0x098a223fffffffff, -5421010862427522171)}, 0, "-0.99999999999999999999999999999999999999"},
		{Column{Type: Decimal128, Precision: 20, Scale: 10, Data: le64(1, 0)}, 0, "0.0000000001"},
		{Column{Type: String, Offsets: []int32{0, 0, 3}, Data: []byte("abc")}, 0, ""},
		{Column{Type: String, Offsets: []int32{0, 0, 3}, Data: []byte("abc")}, 1, "abc"},
		{Column{Type: Binary, Offsets: []int32{0, 2}, Data: []byte{0xde, 0xad}}, 0, "dead"},
	}
	for _, tt := range tests {
		if got := string(tt.col.AppendText(nil, tt.row)); got != tt.want {
			t.Errorf("%v column: AppendText(nil, %d) = %q, want %q", tt.col.Type, tt.row, got, tt.want)
		}
	}
}

func TestIsNullAndNullCount(t *testing.T) {
	c := Column{Type: Int8, Data: make([]byte, 10), Validity: []byte{0b1010_0110, 0b01}}
	wantNull := []bool{true, false, false, true, true, false, true, false, false, true}
	for i, w := range wantNull {
		if got := c.IsNull(i); got != w {
			t.Errorf("IsNull(%d) = %v, want %v", i, got, w)
		}
	}
	if got := c.NullCount(10); got != 5 {
		t.Errorf("NullCount(10) = %d, want 5", got)
	}
	c.Validity = nil
	if c.IsNull(3) || c.NullCount(10) != 0 {
		t.Errorf("a column without validity reports nulls")
	}
}

// TestPutBits compares the shifting bitmap copy with a bit-by-bit one for
// every start bit and many lengths.
func TestPutBits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 40)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for start := 0; start < 24; start++ {
		for n := 0; start+n <= 8*len(src); n += 1 + n/4 {
			got := appendBits([]byte{0xAA}, src, start, n)
			want := make([]byte, 1+(n+7)/8)
			want[0] = 0xAA
			for i := range n {
				if src[(start+i)/8]>>((start+i)%8)&1 == 1 {
					want[1+i/8] |= 1 << (i % 8)
				}
			}
			if string(got) != string(want) {
				t.Fatalf("appendBits(start %d, n %d) = %x, want %x", start, n, got, want)
			}
			if c, w := countOnes(src, start, n), countOnes(want[1:], 0, n); c != w {
				t.Fatalf("countOnes(start %d, n %d) = %d, want %d", start, n, c, w)
			}
		}
	}
}

// TestPutBitsExactSource checks that the shifting copy reads no byte past
// the last one holding a wanted bit.
func TestPutBitsExactSource(t *testing.T) {
	for start := 0; start < 16; start++ {
		for n := 0; start+n <= 200; n++ {
			src := make([]byte, (start+n+7)/8)
			for i := range src {
				src[i] = 0xff
			}
			got := appendBits(nil, src, start, n)
			if c := countOnes(got, 0, n); c != n {
				t.Fatalf("appendBits(start %d, n %d) has %d ones, want %d", start, n, c, n)
			}
		}
	}
}
