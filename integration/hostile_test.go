package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"golang.org/x/sys/unix"
)

// hostile is a client that speaks the protocol by hand, so that it can
// send what no well-behaved client sends.
type hostile struct {
	uc   *net.UnixConn
	rd   *protocol.Reader
	next uint32
}

// hostileEnv is what the hostile cases need of their daemon.
type hostileEnv struct {
	socket  string
	allowed string // an allowed root, holding a local dir
	local   string // a local dir under allowed
	outside string // a directory outside every allowed root
	escape  string // a symlink under allowed that leads outside
}

func (e *hostileEnv) dial() (*hostile, error) {
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: e.socket, Net: "unix"})
	if err != nil {
		return nil, err
	}
	uc.SetDeadline(time.Now().Add(waitTimeout))
	return &hostile{uc: uc, rd: protocol.NewReader(uc, protocol.DefaultMaxFrame)}, nil
}

// ready dials, says Hello and registers app "hostile" (with local dirs
// when local is set).
func (e *hostileEnv) ready(local bool) (*hostile, error) {
	h, err := e.dial()
	if err != nil {
		return nil, err
	}
	if err := h.hello(); err != nil {
		h.close()
		return nil, err
	}
	reg := &protocol.RegisterExecutor{AppID: "hostile", ExecutorID: "1"}
	if local {
		reg.LocalDirs, reg.SubDirs = []string{e.local}, subDirs
	}
	if _, err := h.call(reg, protocol.TypeRegistered); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

func (h *hostile) close() {
	h.rd.Close()
	h.uc.Close()
}

// frame returns a frame with the given header fields around payload.
func frame(t protocol.Type, flags protocol.Flags, id uint32, payload []byte) []byte {
	b := protocol.Header{Type: t, Flags: flags, ID: id, Length: uint32(len(payload))}.Append(nil)
	return append(b, payload...)
}

// unchecked encodes m without validating it, as a hostile client would.
func unchecked(m protocol.Message) []byte { return m.Append(nil) }

func (h *hostile) id() uint32 {
	h.next++
	return h.next
}

// send writes a request frame of m (unvalidated) and returns its id.
func (h *hostile) send(m protocol.Message) (uint32, error) {
	id := h.id()
	_, err := h.uc.Write(frame(m.Type(), 0, id, unchecked(m)))
	return id, err
}

// sendFD writes a request frame of m with fd attached and FlagFD set.
func (h *hostile) sendFD(m protocol.Message, fd int) (uint32, error) {
	id := h.id()
	return id, protocol.WriteFrameFD(h.uc, frame(m.Type(), protocol.FlagFD, id, unchecked(m)), fd)
}

// response reads the response to request id.
func (h *hostile) response(id uint32) (protocol.Message, error) {
	f, err := h.rd.ReadFrame(nil)
	if err != nil {
		return nil, fmt.Errorf("reading the response to request %d: %w", id, err)
	}
	if f.FD >= 0 {
		unix.Close(f.FD)
		return nil, fmt.Errorf("the daemon passed a file descriptor with %v", f.Type)
	}
	m, err := protocol.DecodeFrame(&f)
	if err != nil {
		return nil, fmt.Errorf("response %v to request %d does not decode: %w", f.Type, id, err)
	}
	if f.ID != id {
		return nil, fmt.Errorf("response %v (%v) has id %d, want %d", f.Type, m, f.ID, id)
	}
	return m, nil
}

// call sends m and wants a response of type want.
func (h *hostile) call(m protocol.Message, want protocol.Type) (protocol.Message, error) {
	id, err := h.send(m)
	if err != nil {
		return nil, err
	}
	return h.expect(id, want)
}

func (h *hostile) expect(id uint32, want protocol.Type) (protocol.Message, error) {
	r, err := h.response(id)
	if err != nil {
		return nil, err
	}
	if r.Type() != want {
		return nil, fmt.Errorf("response %v (%v), want %v", r.Type(), r, want)
	}
	return r, nil
}

// refused wants an Error response with code to request id.
func (h *hostile) refused(id uint32, code protocol.Code) error {
	r, err := h.response(id)
	if err != nil {
		return err
	}
	if e, ok := r.(*protocol.Error); !ok || e.Code != code {
		return fmt.Errorf("response %v (%v), want an Error %v", r.Type(), r, code)
	}
	return nil
}

// closed wants the daemon to close the connection, after Error frames of
// code at most (with the request's id or 0).
func (h *hostile) closed(code protocol.Code) error {
	for {
		f, err := h.rd.ReadFrame(nil)
		if errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("want the connection closed: %w", err)
		}
		m, err := protocol.DecodeFrame(&f)
		if e, ok := m.(*protocol.Error); err != nil || !ok || e.Code != code {
			return fmt.Errorf("want the connection closed after an Error %v, got %v (%v, %v)", code, f.Type, m, err)
		}
	}
}

// alive checks that the connection still serves.
func (h *hostile) alive() error {
	_, err := h.call(&protocol.Ping{}, protocol.TypePong)
	if err != nil {
		return fmt.Errorf("connection no longer serves: %w", err)
	}
	return nil
}

func (h *hostile) hello() error {
	_, err := h.call(&protocol.Hello{MinVersion: protocol.MinVersion, MaxVersion: protocol.MaxVersion, Client: "hostile"}, protocol.TypeServerHello)
	return err
}

// open opens an opaque (or columnar) map output of parts partitions.
func (h *hostile) open(mapID int64, parts int32, kind protocol.PayloadKind) (uint64, error) {
	r, err := h.call(&protocol.OpenMapOutput{ShuffleID: 1, MapID: mapID, NumPartitions: parts, Kind: kind}, protocol.TypeOpened)
	if err != nil {
		return 0, err
	}
	return r.(*protocol.Opened).Handle, nil
}

// aborted checks that the map output of handle was aborted: its Commit is
// refused with Aborted and the connection still serves.
func (h *hostile) aborted(handle uint64) error {
	id, err := h.send(&protocol.Commit{Handle: handle})
	if err != nil {
		return err
	}
	if err := h.refused(id, protocol.CodeAborted); err != nil {
		return fmt.Errorf("Commit after a refused batch: %w", err)
	}
	return h.alive()
}

// badBatch opens a map output, sends one batch that must be refused with
// code, and checks that the map output was aborted. fd, when not -1, goes
// with the batch (and is closed).
func (h *hostile) badBatch(kind protocol.PayloadKind, b *protocol.Batch, fd int, code protocol.Code) error {
	handle, err := h.open(1, 4, kind)
	if err != nil {
		return err
	}
	b.Handle = handle
	var id uint32
	if fd >= 0 {
		id, err = h.sendFD(b, fd)
		unix.Close(fd)
	} else {
		id, err = h.send(b)
	}
	if err != nil {
		return err
	}
	if err := h.refused(id, code); err != nil {
		return err
	}
	return h.aborted(handle)
}

// memfd returns a memfd of size bytes; sealing adds the seals the daemon
// wants, allowSealing false creates one that cannot be sealed at all.
func memfd(size int, allowSealing, sealed bool) (int, error) {
	flags := unix.MFD_CLOEXEC
	if allowSealing {
		flags |= unix.MFD_ALLOW_SEALING
	}
	fd, err := unix.MemfdCreate("hostile", flags)
	if err != nil {
		return -1, err
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if sealed {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// hostileMaxFrame is the frame limit of the hostile test's daemon.
const hostileMaxFrame = 1 << 20

// hostileMaxInline is the max_inline the daemon announces for
// hostileMaxFrame: the frame less 1 MiB, or half the frame if more.
const hostileMaxInline = hostileMaxFrame / 2

var fourParts = []int64{0, 10, 20, 30, 40}

func memfdBatch(length int64) *protocol.Batch {
	return &protocol.Batch{Kind: protocol.KindOpaque, Plane: protocol.PlaneMemfd, Opaque: protocol.OpaqueLayout{PartitionOffsets: fourParts}, Region: protocol.Region{Length: length}}
}

func inlineBatch(data []byte, offs []int64) *protocol.Batch {
	return &protocol.Batch{Kind: protocol.KindOpaque, Plane: protocol.PlaneInline, Opaque: protocol.OpaqueLayout{PartitionOffsets: offs}, Inline: data}
}

// columnarBatch is a batch of 4 rows in 4 partitions: one int64 column and
// one string column, laid out in a 128-byte payload.
func columnarBatch() (*protocol.Batch, []byte) {
	payload := make([]byte, 128)
	for i, o := range []uint32{0, 1, 3, 6, 10} { // string offsets at 32
		binary.LittleEndian.PutUint32(payload[32+4*i:], o)
	}
	copy(payload[64:], "abbcccdddd")
	return &protocol.Batch{
		Kind:  protocol.KindColumnar,
		Plane: protocol.PlaneInline,
		Columnar: protocol.ColumnarLayout{
			Rows: 4,
			Columns: []protocol.Column{
				{Type: protocol.TypeInt64, Name: "k", Data: protocol.Buffer{Offset: 0, Length: 32}},
				{Type: protocol.TypeString, Name: "s", Offsets: protocol.Buffer{Offset: 32, Length: 20}, Data: protocol.Buffer{Offset: 64, Length: 10}},
			},
			PartitionRows: []int64{0, 1, 2, 3, 4},
		},
		Inline: payload,
	}, payload
}

// hostileCase is one hostile connection: run returns what went differently
// from the expected refusal.
type hostileCase struct {
	name string
	run  func(e *hostileEnv) error
}

// preHello runs a case on a fresh connection that has not said Hello.
func preHello(send func(h *hostile) error, code protocol.Code) func(e *hostileEnv) error {
	return func(e *hostileEnv) error {
		h, err := e.dial()
		if err != nil {
			return err
		}
		defer h.close()
		if err := send(h); err != nil {
			return err
		}
		return h.closed(code)
	}
}

// write sends raw bytes, then (when half) closes the sending side.
func write(b []byte, half bool) func(h *hostile) error {
	return func(h *hostile) error {
		if _, err := h.uc.Write(b); err != nil {
			return err
		}
		if half {
			return h.uc.CloseWrite()
		}
		return nil
	}
}

// registered runs a case on a connection registered for app "hostile".
func registered(local bool, run func(e *hostileEnv, h *hostile) error) func(e *hostileEnv) error {
	return func(e *hostileEnv) error {
		h, err := e.ready(local)
		if err != nil {
			return err
		}
		defer h.close()
		return run(e, h)
	}
}

// refusedThenAlive sends m and wants an Error code, the connection still
// serving.
func refusedThenAlive(m protocol.Message, code protocol.Code) func(e *hostileEnv, h *hostile) error {
	return func(_ *hostileEnv, h *hostile) error {
		id, err := h.send(m)
		if err != nil {
			return err
		}
		if err := h.refused(id, code); err != nil {
			return err
		}
		return h.alive()
	}
}

func hostileCases() []hostileCase {
	hello := unchecked(&protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "hostile"})
	header := func(t protocol.Type, length uint32) []byte {
		return protocol.Header{Type: t, ID: 1, Length: length}.Append(nil)
	}
	badMagic := frame(protocol.TypeHello, 0, 1, hello)
	badMagic[0] = 'X'
	badFlags := frame(protocol.TypeHello, 0x4000, 1, hello)
	badReserved := frame(protocol.TypeHello, 0, 1, hello)
	badReserved[6] = 1

	return []hostileCase{
		// Framing that cannot be decoded: the connection is closed.
		{"bad-magic", preHello(write(badMagic, false), protocol.CodeInvalidArgument)},
		{"unknown-flags", preHello(write(badFlags, false), protocol.CodeInvalidArgument)},
		{"reserved-bytes", preHello(write(badReserved, false), protocol.CodeInvalidArgument)},
		{"absurd-length", preHello(write(header(protocol.TypeHello, 0xFFFFFFFF), false), protocol.CodeInvalidArgument)},
		{"length-over-max-frame", preHello(write(header(protocol.TypeBatch, hostileMaxFrame+1), false), protocol.CodeInvalidArgument)},
		{"truncated-header", preHello(write(badMagic[:7], true), protocol.CodeInvalidArgument)},
		{"truncated-payload", preHello(write(frame(protocol.TypeHello, 0, 1, hello)[:protocol.HeaderSize+3], true), protocol.CodeInvalidArgument)},
		{"truncated-max-frame", preHello(write(append(header(protocol.TypeBatch, hostileMaxFrame), make([]byte, 4096)...), true), protocol.CodeInvalidArgument)},
		{"flag-fd-without-fd", preHello(write(frame(protocol.TypeHello, protocol.FlagFD, 1, hello), false), protocol.CodeInvalidArgument)},
		{"stray-fd", func(e *hostileEnv) error {
			// A descriptor that comes with a frame without FlagFD: the
			// reader finds it stray at the next frame header.
			h, err := e.dial()
			if err != nil {
				return err
			}
			defer h.close()
			fd, err := memfd(64, true, true)
			if err != nil {
				return err
			}
			_, _, err = h.uc.WriteMsgUnix(frame(protocol.TypeHello, 0, 1, hello), unix.UnixRights(fd), nil)
			unix.Close(fd)
			if err != nil {
				return err
			}
			if _, err := h.expect(1, protocol.TypeServerHello); err != nil {
				return err
			}
			if _, err := h.uc.Write(frame(protocol.TypePing, 0, 2, nil)); err != nil {
				return err
			}
			return h.closed(protocol.CodeInvalidArgument)
		}},

		// Decodable frames that are wrong before Hello: refused and closed.
		{"unknown-type-first", preHello(write(frame(0x0777, 0, 1, nil), false), protocol.CodeUnsupported)},
		{"request-before-hello", preHello(write(frame(protocol.TypePing, 0, 1, nil), false), protocol.CodeFailedPrecondition)},
		{"malformed-request-before-hello", preHello(write(frame(protocol.TypeOpen, 0, 1, []byte{1, 2, 3}), false), protocol.CodeInvalidArgument)},
		{"response-before-hello", preHello(write(frame(protocol.TypePong, 0, 1, nil), false), protocol.CodeFailedPrecondition)},
		{"malformed-hello", preHello(write(frame(protocol.TypeHello, 0, 1, hello[:3]), false), protocol.CodeInvalidArgument)},
		{"unknown-versions", preHello(write(frame(protocol.TypeHello, 0, 1, unchecked(&protocol.Hello{MinVersion: 90, MaxVersion: 99})), false), protocol.CodeVersionMismatch)},
		{"inverted-versions", preHello(write(frame(protocol.TypeHello, 0, 1, unchecked(&protocol.Hello{MinVersion: 1, MaxVersion: 0})), false), protocol.CodeInvalidArgument)},

		// Wrong requests on a live connection: refused, the connection
		// serves on.
		{"unknown-type", func(e *hostileEnv) error {
			h, err := e.dial()
			if err != nil {
				return err
			}
			defer h.close()
			if err := h.hello(); err != nil {
				return err
			}
			if _, err := h.uc.Write(frame(0x0777, 0, 7, []byte("junk"))); err != nil {
				return err
			}
			if err := h.refused(7, protocol.CodeUnsupported); err != nil {
				return err
			}
			return h.alive()
		}},
		{"response-type-as-request", func(e *hostileEnv) error {
			h, err := e.dial()
			if err != nil {
				return err
			}
			defer h.close()
			if err := h.hello(); err != nil {
				return err
			}
			if _, err := h.uc.Write(frame(protocol.TypePong, 0, 7, nil)); err != nil {
				return err
			}
			if err := h.refused(7, protocol.CodeInvalidArgument); err != nil {
				return err
			}
			return h.alive()
		}},
		{"second-hello", registered(false, refusedThenAlive(&protocol.Hello{MinVersion: 1, MaxVersion: 1}, protocol.CodeFailedPrecondition))},
		{"second-register", registered(false, refusedThenAlive(&protocol.RegisterExecutor{AppID: "x", ExecutorID: "1"}, protocol.CodeAlreadyExists))},
		{"open-before-register", func(e *hostileEnv) error {
			h, err := e.dial()
			if err != nil {
				return err
			}
			defer h.close()
			if err := h.hello(); err != nil {
				return err
			}
			id, err := h.send(&protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque})
			if err != nil {
				return err
			}
			if err := h.refused(id, protocol.CodeFailedPrecondition); err != nil {
				return err
			}
			return h.alive()
		}},
		{"app-id-traversal", func(e *hostileEnv) error {
			h, err := e.dial()
			if err != nil {
				return err
			}
			defer h.close()
			if err := h.hello(); err != nil {
				return err
			}
			return refusedThenAlive(&protocol.RegisterExecutor{AppID: "../../etc", ExecutorID: "1"}, protocol.CodeInvalidArgument)(e, h)
		}},
		{"local-dir-outside-roots", func(e *hostileEnv) error {
			h, err := e.dial()
			if err != nil {
				return err
			}
			defer h.close()
			if err := h.hello(); err != nil {
				return err
			}
			return refusedThenAlive(&protocol.RegisterExecutor{AppID: "hostile", ExecutorID: "1", LocalDirs: []string{e.outside}, SubDirs: subDirs}, protocol.CodePermissionDenied)(e, h)
		}},
		{"local-dir-symlink-escape", func(e *hostileEnv) error {
			h, err := e.dial()
			if err != nil {
				return err
			}
			defer h.close()
			if err := h.hello(); err != nil {
				return err
			}
			return refusedThenAlive(&protocol.RegisterExecutor{AppID: "hostile", ExecutorID: "1", LocalDirs: []string{e.escape}, SubDirs: subDirs}, protocol.CodePermissionDenied)(e, h)
		}},
		{"malformed-open", func(e *hostileEnv) error {
			h, err := e.ready(false)
			if err != nil {
				return err
			}
			defer h.close()
			if _, err := h.uc.Write(frame(protocol.TypeOpen, 0, 7, []byte{1, 2, 3})); err != nil {
				return err
			}
			if err := h.refused(7, protocol.CodeInvalidArgument); err != nil {
				return err
			}
			return h.alive()
		}},
		{"negative-ids", registered(false, refusedThenAlive(&protocol.OpenMapOutput{ShuffleID: -1, MapID: -5, NumPartitions: 4, Kind: protocol.KindOpaque}, protocol.CodeInvalidArgument))},
		{"absurd-partitions", registered(false, refusedThenAlive(&protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1 << 30, Kind: protocol.KindOpaque}, protocol.CodeInvalidArgument))},
		{"unknown-codec", registered(false, refusedThenAlive(&protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 4, Kind: protocol.KindOpaque, Codec: "brotli"}, protocol.CodeUnsupported))},
		{"unknown-handle", registered(false, refusedThenAlive(&protocol.Commit{Handle: 999}, protocol.CodeNotFound))},
		{"batch-unknown-handle", registered(false, refusedThenAlive(&protocol.Batch{Handle: 999, Kind: protocol.KindOpaque, Plane: protocol.PlaneInline, Opaque: protocol.OpaqueLayout{PartitionOffsets: fourParts}, Inline: make([]byte, 40)}, protocol.CodeNotFound))},

		// Bad batches: refused, and the map output is aborted.
		{"offsets-past-inline-payload", registered(false, func(_ *hostileEnv, h *hostile) error {
			return h.badBatch(protocol.KindOpaque, inlineBatch(make([]byte, 20), fourParts), -1, protocol.CodeInvalidArgument)
		})},
		{"offsets-decreasing", registered(false, func(_ *hostileEnv, h *hostile) error {
			return h.badBatch(protocol.KindOpaque, inlineBatch(make([]byte, 40), []int64{0, 30, 10, 20, 40}), -1, protocol.CodeInvalidArgument)
		})},
		{"partition-count-differs", registered(false, func(_ *hostileEnv, h *hostile) error {
			return h.badBatch(protocol.KindOpaque, inlineBatch(make([]byte, 40), []int64{0, 20, 40}), -1, protocol.CodeFailedPrecondition)
		})},
		{"kind-differs", registered(false, func(_ *hostileEnv, h *hostile) error {
			b, _ := columnarBatch()
			return h.badBatch(protocol.KindOpaque, b, -1, protocol.CodeFailedPrecondition)
		})},
		{"offsets-past-memfd-region", registered(true, func(_ *hostileEnv, h *hostile) error {
			fd, err := memfd(4096, true, true)
			if err != nil {
				return err
			}
			b := memfdBatch(20) // offsets end at 40
			return h.badBatch(protocol.KindOpaque, b, fd, protocol.CodeInvalidArgument)
		})},
		{"unsealed-memfd", registered(true, func(_ *hostileEnv, h *hostile) error {
			fd, err := memfd(40, true, false)
			if err != nil {
				return err
			}
			return h.badBatch(protocol.KindOpaque, memfdBatch(40), fd, protocol.CodeInvalidArgument)
		})},
		{"unsealable-memfd", registered(false, func(_ *hostileEnv, h *hostile) error {
			fd, err := memfd(40, false, false)
			if err != nil {
				return err
			}
			return h.badBatch(protocol.KindOpaque, memfdBatch(40), fd, protocol.CodeInvalidArgument)
		})},
		{"memfd-smaller-than-declared", registered(false, func(_ *hostileEnv, h *hostile) error {
			fd, err := memfd(40, true, true)
			if err != nil {
				return err
			}
			b := memfdBatch(4000)
			b.Opaque.PartitionOffsets = []int64{0, 1000, 2000, 3000, 4000}
			return h.badBatch(protocol.KindOpaque, b, fd, protocol.CodeInvalidArgument)
		})},
		{"memfd-region-past-its-end", registered(false, func(_ *hostileEnv, h *hostile) error {
			fd, err := memfd(4096, true, true)
			if err != nil {
				return err
			}
			b := memfdBatch(40)
			b.Region.Offset = 4090
			return h.badBatch(protocol.KindOpaque, b, fd, protocol.CodeInvalidArgument)
		})},
		{"pipe-as-memfd", registered(false, func(_ *hostileEnv, h *hostile) error {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				return err
			}
			unix.Close(p[1])
			return h.badBatch(protocol.KindOpaque, memfdBatch(40), p[0], protocol.CodeInvalidArgument)
		})},
		{"fd-with-inline-batch", registered(false, func(_ *hostileEnv, h *hostile) error {
			fd, err := memfd(40, true, true)
			if err != nil {
				return err
			}
			return h.badBatch(protocol.KindOpaque, inlineBatch(make([]byte, 40), fourParts), fd, protocol.CodeInvalidArgument)
		})},
		{"columnar-buffer-outside-payload", registered(false, func(_ *hostileEnv, h *hostile) error {
			b, _ := columnarBatch()
			b.Columnar.Columns[1].Data = protocol.Buffer{Offset: 120, Length: 10}
			return h.badBatch(protocol.KindColumnar, b, -1, protocol.CodeInvalidArgument)
		})},
		{"columnar-offsets-decreasing", registered(false, func(_ *hostileEnv, h *hostile) error {
			b, payload := columnarBatch()
			binary.LittleEndian.PutUint32(payload[32+8:], 9) // row 1 ends after row 2
			return h.badBatch(protocol.KindColumnar, b, -1, protocol.CodeInvalidArgument)
		})},
		{"columnar-unknown-type", registered(false, func(_ *hostileEnv, h *hostile) error {
			b, _ := columnarBatch()
			b.Columnar.Columns[0].Type = 200
			return h.badBatch(protocol.KindColumnar, b, -1, protocol.CodeUnsupported)
		})},

		// Bounds the protocol states and the daemon enforces.
		{"inline-over-max-inline", registered(false, func(_ *hostileEnv, h *hostile) error {
			n := int64(hostileMaxInline + 1)
			return h.badBatch(protocol.KindOpaque, inlineBatch(make([]byte, n), []int64{0, n, n, n, n}), -1, protocol.CodeResourceExhausted)
		})},
		{"commit-result-over-max-frame", registered(false, refusedThenAlive(&protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: hostileMaxFrame / 16, Kind: protocol.KindOpaque}, protocol.CodeInvalidArgument))},
		{"request-id-zero", registered(false, func(_ *hostileEnv, h *hostile) error {
			if _, err := h.uc.Write(frame(protocol.TypePing, 0, 0, nil)); err != nil {
				return err
			}
			return h.closed(protocol.CodeInvalidArgument)
		})},

		// A client that leaves: its open map output is aborted.
		{"disconnect-mid-output", registered(true, func(_ *hostileEnv, h *hostile) error {
			handle, err := h.open(2, 4, protocol.KindOpaque)
			if err != nil {
				return err
			}
			b := inlineBatch(make([]byte, 40), fourParts)
			b.Handle = handle
			_, err = h.call(b, protocol.TypeBatchAccepted)
			return err // close without Commit
		})},
	}
}

// TestHostileClients sends every hostile case, then the whole set again
// and again (1000 connections; 10000 with -long), while a well-behaved
// client writes and verifies map outputs. Each hostile connection must get
// its error, or be closed for framing the daemon cannot decode; the daemon
// must go on serving, commit nothing of the hostile connections, and hold
// neither memory nor file descriptors for them.
func TestHostileClients(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	dir := t.TempDir()
	e := &hostileEnv{
		allowed: filepath.Join(dir, "spark"),
		outside: filepath.Join(dir, "outside"),
	}
	e.local = filepath.Join(e.allowed, "blockmgr-hostile")
	e.escape = filepath.Join(e.allowed, "escape")
	for _, d := range []string{e.local, e.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(e.outside, e.escape); err != nil {
		t.Fatal(err)
	}
	// A 1 MiB frame limit: a frame that declares the limit and then stalls
	// makes the daemon allocate the whole payload up front, so with the
	// default 64 MiB the resident set swings by hundreds of MiB with the
	// garbage collector's timing and no bound would mean anything.
	d := startDaemon(t, config{args: []string{"--allowed-roots", e.allowed, "--log-level", "info", "--max-frame", fmt.Sprint(hostileMaxFrame)}})
	e.socket = d.socket

	good, reg := d.dial(t, "good", nil)
	goodLayout := layoutOf(reg, nil)
	goodMap := int64(0)
	writeGood := func() error {
		goodMap++
		o := plan(int(goodMap), "good", goodLayout, shufflefile.ID{Shuffle: 1, Map: goodMap})
		res, err := o.write(ctx, good)
		if err != nil {
			return err
		}
		return o.verify(&res)
	}

	cases := hostileCases()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(e); err != nil {
				t.Error(err)
			}
			if err := writeGood(); err != nil {
				t.Errorf("well-behaved client after %s: %v", c.name, err)
			}
		})
	}
	if t.Failed() {
		return
	}

	// Again and again: the daemon must hold nothing for them.
	total := 1000
	if *long {
		total = 10000
	}
	runAll := func(n int) {
		t.Helper()
		for i := range n {
			c := cases[i%len(cases)]
			if err := c.run(e); err != nil {
				t.Fatalf("connection %d, %s: %v", i, c.name, err)
			}
			if i%len(cases) == len(cases)-1 {
				if err := writeGood(); err != nil {
					t.Fatalf("well-behaved client after %d hostile connections: %v", i+1, err)
				}
			}
		}
	}
	runAll(5 * len(cases)) // warm up
	rss0, fds0 := settle(t, d, -1)
	runAll(total)
	rss1, fds1 := settle(t, d, fds0)
	t.Logf("%d hostile connections: VmRSS %.1f → %.1f MiB, %d → %d open descriptors", total, mib(rss0), mib(rss1), fds0, fds1)
	if grow := rss1 - rss0; grow > maxRSSGrowth {
		t.Errorf("VmRSS grew by %.1f MiB over %d hostile connections, want at most %.0f MiB", mib(grow), total, mib(maxRSSGrowth))
	}
	if fds1 > fds0 {
		t.Errorf("the daemon holds %d descriptors after %d hostile connections, %d before", fds1, total, fds0)
	}

	d.stop()
	if d.log.contains("panic") {
		t.Errorf("the daemon logged a panic:\n%s", d.log.tail(40))
	}
	// Nothing of the hostile connections was committed, nothing is left.
	var files []string
	for _, dir := range []string{filepath.Join(d.root, "hostile"), e.local, e.outside} {
		filepath.WalkDir(dir, func(path string, de os.DirEntry, err error) error {
			if err == nil && !de.IsDir() {
				files = append(files, path)
			}
			return nil
		})
	}
	if len(files) > 0 {
		t.Errorf("files left by hostile connections: %q", files)
	}
}

// maxRSSGrowth bounds how much the daemon's resident set may grow over the
// hostile connections: the Go heap's slack, not a per-connection cost.
const maxRSSGrowth = 16 << 20

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// settle waits until the daemon has closed every hostile connection (its
// descriptors drop to want, or stop changing when want is -1) and returns
// its resident set and open descriptor count.
func settle(t *testing.T, d *daemon, want int) (int64, int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	last, stable := -1, 0
	for {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.pid()))
		if err != nil {
			t.Fatal(err)
		}
		n := len(fds)
		if n == last {
			stable++
		} else {
			last, stable = n, 0
		}
		if want >= 0 && n <= want || want < 0 && stable >= 5 || time.Now().After(deadline) {
			rss, err := vmRSS(d.pid())
			if err != nil {
				t.Fatal(err)
			}
			return rss, n
		}
		time.Sleep(10 * time.Millisecond)
	}
}
