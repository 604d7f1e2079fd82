package sparkauth

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// maxAppIDLen bounds an application id in a handshake message; Spark's are
// some tens of bytes.
const maxAppIDLen = 1024

// decoder reads Spark's network-common encodings (Encoders.Strings and
// Encoders.ByteArrays: a 4-byte big-endian length, then the bytes) from a
// message body, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(field string, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s", ErrMalformed, field, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) u8(field string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail(field, "message ends before it")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u32(field string) uint32 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 4 {
		d.fail(field, "message ends before it (%d bytes left, need 4)", len(d.b))
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

// bytes reads a length-prefixed byte array of at most max bytes.
func (d *decoder) bytes(field string, max int) []byte {
	n := d.u32(field + " length")
	if d.err != nil {
		return nil
	}
	if int64(int32(n)) < 0 || int64(n) > int64(max) {
		d.fail(field, "length %d out of range [0,%d]", int32(n), max)
		return nil
	}
	if int(n) > len(d.b) {
		d.fail(field, "length %d but %d bytes left", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str(field string, max int) string {
	b := d.bytes(field, max)
	if d.err != nil {
		return ""
	}
	if !utf8.Valid(b) {
		d.fail(field, "not UTF-8")
		return ""
	}
	return string(b)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// validAppID checks an application id read from a handshake message: not
// empty, at most maxAppIDLen bytes, no control characters (it goes into logs).
func validAppID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: app id is empty", ErrMalformed)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: app id %q has a control character", ErrMalformed, id)
		}
	}
	return nil
}
