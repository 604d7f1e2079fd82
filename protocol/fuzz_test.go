package protocol

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// FuzzReadFrame feeds arbitrary bytes to a Reader and decodes every frame
// it returns: nothing may panic, frames stay within the limit, and every
// error is a framing error, a decoding error or the end of the stream.
func FuzzReadFrame(f *testing.F) {
	var stream []byte
	for i, m := range validMessages() {
		if !WantsFD(m) {
			stream, _ = AppendFrame(stream, uint32(i+1), m)
		}
	}
	f.Add(stream)
	f.Add(Header{Type: TypeBatch, Length: 1 << 31}.Append(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 1 << 16
		r := NewReader(bytes.NewReader(data), max)
		defer r.Close()
		for {
			fr, err := r.ReadFrame(nil)
			if err != nil {
				if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrBadFrame) {
					t.Fatalf("ReadFrame error %v is not a framing error", err)
				}
				return
			}
			if len(fr.Payload) > max || fr.FD != -1 {
				t.Fatalf("frame of %d bytes, fd %d", len(fr.Payload), fr.FD)
			}
			if _, err := Decode(fr.Type, fr.Payload); err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Decode(%v) error %v wraps neither ErrMalformed nor ErrUnsupported", fr.Type, err)
			}
		}
	})
}

// FuzzDecode decodes an arbitrary payload as an arbitrary type. A payload
// that decodes must re-encode to the same bytes (the encoding is
// canonical) and decode again to the same message.
func FuzzDecode(f *testing.F) {
	for _, m := range validMessages() {
		f.Add(uint16(m.Type()), m.Append(nil))
	}
	f.Fuzz(func(t *testing.T, typ uint16, payload []byte) {
		payload = bytes.Clone(payload)
		m, err := Decode(Type(typ), bytes.Clone(payload)) // Decode clears a key's bytes in what it decodes
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Decode(%v) error %v wraps neither ErrMalformed nor ErrUnsupported", Type(typ), err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Decode(%v) returned a message that fails Validate: %v", Type(typ), err)
		}
		again := m.Append(nil)
		if !bytes.Equal(again, payload) {
			t.Fatalf("Append(Decode(%v %x)) = %x, not canonical", Type(typ), payload, again)
		}
		m2, err := Decode(Type(typ), bytes.Clone(again))
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("Decode(Append(m)) = %+v, %v; want %+v", m2, err, m)
		}
	})
}
