package blockserver

import (
	"encoding/binary"
	"fmt"
	"github.com/shuffled/shuffled/errdefs"
	"unicode/utf8"
)

// Spark's network-common is big-endian (Netty's ByteBuf): every integer
// goes through binary.BigEndian.

// ErrMalformed is wrapped by every decoding error: a frame or message that
// is not one Spark's encoders write, or that breaks a bound.
var ErrMalformed = errdefs.New(errdefs.ErrInvalidArgument, "blockserver: malformed message")

func appendI32(dst []byte, v int32) []byte { return binary.BigEndian.AppendUint32(dst, uint32(v)) }
func appendI64(dst []byte, v int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(v)) }

// appendString appends network-common's Encoders.Strings: an i32 byte
// length, then the UTF-8 bytes.
func appendString(dst []byte, s string) []byte {
	dst = appendI32(dst, int32(len(s)))
	return append(dst, s...)
}

// appendStrings appends Encoders.StringArrays: an i32 count, then each
// string.
func appendStrings(dst []byte, ss []string) []byte {
	dst = appendI32(dst, int32(len(ss)))
	for _, s := range ss {
		dst = appendString(dst, s)
	}
	return dst
}

// appendInts appends Encoders.IntArrays: an i32 count, then each i32.
func appendInts(dst []byte, v []int32) []byte {
	dst = appendI32(dst, int32(len(v)))
	for _, x := range v {
		dst = appendI32(dst, x)
	}
	return dst
}

// appendLongs appends Encoders.LongArrays: an i32 count, then each i64.
func appendLongs(dst []byte, v []int64) []byte {
	dst = appendI32(dst, int32(len(v)))
	for _, x := range v {
		dst = appendI64(dst, x)
	}
	return dst
}

// decoder reads the fields of one message in order. The first failure
// sticks: later reads return zero values and err keeps the first error,
// which names the message, the field and what was wrong. No read
// allocates more than the bytes it has been given can fill, so a hostile
// count never makes a large allocation.
type decoder struct {
	msg string
	p   []byte
	off int
	err error
}

func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s.%s: %s", ErrMalformed, d.msg, field, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) need(field string, n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.p)-d.off < n {
		d.fail(field, "truncated at byte %d (need %d bytes, %d left)", d.off, n, len(d.p)-d.off)
		return false
	}
	return true
}

func (d *decoder) u8(field string) uint8 {
	if !d.need(field, 1) {
		return 0
	}
	v := d.p[d.off]
	d.off++
	return v
}

func (d *decoder) i32(field string) int32 {
	if !d.need(field, 4) {
		return 0
	}
	v := int32(binary.BigEndian.Uint32(d.p[d.off:]))
	d.off += 4
	return v
}

func (d *decoder) i64(field string) int64 {
	if !d.need(field, 8) {
		return 0
	}
	v := int64(binary.BigEndian.Uint64(d.p[d.off:]))
	d.off += 8
	return v
}

// boolean reads Netty's writeBoolean: one byte, 0 or 1.
func (d *decoder) boolean(field string) bool {
	switch v := d.u8(field); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail(field, "byte %d, want 0 or 1", v)
		return false
	}
}

// str reads an Encoders.Strings of at most max bytes of valid UTF-8.
func (d *decoder) str(field string, max int) string {
	n := d.i32(field + ".length")
	if d.err != nil {
		return ""
	}
	if n < 0 || int(n) > max {
		d.fail(field, "length %d out of range [0, %d]", n, max)
		return ""
	}
	if !d.need(field, int(n)) {
		return ""
	}
	b := d.p[d.off : d.off+int(n)]
	d.off += int(n)
	if !utf8.Valid(b) {
		d.fail(field, "not valid UTF-8")
		return ""
	}
	return string(b)
}

// count reads an array's i32 count: non-negative, at most max, and at most
// what the bytes left can hold at minSize bytes an element.
func (d *decoder) count(field string, max, minSize int) int {
	n := d.i32(field + ".count")
	if d.err != nil {
		return 0
	}
	left := len(d.p) - d.off
	switch {
	case n < 0 || int(n) > max:
		d.fail(field, "count %d out of range [0, %d]", n, max)
		return 0
	case int(n)*minSize > left:
		d.fail(field, "count %d needs at least %d bytes, %d left", n, int(n)*minSize, left)
		return 0
	}
	return int(n)
}

func (d *decoder) strs(field string, max, maxLen int) []string {
	n := d.count(field, max, 4)
	if d.err != nil {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str(fmt.Sprintf("%s[%d]", field, i), maxLen)
	}
	return out
}

func (d *decoder) ints(field string, max int) []int32 {
	n := d.count(field, max, 4)
	if d.err != nil {
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = d.i32(field)
	}
	return out
}

func (d *decoder) longs(field string, max int) []int64 {
	n := d.count(field, max, 8)
	if d.err != nil {
		return nil
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = d.i64(field)
	}
	return out
}

// finish reports trailing bytes, or the first error.
func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.p) {
		d.err = fmt.Errorf("%w: %s: %d trailing bytes after byte %d", ErrMalformed, d.msg, len(d.p)-d.off, d.off)
	}
	return d.err
}
