package protocol

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// le is the byte order of every integer on the wire.
var le = binary.LittleEndian

func appendU8(dst []byte, v uint8) []byte   { return append(dst, v) }
func appendU16(dst []byte, v uint16) []byte { return le.AppendUint16(dst, v) }
func appendU32(dst []byte, v uint32) []byte { return le.AppendUint32(dst, v) }
func appendU64(dst []byte, v uint64) []byte { return le.AppendUint64(dst, v) }
func appendI32(dst []byte, v int32) []byte  { return le.AppendUint32(dst, uint32(v)) }
func appendI64(dst []byte, v int64) []byte  { return le.AppendUint64(dst, uint64(v)) }

// appendString appends a u16 byte length and the bytes. Validate bounds
// the length before a message is appended; a longer string is cut here
// so that the output always parses.
func appendString(dst []byte, s string) []byte {
	if len(s) > maxU16 {
		s = s[:maxU16]
	}
	dst = appendU16(dst, uint16(len(s)))
	return append(dst, s...)
}

const maxU16 = 1<<16 - 1

// decoder reads the fields of one message payload in order. The first
// failure sticks: later reads return zero values and err keeps the
// first error, which names the message, the field and what was wrong.
type decoder struct {
	msg string // message name for errors
	p   []byte
	off int
	err error
}

func (d *decoder) need(field string, n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.p)-d.off < n {
		d.err = fmt.Errorf("%w: %s.%s: truncated at byte %d (need %d bytes, %d left)",
			ErrMalformed, d.msg, field, d.off, n, len(d.p)-d.off)
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

func (d *decoder) u16(field string) uint16 {
	if !d.need(field, 2) {
		return 0
	}
	v := le.Uint16(d.p[d.off:])
	d.off += 2
	return v
}

func (d *decoder) u32(field string) uint32 {
	if !d.need(field, 4) {
		return 0
	}
	v := le.Uint32(d.p[d.off:])
	d.off += 4
	return v
}

func (d *decoder) u64(field string) uint64 {
	if !d.need(field, 8) {
		return 0
	}
	v := le.Uint64(d.p[d.off:])
	d.off += 8
	return v
}

func (d *decoder) i32(field string) int32 { return int32(d.u32(field)) }
func (d *decoder) i64(field string) int64 { return int64(d.u64(field)) }

// zero reads n reserved bytes that must be zero.
func (d *decoder) zero(field string, n int) {
	if !d.need(field, n) {
		return
	}
	for i, b := range d.p[d.off : d.off+n] {
		if b != 0 {
			d.err = fmt.Errorf("%w: %s.%s: reserved byte %d = %#x, want 0", ErrMalformed, d.msg, field, i, b)
			return
		}
	}
	d.off += n
}

// str reads a u16-length-prefixed string of at most max bytes.
func (d *decoder) str(field string, max int) string {
	n := int(d.u16(field + ".length"))
	if d.err != nil {
		return ""
	}
	if n > max {
		d.err = fmt.Errorf("%w: %s.%s: length %d exceeds %d", ErrMalformed, d.msg, field, n, max)
		return ""
	}
	if !d.need(field, n) {
		return ""
	}
	s := string(d.p[d.off : d.off+n])
	d.off += n
	return s
}

// bytes reads n raw bytes without copying.
func (d *decoder) bytes(field string, n int) []byte {
	if !d.need(field, n) {
		return nil
	}
	b := d.p[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

// count reads a u32 element count, bounded by max and by the bytes left
// (each element takes at least elemSize bytes), so that a hostile count
// never makes the caller allocate more than the frame holds.
func (d *decoder) count(field string, max, elemSize int) int {
	v := d.u32(field + ".count")
	if d.err != nil {
		return 0
	}
	if uint64(v) > uint64(max) {
		d.err = fmt.Errorf("%w: %s.%s: count %d exceeds %d", ErrMalformed, d.msg, field, v, max)
		return 0
	}
	n := int(v)
	if left := len(d.p) - d.off; n > left/elemSize {
		d.err = fmt.Errorf("%w: %s.%s: count %d needs at least %d bytes, %d left",
			ErrMalformed, d.msg, field, n, n*elemSize, left)
		return 0
	}
	return n
}

// finish reports trailing bytes, or the first error.
func (d *decoder) finish() error {
	if d.err != nil {
		return d.err
	}
	if d.off != len(d.p) {
		return fmt.Errorf("%w: %s: %d trailing bytes after byte %d", ErrMalformed, d.msg, len(d.p)-d.off, d.off)
	}
	return nil
}

// invalid returns a validation error naming the message and field.
func invalid(msg, field, format string, args ...any) error {
	return fmt.Errorf("%w: %s.%s: %s", ErrMalformed, msg, field, fmt.Sprintf(format, args...))
}

// checkText checks a free-form string field: at most max bytes, valid
// UTF-8, no NUL.
func checkText(msg, field, s string, max int) error {
	if len(s) > max {
		return invalid(msg, field, "length %d exceeds %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return invalid(msg, field, "%q is not valid UTF-8", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return invalid(msg, field, "%q contains NUL", s)
		}
	}
	return nil
}
