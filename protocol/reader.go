package protocol

import (
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// Frame is one frame read by a Reader.
type Frame struct {
	Header
	Payload []byte
	// FD is the file descriptor that came with a FlagFD frame, -1
	// otherwise. The caller owns it and must close it.
	FD int
}

// readBufSize is the Reader's buffer: control frames and frame heads are
// read in chunks of this size; larger payloads are read straight into
// their destination.
const readBufSize = 64 << 10

// initialPayload is the first allocation for a payload larger than the
// caller's buffer; it doubles as bytes arrive.
const initialPayload = 256 << 10

// maxFDsPerRead sizes the ancillary buffer. A conforming peer sends one
// fd per sendmsg; room for more lets the Reader see and close extras
// rather than have the kernel truncate silently.
const maxFDsPerRead = 16

// pendingFD is a received descriptor and the stream range [start, end)
// of the recvmsg that delivered it: the kernel delivers a descriptor with
// the read that consumes the first byte of the sendmsg that carried it,
// so the frame it belongs to starts inside that range.
type pendingFD struct {
	fd         int
	start, end int64
}

func (p pendingFD) stray() error {
	return fmt.Errorf("%w: a file descriptor arrived with stream bytes [%d, %d) but no FlagFD frame starts there", ErrBadFrame, p.start, p.end)
}

// Reader reads frames from a byte stream and, on a Unix socket, the file
// descriptors passed with them. It enforces the frame limit before
// allocating and associates each received descriptor with exactly one
// FlagFD frame (see docs/protocol.md, "Passing file descriptors"): a
// descriptor that arrives with no frame to claim it, several descriptors
// in one message, or a FlagFD frame without one is a framing error, and
// every descriptor not handed to the caller is closed. A Reader is not
// safe for concurrent use; after an error it returns that error forever.
type Reader struct {
	src      io.Reader
	uc       *net.UnixConn // nil when the stream cannot pass descriptors
	maxFrame uint32

	buf  []byte
	r, w int   // buf[r:w] is buffered, unread
	pos  int64 // stream offset just past buf[w-1]
	oob  []byte
	fds  []pendingFD
	err  error

	prealloc int              // payloads up to this size are allocated whole at once
	alloc    func(int) []byte // allocates them, when set
	// admit, when set, is asked for every payload of more than admitMin
	// bytes before the reader allocates or reads it.
	admit    func(n int) error
	admitMin int
}

// SetAdmit makes the reader call admit with the length of every payload
// longer than min bytes, after its header and before it allocates or
// reads any of it; an error from admit ends ReadFrame with that error (a
// framing error: the stream stays inside the frame). A server bounds the
// memory of the frames its connections are reading this way.
func (r *Reader) SetAdmit(min int, admit func(n int) error) { r.admit, r.admitMin = admit, min }

// SetMaxFrame changes the frame limit for the frames read from now on.
func (r *Reader) SetMaxFrame(n uint32) { r.maxFrame = n }

// Scrub zeroes every byte of the reader's buffer but those buffered and
// not yet read: what frames already read left there (a secret a payload
// carried, say RegisterExecutor's key) is gone from the reader's memory.
func (r *Reader) Scrub() {
	clear(r.buf[:r.r])
	clear(r.buf[r.w:])
}

// SetAllocator makes the reader take whole payload buffers (those within
// the preallocation bound that do not fit the caller's buffer) from alloc,
// which returns a slice of length n; the caller may recycle them once done
// with a frame.
func (r *Reader) SetAllocator(alloc func(n int) []byte) { r.alloc = alloc }

// SetPreallocate lets payloads of up to n bytes be allocated whole as soon
// as their header is read, instead of growing as their bytes arrive. A
// server raises it once a peer has passed its checks and handshake; the
// default is initialPayload.
func (r *Reader) SetPreallocate(n int) { r.prealloc = n }

// NewReader returns a Reader of frames from r with payloads of at most
// maxFrame bytes. When r is a *net.UnixConn the Reader also receives
// file descriptors.
func NewReader(r io.Reader, maxFrame uint32) *Reader {
	rd := &Reader{src: r, maxFrame: maxFrame, buf: make([]byte, readBufSize), prealloc: initialPayload}
	if uc, ok := r.(*net.UnixConn); ok {
		rd.uc = uc
		rd.oob = make([]byte, unix.CmsgSpace(4*maxFDsPerRead))
	}
	return rd
}

// ReadFrame reads the next frame. Its payload is read into buf when it
// fits (so a caller may reuse one buffer) and into a new slice otherwise.
// A stream that ends cleanly between frames returns io.EOF.
func (r *Reader) ReadFrame(buf []byte) (Frame, error) {
	if r.err != nil {
		return Frame{FD: -1}, r.err
	}
	f, err := r.readFrame(buf)
	if err != nil {
		r.err = err
		r.closeFDs()
		return Frame{FD: -1}, err
	}
	return f, nil
}

func (r *Reader) readFrame(buf []byte) (Frame, error) {
	f := Frame{FD: -1}
	for r.w-r.r < HeaderSize {
		if err := r.fill(); err != nil {
			if err == io.EOF && r.w-r.r > 0 {
				err = fmt.Errorf("%w: stream ends inside a frame header", io.ErrUnexpectedEOF)
			} else if err == io.EOF && len(r.fds) > 0 {
				err = r.fds[0].stray()
			}
			return f, err
		}
	}
	at := r.pos - int64(r.w-r.r) // stream offset of the header
	h, err := ParseHeader(r.buf[r.r:r.w], r.maxFrame)
	if err != nil {
		return f, err
	}
	r.r += HeaderSize
	f.Header = h

	// Claim the descriptor of this frame, refusing strays.
	if len(r.fds) > 0 && r.fds[0].end <= at {
		return f, r.fds[0].stray()
	}
	if h.Flags&FlagFD != 0 {
		if len(r.fds) == 0 || r.fds[0].start > at {
			return f, fmt.Errorf("%w: %v frame id %d has FlagFD but no file descriptor came with it", ErrBadFrame, h.Type, h.ID)
		}
		f.FD = r.fds[0].fd
		r.fds = r.fds[1:]
	}

	if r.admit != nil && int(h.Length) > r.admitMin {
		if err := r.admit(int(h.Length)); err != nil {
			if f.FD >= 0 {
				unix.Close(f.FD)
			}
			return Frame{FD: -1}, err
		}
	}

	// Up to the preallocation bound the payload is allocated whole; beyond
	// it the buffer grows as bytes arrive, never ahead of them by more than
	// it already holds, so a peer that declares a large frame and sends
	// little makes the reader allocate little.
	want := int(h.Length)
	switch {
	case cap(buf) >= want:
		f.Payload = buf[:want]
	case want <= r.prealloc && r.alloc != nil:
		f.Payload = r.alloc(want)
	case want <= r.prealloc:
		f.Payload = make([]byte, want)
	default:
		f.Payload = make([]byte, min(want, initialPayload)) // >= the buffered bytes: readBufSize < initialPayload
	}
	n := copy(f.Payload, r.buf[r.r:r.w])
	r.r += n
	for n < want {
		if n == len(f.Payload) {
			grown := make([]byte, min(want, 2*len(f.Payload)))
			copy(grown, f.Payload)
			f.Payload = grown
		}
		if r.r < r.w { // bytes buffered by an earlier fill
			k := copy(f.Payload[n:], r.buf[r.r:r.w])
			r.r += k
			n += k
			continue
		}
		var err error
		if len(f.Payload)-n >= len(r.buf) {
			var k int
			k, err = r.recv(f.Payload[n:])
			n += k
		} else {
			r.r, r.w = 0, 0
			err = r.fill()
		}
		if err != nil {
			if f.FD >= 0 {
				unix.Close(f.FD)
			}
			if err == io.EOF {
				err = fmt.Errorf("%w: stream ends inside the payload of %v frame id %d (%d of %d bytes)", io.ErrUnexpectedEOF, h.Type, h.ID, n, want)
			}
			return Frame{FD: -1}, err
		}
	}
	return f, nil
}

// DecodeFrame decodes f's payload and checks that a descriptor came with
// it exactly when the message wants one (WantsFD). On any error f.FD is
// closed and set to -1; on success the caller still owns f.FD.
func DecodeFrame(f *Frame) (Message, error) {
	m, err := Decode(f.Type, f.Payload)
	if err == nil {
		switch want := WantsFD(m); {
		case want && f.FD < 0:
			err = fmt.Errorf("%w: %v with plane %v came without a file descriptor", ErrMalformed, f.Type, PlaneMemfd)
		case !want && f.FD >= 0:
			err = fmt.Errorf("%w: %v came with a file descriptor it does not use", ErrMalformed, f.Type)
		}
	}
	if err != nil {
		if f.FD >= 0 {
			unix.Close(f.FD)
			f.FD = -1
		}
		return nil, err
	}
	return m, nil
}

// fill reads more bytes into the buffer, moving unread bytes to its front.
func (r *Reader) fill() error {
	if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	n, err := r.recv(r.buf[r.w:])
	r.w += n
	if n > 0 {
		if errors.Is(err, ErrBadFrame) { // descriptors passed against the rules
			return err
		}
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// recv reads into p, queuing any descriptors received with the bytes.
func (r *Reader) recv(p []byte) (int, error) {
	if r.uc == nil {
		n, err := r.src.Read(p)
		r.pos += int64(n)
		return n, err
	}
	n, oobn, flags, _, err := r.uc.ReadMsgUnix(p, r.oob)
	start := r.pos
	r.pos += int64(n)
	if oobn > 0 {
		if ferr := r.queueFDs(r.oob[:oobn], flags, start, r.pos); ferr != nil {
			return n, ferr
		}
	}
	if n == 0 && (err == nil || errors.Is(err, io.EOF)) {
		err = io.EOF
	}
	return n, err
}

func (r *Reader) queueFDs(oob []byte, flags int, start, end int64) error {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return fmt.Errorf("%w: ancillary data: %v", ErrBadFrame, err)
	}
	var got []int
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		fds, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			closeAll(got)
			return fmt.Errorf("%w: SCM_RIGHTS: %v", ErrBadFrame, err)
		}
		got = append(got, fds...)
	}
	switch {
	case flags&unix.MSG_CTRUNC != 0:
		closeAll(got)
		return fmt.Errorf("%w: ancillary data truncated (more than %d descriptors in one message)", ErrBadFrame, maxFDsPerRead)
	case len(got) > 1:
		closeAll(got)
		return fmt.Errorf("%w: %d file descriptors in one message, want 1", ErrBadFrame, len(got))
	case len(got) == 1:
		r.fds = append(r.fds, pendingFD{fd: got[0], start: start, end: end})
	}
	return nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func (r *Reader) closeFDs() {
	for _, p := range r.fds {
		unix.Close(p.fd)
	}
	r.fds = nil
}

// Close closes the descriptors received but not yet handed out, and makes
// later reads fail. It does not close the underlying stream.
func (r *Reader) Close() error {
	r.closeFDs()
	if r.err == nil {
		r.err = errReaderClosed
	}
	return nil
}

var errReaderClosed = errors.New("protocol: reader closed")

// WriteFrameFD writes frame, a whole encoded frame with FlagFD set, to c
// with fd passed as SCM_RIGHTS on the frame's first byte. If the kernel
// takes only part of the frame, the rest follows with plain writes.
// Callers serialize writes to c.
func WriteFrameFD(c *net.UnixConn, frame []byte, fd int) error {
	h, err := ParseHeader(frame, math32)
	if err != nil {
		return err
	}
	if h.Flags&FlagFD == 0 {
		return fmt.Errorf("%w: %v frame id %d passes a file descriptor without FlagFD", ErrBadFrame, h.Type, h.ID)
	}
	if fd < 0 {
		return fmt.Errorf("%w: %v frame id %d: file descriptor %d", ErrBadFrame, h.Type, h.ID, fd)
	}
	n, _, err := c.WriteMsgUnix(frame, unix.UnixRights(fd), nil)
	if err != nil {
		return err
	}
	if n < len(frame) {
		_, err = c.Write(frame[n:])
	}
	return err
}

const math32 = 1<<32 - 1
