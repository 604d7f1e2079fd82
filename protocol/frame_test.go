package protocol

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestParseHeaderRefuses(t *testing.T) {
	good := Header{Type: TypePing, ID: 1, Length: 10}.Append(nil)
	mut := func(i int, b byte) []byte {
		h := bytes.Clone(good)
		h[i] = b
		return h
	}
	tests := []struct {
		name string
		in   []byte
		max  uint32
		want error
	}{
		{"short", good[:15], 100, ErrBadFrame},
		{"magic", mut(0, 'X'), 100, ErrBadFrame},
		{"unknown flag", mut(4, 2), 100, ErrBadFrame},
		{"reserved", mut(7, 1), 100, ErrBadFrame},
		{"too large", good, 9, ErrFrameTooLarge},
	}
	for _, tt := range tests {
		if _, err := ParseHeader(tt.in, tt.max); !errors.Is(err, tt.want) {
			t.Errorf("ParseHeader(%s %x) = %v, want %v", tt.name, tt.in, err, tt.want)
		}
	}
	h, err := ParseHeader(good, 10)
	if err != nil || h != (Header{Type: TypePing, ID: 1, Length: 10}) {
		t.Errorf("ParseHeader(%x) = %+v, %v", good, h, err)
	}
}

// TestReadFrameLimitBeforeAlloc checks that a hostile length is refused
// from the header alone: the reader has only 16 bytes to read.
func TestReadFrameLimitBeforeAlloc(t *testing.T) {
	hdr := Header{Type: TypeBatch, ID: 1, Length: 1<<32 - 1}.Append(nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, _, err := ReadFrame(bytes.NewReader(hdr), DefaultMaxFrame, nil); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("ReadFrame(length 4 GiB) = %v, want ErrFrameTooLarge", err)
		}
		if _, err := NewReader(bytes.NewReader(hdr), DefaultMaxFrame).ReadFrame(nil); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("Reader.ReadFrame(length 4 GiB) = %v, want ErrFrameTooLarge", err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 10*(readBufSize+4096) {
		t.Errorf("10 oversize headers allocated %d bytes", n)
	}
}

func TestReadFrameEOF(t *testing.T) {
	frame, _ := AppendFrame(nil, 3, &Commit{Handle: 9})
	if _, _, err := ReadFrame(bytes.NewReader(nil), DefaultMaxFrame, nil); err != io.EOF {
		t.Errorf("ReadFrame(empty) = %v, want io.EOF", err)
	}
	for _, n := range []int{1, HeaderSize - 1, HeaderSize, len(frame) - 1} {
		if _, _, err := ReadFrame(bytes.NewReader(frame[:n]), DefaultMaxFrame, nil); err != io.ErrUnexpectedEOF {
			t.Errorf("ReadFrame(%d of %d bytes) = %v, want io.ErrUnexpectedEOF", n, len(frame), err)
		}
	}
}

func TestReadFrameReusesBuffer(t *testing.T) {
	frame, _ := AppendFrame(nil, 3, &Commit{Handle: 9})
	buf := make([]byte, 0, 64)
	_, p, err := ReadFrame(bytes.NewReader(frame), DefaultMaxFrame, buf)
	if err != nil || &p[0] != &buf[:1][0] {
		t.Errorf("ReadFrame did not read into the given buffer (err %v)", err)
	}
}

func TestReaderStream(t *testing.T) {
	// Frames of all sizes through a Reader over a plain stream, delivered
	// one byte at a time and in one piece.
	var stream []byte
	var want [][]byte
	for i, n := range []int{0, 1, 100, readBufSize - 30, readBufSize, 3*readBufSize + 7, 5} {
		b := &Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneInline, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, int64(n)}}, Inline: bytes.Repeat([]byte{byte(i)}, n)}
		var err error
		start := len(stream)
		if stream, err = AppendFrame(stream, uint32(i+1), b); err != nil {
			t.Fatal(err)
		}
		want = append(want, stream[start+HeaderSize:])
	}
	for _, name := range []string{"whole", "bytewise"} {
		var src io.Reader = bytes.NewReader(stream)
		if name == "bytewise" {
			src = &oneByteReader{stream}
		}
		r := NewReader(src, DefaultMaxFrame)
		for i := range want {
			f, err := r.ReadFrame(nil)
			if err != nil {
				t.Fatalf("%s: frame %d: %v", name, i, err)
			}
			if f.ID != uint32(i+1) || !bytes.Equal(f.Payload, want[i]) || f.FD != -1 {
				t.Errorf("%s: frame %d = id %d, %d bytes, fd %d; want id %d, %d bytes, fd -1", name, i, f.ID, len(f.Payload), f.FD, i+1, len(want[i]))
			}
		}
		if _, err := r.ReadFrame(nil); err != io.EOF {
			t.Errorf("%s: ReadFrame at end = %v, want io.EOF", name, err)
		}
	}
}

type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}

func TestReaderRefusesFDFlagWithoutSocket(t *testing.T) {
	b := &Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneMemfd, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 1}}, Region: Region{Length: 1}}
	frame, err := AppendFrame(nil, 1, b)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(bytes.NewReader(frame), DefaultMaxFrame)
	if _, err := r.ReadFrame(nil); !errors.Is(err, ErrBadFrame) || !strings.Contains(err.Error(), "FlagFD") {
		t.Errorf("ReadFrame(FlagFD frame from a plain stream) = %v, want ErrBadFrame about FlagFD", err)
	}
	if _, err := r.ReadFrame(nil); !errors.Is(err, ErrBadFrame) {
		t.Errorf("ReadFrame after an error = %v, want the same error", err)
	}
	if err := WriteFrame(io.Discard, 1, b); !errors.Is(err, ErrBadFrame) {
		t.Errorf("WriteFrame(memfd batch) = %v, want ErrBadFrame", err)
	}
}
