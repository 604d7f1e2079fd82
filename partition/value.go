package partition

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"
)

// The accessors below read row i of a column of a validated batch; i must
// be below the batch's row count. They return the stored value whether or
// not the row is null (IsNull tells); under a null the value is unspecified.

// Int returns row i of an integer-valued column as an int64: Bool (0 or 1),
// Int8 to Int64, Date32 (days), TimestampMicros (µs), Decimal32 and
// Decimal64 (the unscaled value), YearMonthInterval (months),
// DayTimeInterval (µs), Void (the meaningless stored byte). It panics for other types (Decimal128:
// see Int128).
func (c *Column) Int(i int) int64 {
	d := c.Data
	switch c.Type {
	case Bool:
		if d[i] != 0 {
			return 1
		}
		return 0
	case Int8, Void:
		return int64(int8(d[i]))
	case Int16:
		return int64(int16(binary.LittleEndian.Uint16(d[2*i:])))
	case Int32, Date32, Decimal32, YearMonthInterval:
		return int64(int32(binary.LittleEndian.Uint32(d[4*i:])))
	case Int64, TimestampMicros, Decimal64, DayTimeInterval:
		return int64(binary.LittleEndian.Uint64(d[8*i:]))
	}
	panic("partition: Int of a " + c.Type.String() + " column")
}

// Int128 returns row i of a Decimal128 column as its two's-complement
// halves: the unscaled value is hi × 2^64 + lo. It panics for other types.
func (c *Column) Int128(i int) (lo uint64, hi int64) {
	if c.Type != Decimal128 {
		panic("partition: Int128 of a " + c.Type.String() + " column")
	}
	v := c.Data[16*i : 16*i+16]
	return binary.LittleEndian.Uint64(v), int64(binary.LittleEndian.Uint64(v[8:]))
}

// bigInt128 returns hi × 2^64 + lo.
func bigInt128(lo uint64, hi int64) *big.Int {
	v := new(big.Int).SetInt64(hi)
	v.Lsh(v, 64)
	return v.Or(v, new(big.Int).SetUint64(lo))
}

// Float returns row i of a Float32 or Float64 column. It panics for other
// types.
func (c *Column) Float(i int) float64 {
	switch c.Type {
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(c.Data[4*i:])))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(c.Data[8*i:]))
	}
	panic("partition: Float of a " + c.Type.String() + " column")
}

// Bytes returns row i of a String or Binary column, aliasing the column's
// data. It panics for other types.
func (c *Column) Bytes(i int) []byte {
	if !c.Type.VarWidth() {
		panic("partition: Bytes of a " + c.Type.String() + " column")
	}
	return c.Data[c.Offsets[i]:c.Offsets[i+1]:c.Offsets[i+1]]
}

// AppendText appends the text of row i to dst, as Spark casts it to a
// string: true/false, decimal integers, shortest round-trip floats, dates as
// 2006-01-02, timestamps as 2006-01-02 15:04:05.999999 in UTC, decimals
// with scale digits after the point, strings as their raw bytes and binary
// as lowercase hex; year-month intervals as INTERVAL '[-]y-m' YEAR TO
// MONTH and day-time intervals as INTERVAL '[-]d hh:mm:ss.ffffff' DAY TO
// SECOND; void as null; arrays as [e1, e2], maps as {k1 -> v1, k2 -> v2}
// and structs as {f1, f2}, with null for a null inside them. Nulls of row
// i itself are the caller's to render (IsNull).
func (c *Column) AppendText(dst []byte, i int) []byte {
	switch c.Type {
	case Bool:
		return strconv.AppendBool(dst, c.Int(i) != 0)
	case Int8, Int16, Int32, Int64:
		return strconv.AppendInt(dst, c.Int(i), 10)
	case Float32:
		return strconv.AppendFloat(dst, c.Float(i), 'g', -1, 32)
	case Float64:
		return strconv.AppendFloat(dst, c.Float(i), 'g', -1, 64)
	case Date32:
		return time.Unix(c.Int(i)*86400, 0).UTC().AppendFormat(dst, time.DateOnly)
	case TimestampMicros:
		return time.UnixMicro(c.Int(i)).UTC().AppendFormat(dst, "2006-01-02 15:04:05.999999")
	case Decimal32, Decimal64:
		return appendDecimal(dst, c.Int(i), int(c.Scale))
	case Decimal128:
		v := bigInt128(c.Int128(i))
		neg := v.Sign() < 0
		digits := v.Abs(v).Append(nil, 10)
		return appendScaled(dst, neg, digits, int(c.Scale))
	case String:
		return append(dst, c.Bytes(i)...)
	case Binary:
		return hex.AppendEncode(dst, c.Bytes(i))
	case Void:
		return append(dst, "null"...)
	case YearMonthInterval:
		m := c.Int(i)
		sign := ""
		if m < 0 {
			sign, m = "-", -m
		}
		return fmt.Appendf(dst, "INTERVAL '%s%d-%d' YEAR TO MONTH", sign, m/12, m%12)
	case DayTimeInterval:
		us := c.Int(i)
		sign := ""
		mag := uint64(us)
		if us < 0 {
			sign, mag = "-", -mag
		}
		const day = 86400e6
		return fmt.Appendf(dst, "INTERVAL '%s%d %02d:%02d:%02d.%06d' DAY TO SECOND", sign, mag/day, mag%day/3600e6, mag%3600e6/60e6, mag%60e6/1e6, mag%1e6)
	case List:
		dst = append(dst, '[')
		for j := c.Offsets[i]; j < c.Offsets[i+1]; j++ {
			if j > c.Offsets[i] {
				dst = append(dst, ", "...)
			}
			dst = c.Children[0].appendChild(dst, int(j))
		}
		return append(dst, ']')
	case Map:
		kv := c.Children[0].Children
		dst = append(dst, '{')
		for j := c.Offsets[i]; j < c.Offsets[i+1]; j++ {
			if j > c.Offsets[i] {
				dst = append(dst, ", "...)
			}
			dst = kv[0].appendChild(dst, int(j))
			dst = append(dst, " -> "...)
			dst = kv[1].appendChild(dst, int(j))
		}
		return append(dst, '}')
	case Struct:
		dst = append(dst, '{')
		for k := range c.Children {
			if k > 0 {
				dst = append(dst, ", "...)
			}
			dst = c.Children[k].appendChild(dst, i)
		}
		return append(dst, '}')
	}
	panic("partition: AppendText of a " + c.Type.String() + " column")
}

// appendChild appends row i of a child column: its text, or null.
func (c *Column) appendChild(dst []byte, i int) []byte {
	if c.IsNull(i) {
		return append(dst, "null"...)
	}
	return c.AppendText(dst, i)
}

// appendDecimal appends unscaled × 10^-scale with exactly scale fraction
// digits.
func appendDecimal(dst []byte, unscaled int64, scale int) []byte {
	var buf [24]byte
	mag := uint64(unscaled)
	if unscaled < 0 {
		mag = -mag
	}
	return appendScaled(dst, unscaled < 0, strconv.AppendUint(buf[:0], mag, 10), scale)
}

// appendScaled appends the decimal digits of a magnitude, with a sign when
// neg, and exactly scale of them after the point.
func appendScaled(dst []byte, neg bool, digits []byte, scale int) []byte {
	if neg {
		dst = append(dst, '-')
	}
	if scale == 0 {
		return append(dst, digits...)
	}
	if len(digits) <= scale {
		dst = append(dst, '0', '.')
		for range scale - len(digits) {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[:len(digits)-scale]...)
	dst = append(dst, '.')
	return append(dst, digits[len(digits)-scale:]...)
}
