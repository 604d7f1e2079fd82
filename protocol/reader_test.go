package protocol

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// socketPair returns the two ends of a connected Unix stream socket.
func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

func tempFile(t *testing.T, data []byte) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "payload")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func sameFile(t *testing.T, a, b int) bool {
	t.Helper()
	var sa, sb unix.Stat_t
	if err := unix.Fstat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func memfdBatch(n int64) *Batch {
	return &Batch{Handle: 5, Kind: KindOpaque, Plane: PlaneMemfd, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, n}}, Region: Region{Length: n}}
}

func mustFrame(t *testing.T, id uint32, m Message) []byte {
	t.Helper()
	b, err := AppendFrame(nil, id, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReaderPassesFDs(t *testing.T) {
	a, b := socketPair(t)
	files := []*os.File{tempFile(t, []byte("one")), tempFile(t, []byte("two")), tempFile(t, []byte("three"))}
	fdsBefore := openFDs(t)
	// Interleave plain frames, fd frames back to back, and a large fd
	// frame that the kernel will split, while the reader reads.
	big := memfdBatch(7)
	big.Opaque.PartitionOffsets = make([]int64, 300_000)
	for i := range big.Opaque.PartitionOffsets {
		big.Opaque.PartitionOffsets[i] = min(int64(i), 7)
	}
	big.Region.Length = 7
	big.Opaque.PartitionOffsets[len(big.Opaque.PartitionOffsets)-1] = 7
	type sent struct {
		id   uint32
		file *os.File
	}
	plan := []sent{{1, nil}, {2, files[0]}, {3, files[1]}, {4, nil}, {5, files[2]}, {6, nil}}
	errc := make(chan error, 1)
	go func() {
		for _, s := range plan {
			var err error
			if s.file == nil {
				err = WriteFrame(a, s.id, &Ping{})
			} else if s.id == 5 {
				err = WriteFrameFD(a, mustFrame(t, s.id, big), int(s.file.Fd()))
			} else {
				err = WriteFrameFD(a, mustFrame(t, s.id, memfdBatch(3)), int(s.file.Fd()))
			}
			if err != nil {
				errc <- err
				return
			}
		}
		errc <- a.CloseWrite()
	}()
	r := NewReader(b, DefaultMaxFrame)
	for _, s := range plan {
		f, err := r.ReadFrame(nil)
		if err != nil {
			t.Fatalf("ReadFrame(id %d): %v", s.id, err)
		}
		if f.ID != s.id {
			t.Fatalf("ReadFrame id = %d, want %d", f.ID, s.id)
		}
		if s.file == nil {
			if f.FD != -1 {
				t.Errorf("frame %d: FD = %d, want -1", f.ID, f.FD)
			}
			continue
		}
		if f.FD < 0 || !sameFile(t, f.FD, int(s.file.Fd())) {
			t.Errorf("frame %d: FD %d is not the file sent", f.ID, f.FD)
		}
		if _, err := Decode(f.Type, f.Payload); err != nil {
			t.Errorf("frame %d: %v", f.ID, err)
		}
		unix.Close(f.FD)
	}
	if _, err := r.ReadFrame(nil); err != io.EOF {
		t.Errorf("ReadFrame at end = %v, want io.EOF", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n := openFDs(t); n != fdsBefore {
		t.Errorf("open descriptors %d after the exchange, want %d", n, fdsBefore)
	}
}

func TestReaderRefusesBadFDs(t *testing.T) {
	ping := func(t *testing.T, id uint32) []byte { return mustFrame(t, id, &Ping{}) }
	tests := []struct {
		name string
		send func(t *testing.T, c *net.UnixConn, fds []int) // fds: two open descriptors to pass
		good int                                            // frames read before the error
	}{
		{"fd on a frame without FlagFD", func(t *testing.T, c *net.UnixConn, fds []int) {
			c.WriteMsgUnix(ping(t, 1), unix.UnixRights(fds[0]), nil)
			c.Write(ping(t, 2))
		}, 1},
		{"stray fd at end of stream", func(t *testing.T, c *net.UnixConn, fds []int) {
			c.WriteMsgUnix(ping(t, 1), unix.UnixRights(fds[0]), nil)
		}, 1},
		{"FlagFD without fd", func(t *testing.T, c *net.UnixConn, fds []int) {
			c.Write(ping(t, 1))
			c.Write(mustFrame(t, 2, memfdBatch(1)))
		}, 1},
		{"two fds in one message", func(t *testing.T, c *net.UnixConn, fds []int) {
			c.WriteMsgUnix(mustFrame(t, 1, memfdBatch(1)), unix.UnixRights(fds...), nil)
		}, 0},
		{"two fds with frames that want none", func(t *testing.T, c *net.UnixConn, fds []int) {
			c.WriteMsgUnix(ping(t, 1), unix.UnixRights(fds...), nil)
			c.Write(ping(t, 2))
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := socketPair(t)
			f1, f2 := tempFile(t, nil), tempFile(t, nil)
			before := openFDs(t)
			tt.send(t, a, []int{int(f1.Fd()), int(f2.Fd())})
			a.CloseWrite()
			r := NewReader(b, DefaultMaxFrame)
			var err error
			for i := 0; ; i++ {
				var f Frame
				f, err = r.ReadFrame(nil)
				if err != nil {
					if i != tt.good {
						t.Errorf("error after %d frames, want after %d: %v", i, tt.good, err)
					}
					break
				}
				if f.FD >= 0 {
					unix.Close(f.FD)
				}
			}
			if !errors.Is(err, ErrBadFrame) {
				t.Errorf("ReadFrame = %v, want ErrBadFrame", err)
			}
			if n := openFDs(t); n != before {
				t.Errorf("open descriptors %d, want %d: a received descriptor leaked", n, before)
			}
		})
	}
}

func TestWriteFrameFDRefuses(t *testing.T) {
	a, _ := socketPair(t)
	if err := WriteFrameFD(a, mustFrame(t, 1, &Ping{}), 0); !errors.Is(err, ErrBadFrame) {
		t.Errorf("WriteFrameFD(frame without FlagFD) = %v, want ErrBadFrame", err)
	}
	if err := WriteFrameFD(a, mustFrame(t, 1, memfdBatch(1)), -1); !errors.Is(err, ErrBadFrame) {
		t.Errorf("WriteFrameFD(fd -1) = %v, want ErrBadFrame", err)
	}
	if err := WriteFrameFD(a, []byte("short"), 0); !errors.Is(err, ErrBadFrame) {
		t.Errorf("WriteFrameFD(5 bytes) = %v, want ErrBadFrame", err)
	}
}

func TestDecodeFrameChecksFD(t *testing.T) {
	ping := mustFrame(t, 1, &Ping{})[HeaderSize:]
	batch := mustFrame(t, 2, memfdBatch(1))[HeaderSize:]
	tests := []struct {
		name   string
		typ    Type
		p      []byte
		withFD bool
		ok     bool
	}{
		{"ping", TypePing, ping, false, true},
		{"ping with fd", TypePing, ping, true, false},
		{"memfd batch with fd", TypeBatch, batch, true, true},
		{"memfd batch without fd", TypeBatch, batch, false, false},
		{"garbage with fd", TypeBatch, []byte{1, 2}, true, false},
	}
	for _, tt := range tests {
		f := Frame{Header: Header{Type: tt.typ}, Payload: tt.p, FD: -1}
		if tt.withFD {
			f.FD = int(tempFile(t, nil).Fd())
			var err error
			if f.FD, err = unix.Dup(f.FD); err != nil {
				t.Fatal(err)
			}
		}
		fd := f.FD
		_, err := DecodeFrame(&f)
		if (err == nil) != tt.ok {
			t.Errorf("DecodeFrame(%s) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && fd >= 0 {
			if f.FD != -1 || unix.Close(fd) == nil {
				t.Errorf("DecodeFrame(%s) failed without closing the descriptor", tt.name)
			}
		}
		if err == nil && f.FD >= 0 {
			unix.Close(f.FD)
		}
	}
}

// TestReaderAllocatesAsBytesArrive declares a 64 MiB frame and sends a few
// bytes: the reader must not allocate the declared length up front.
func TestReaderAllocatesAsBytesArrive(t *testing.T) {
	head := Header{Type: TypeHello, ID: 1, Length: 64 << 20}.Append(nil)
	stream := append(head, make([]byte, 4096)...)
	r := NewReader(bytes.NewReader(stream), 64<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := r.ReadFrame(nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadFrame of a truncated 64 MiB frame = %v, want ErrUnexpectedEOF", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("reading 4 KiB of a frame declared 64 MiB allocated %d bytes, want under 4 MiB", alloc)
	}
}

// TestReaderLargePayload reads payloads larger than the first allocation,
// which grows as bytes arrive.
func TestReaderLargePayload(t *testing.T) {
	payload := make([]byte, 3<<20+17)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	head := Header{Type: TypeBatch, ID: 9, Length: uint32(len(payload))}.Append(nil)
	next := Header{Type: TypePing, ID: 10}.Append(nil)
	stream := append(append(head, payload...), next...)
	r := NewReader(&oneByteChunks{b: stream, n: 50000}, 64<<20)
	f, err := r.ReadFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Payload, payload) {
		t.Fatalf("payload of %d bytes differs from the %d sent", len(f.Payload), len(payload))
	}
	if f, err = r.ReadFrame(nil); err != nil || f.Type != TypePing || f.ID != 10 {
		t.Fatalf("next frame = %v %d, %v; want Ping 10", f.Type, f.ID, err)
	}
}

// oneByteChunks returns at most n bytes per Read.
type oneByteChunks struct {
	b []byte
	n int
}

func (r *oneByteChunks) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[k:]
	return k, nil
}
