package sparkauth

import (
	"encoding/binary"
	"fmt"
	"io"
)

// A minimal network-common frame codec for the tests: an 8-byte big-endian
// frame length that counts itself, a 1-byte message type, then the message.
// RpcRequest (3) and RpcResponse (4) are i64 request id, i32 body length,
// body; RpcFailure (5) is i64 request id, then the error as a string (i32
// length, UTF-8).
const (
	msgRpcRequest  = 3
	msgRpcResponse = 4
	msgRpcFailure  = 5
	testMaxFrame   = 16 << 20
)

type frame struct {
	typ  byte
	id   int64
	body []byte
}

func readFrame(r io.Reader) (frame, error) {
	var hdr [9]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint64(hdr[:8])
	if n < 9 || n > testMaxFrame {
		return frame{}, fmt.Errorf("frame length %d out of range", n)
	}
	rest := make([]byte, n-9)
	if _, err := io.ReadFull(r, rest); err != nil {
		return frame{}, err
	}
	f := frame{typ: hdr[8]}
	if f.typ != msgRpcRequest {
		return f, fmt.Errorf("message type %d, want RpcRequest", f.typ)
	}
	if len(rest) < 12 {
		return f, fmt.Errorf("RpcRequest of %d bytes", len(rest))
	}
	f.id = int64(binary.BigEndian.Uint64(rest))
	bl := binary.BigEndian.Uint32(rest[8:])
	if int(bl) != len(rest)-12 {
		return f, fmt.Errorf("RpcRequest body length %d, frame has %d", bl, len(rest)-12)
	}
	f.body = rest[12:]
	return f, nil
}

func rpcFrame(typ byte, id int64, body []byte) []byte {
	b := make([]byte, 0, 21+len(body))
	b = binary.BigEndian.AppendUint64(b, uint64(21+len(body)))
	b = append(b, typ)
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// writeResponse writes an RpcResponse: through a FrameWriter as the block
// server sends a block (BeginFrame, the header, the body in pieces), else in
// one Write.
func writeResponse(w io.Writer, id int64, body []byte) error {
	b := rpcFrame(msgRpcResponse, id, body)
	fw, ok := w.(FrameWriter)
	if !ok {
		_, err := w.Write(b)
		return err
	}
	if err := fw.BeginFrame(int64(len(b))); err != nil {
		return err
	}
	if _, err := fw.Write(b[:21]); err != nil {
		return err
	}
	for b = b[21:]; len(b) > 0; {
		n := min(len(b), 7000)
		if _, err := fw.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func writeFailure(w io.Writer, id int64, msg string) error {
	_, err := w.Write(rpcFrame(msgRpcFailure, id, []byte(msg)))
	return err
}
