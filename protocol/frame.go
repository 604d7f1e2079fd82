package protocol

import (
	"fmt"
	"io"

	"github.com/shuffled/shuffled/errdefs"
)

// HeaderSize is the size of a frame header in bytes.
const HeaderSize = 16

// Magic is the first two bytes of every frame header.
var Magic = [2]byte{'S', 'H'}

// DefaultMaxFrame bounds a frame's payload unless a reader is told
// otherwise: 64 MiB.
const DefaultMaxFrame = 64 << 20

// Flags are the header's flag bits. Unknown bits are a framing error.
type Flags uint16

const (
	// FlagFD marks a frame that carries exactly one file descriptor as
	// SCM_RIGHTS ancillary data, sent with the frame's first byte.
	FlagFD Flags = 1 << 0

	knownFlags = FlagFD
)

// Header is a decoded frame header.
//
//	offset size field
//	0      2    magic 'S' 'H'
//	2      2    type (u16)
//	4      2    flags (u16)
//	6      2    reserved, zero
//	8      4    request id (u32)
//	12     4    payload length (u32)
type Header struct {
	Type   Type
	Flags  Flags
	ID     uint32
	Length uint32
}

// Errors of the framing layer. A framing error leaves the stream at an
// unknown position: the connection must be closed.
var (
	// ErrBadFrame wraps every header or fd-passing violation.
	ErrBadFrame = errdefs.New(errdefs.ErrInternal, "protocol: bad frame")
	// ErrFrameTooLarge is returned, before any allocation, for a header
	// whose payload length exceeds the reader's limit. It wraps ErrBadFrame.
	ErrFrameTooLarge = fmt.Errorf("%w: frame too large", ErrBadFrame)
	// ErrMalformed wraps every payload decoding and validation error.
	ErrMalformed = errdefs.New(errdefs.ErrInvalidArgument, "protocol: malformed message")
	// ErrUnsupported wraps decoding errors for values this version does
	// not know: a message type, payload kind, data plane or column type.
	ErrUnsupported = errdefs.New(errdefs.ErrUnsupported, "protocol: unsupported")
)

// AppendHeader appends the 16 header bytes.
func (h Header) Append(dst []byte) []byte {
	dst = append(dst, Magic[0], Magic[1])
	dst = appendU16(dst, uint16(h.Type))
	dst = appendU16(dst, uint16(h.Flags))
	dst = appendU16(dst, 0)
	dst = appendU32(dst, h.ID)
	return appendU32(dst, h.Length)
}

// ParseHeader decodes a frame header from the first HeaderSize bytes of b
// and checks it: magic, known flags, zero reserved bytes, and a payload
// length of at most maxFrame. It does not check the type, so that a
// reader can skip or refuse an unknown type without losing the stream.
func ParseHeader(b []byte, maxFrame uint32) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header of %d bytes, want %d", ErrBadFrame, len(b), HeaderSize)
	}
	if b[0] != Magic[0] || b[1] != Magic[1] {
		return Header{}, fmt.Errorf("%w: magic %#x %#x, want %#x %#x", ErrBadFrame, b[0], b[1], Magic[0], Magic[1])
	}
	h := Header{
		Type:   Type(le.Uint16(b[2:])),
		Flags:  Flags(le.Uint16(b[4:])),
		ID:     le.Uint32(b[8:]),
		Length: le.Uint32(b[12:]),
	}
	if h.Flags&^knownFlags != 0 {
		return Header{}, fmt.Errorf("%w: flags %#x: unknown bits %#x", ErrBadFrame, uint16(h.Flags), uint16(h.Flags&^knownFlags))
	}
	if r := le.Uint16(b[6:]); r != 0 {
		return Header{}, fmt.Errorf("%w: reserved header bytes %#x, want 0", ErrBadFrame, r)
	}
	if h.Length > maxFrame {
		return Header{}, fmt.Errorf("%w: type %v id %d: payload length %d exceeds %d", ErrFrameTooLarge, h.Type, h.ID, h.Length, maxFrame)
	}
	return h, nil
}

// ReadFrame reads one frame from r. The payload is read into buf when it
// fits (buf[:Length]) and into a new slice otherwise. The length is
// checked against maxFrame before anything is allocated. A stream that
// ends cleanly before a header returns io.EOF; one that ends inside a
// frame returns io.ErrUnexpectedEOF. ReadFrame knows nothing of file
// descriptors: use a Reader on a Unix socket that passes them.
func ReadFrame(r io.Reader, maxFrame uint32, buf []byte) (Header, []byte, error) {
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return Header{}, nil, err
	}
	h, err := ParseHeader(hb[:], maxFrame)
	if err != nil {
		return Header{}, nil, err
	}
	payload := sized(buf, int(h.Length))
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, nil, err
	}
	return h, payload, nil
}

func sized(buf []byte, n int) []byte {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]byte, n)
}

// AppendFrame validates m and appends a whole frame (header and payload)
// carrying it with request id id. FlagFD is set when m carries a file
// descriptor (see WantsFD).
func AppendFrame(dst []byte, id uint32, m Message) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return dst, err
	}
	start := len(dst)
	h := Header{Type: m.Type(), ID: id}
	if WantsFD(m) {
		h.Flags |= FlagFD
	}
	dst = h.Append(dst)
	dst = m.Append(dst)
	n := len(dst) - start - HeaderSize
	if uint64(n) > 1<<32-1 {
		return dst[:start], fmt.Errorf("%w: %v payload of %d bytes does not fit a frame", ErrMalformed, m.Type(), n)
	}
	le.PutUint32(dst[start+12:], uint32(n))
	return dst, nil
}

// WriteFrame writes one frame carrying m in a single Write. It cannot
// pass a file descriptor: for a message that wants one use WriteFrameFD.
func WriteFrame(w io.Writer, id uint32, m Message) error {
	if WantsFD(m) {
		return fmt.Errorf("%w: %v wants a file descriptor: use WriteFrameFD", ErrBadFrame, m.Type())
	}
	b, err := AppendFrame(nil, id, m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// WantsFD reports whether m travels with a file descriptor: a Batch whose
// data plane is a memfd.
func WantsFD(m Message) bool {
	b, ok := m.(*Batch)
	return ok && b.Plane == PlaneMemfd
}
