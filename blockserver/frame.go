package blockserver

import "fmt"

// Frame types: network-common's Message.Type ids (the same from Spark 3.5
// to 4.3).
const (
	TypeChunkFetchRequest      byte = 0
	TypeChunkFetchSuccess      byte = 1
	TypeChunkFetchFailure      byte = 2
	TypeRpcRequest             byte = 3
	TypeRpcResponse            byte = 4
	TypeRpcFailure             byte = 5
	TypeStreamRequest          byte = 6
	TypeStreamResponse         byte = 7
	TypeStreamFailure          byte = 8
	TypeOneWayMessage          byte = 9
	TypeUploadStream           byte = 10
	TypeMergedBlockMetaRequest byte = 11
	TypeMergedBlockMetaSuccess byte = 12
)

// FrameLenSize is the size of a frame's length field; the length counts
// itself, the type byte, the message's fields and its body.
const FrameLenSize = 8

// frameHeaderMin is the smallest frame: its length and a type byte.
const frameHeaderMin = FrameLenSize + 1

// Bounds of request fields the server decodes.
const (
	maxStringLen = 64 << 10 // any one string of a request (ids, block ids, algorithm)
	maxArray     = 1 << 24  // any one array's count (the frame bounds it first)
)

// Request is a frame a client sends: one of *ChunkFetchRequest,
// *RpcRequest, *OneWayMessage, *StreamRequest, *UploadStream,
// *MergedBlockMetaRequest.
type Request interface{ requestType() byte }

// ChunkFetchRequest asks for one chunk (one block) of a stream that a
// StreamHandle announced: i64 stream_id, i32 chunk_index.
type ChunkFetchRequest struct {
	StreamID   int64
	ChunkIndex int32
}

// RpcRequest carries a request body (a block-transfer message, or an
// authentication message): i64 request_id, i32 body_size, then the body,
// which is the rest of the frame.
type RpcRequest struct {
	RequestID int64
	Body      []byte
}

// OneWayMessage is a body with no answer: i32 body_size, body.
type OneWayMessage struct{ Body []byte }

// StreamRequest asks for a named stream: string stream_id.
type StreamRequest struct{ StreamID string }

// UploadStream announces a streamed upload: i64 request_id, i32
// meta_size, meta, i64 body_byte_count; the body follows the frame
// outside it.
type UploadStream struct {
	RequestID     int64
	Meta          []byte
	BodyByteCount int64
}

// MergedBlockMetaRequest asks for a push-merged block's meta: i64
// request_id, string app_id, i32 shuffle_id, i32 shuffle_merge_id, i32
// reduce_id.
type MergedBlockMetaRequest struct {
	RequestID                           int64
	AppID                               string
	ShuffleID, ShuffleMergeID, ReduceID int32
}

func (*ChunkFetchRequest) requestType() byte      { return TypeChunkFetchRequest }
func (*RpcRequest) requestType() byte             { return TypeRpcRequest }
func (*OneWayMessage) requestType() byte          { return TypeOneWayMessage }
func (*StreamRequest) requestType() byte          { return TypeStreamRequest }
func (*UploadStream) requestType() byte           { return TypeUploadStream }
func (*MergedBlockMetaRequest) requestType() byte { return TypeMergedBlockMetaRequest }

// DecodeRequest decodes a frame's content after its length: the type byte,
// the fields and the body. A response type, an unknown type, a body size
// that is not what is left of the frame, or trailing bytes are errors
// wrapping ErrMalformed: the server closes the connection on them, as
// Spark's decoder does.
func DecodeRequest(frame []byte) (Request, error) {
	if len(frame) == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrMalformed)
	}
	t, p := frame[0], frame[1:]
	switch t {
	case TypeChunkFetchRequest:
		d := decoder{msg: "ChunkFetchRequest", p: p}
		m := &ChunkFetchRequest{StreamID: d.i64("stream_id"), ChunkIndex: d.i32("chunk_index")}
		return m, d.finish()
	case TypeRpcRequest:
		d := decoder{msg: "RpcRequest", p: p}
		m := &RpcRequest{RequestID: d.i64("request_id")}
		m.Body = d.body()
		return m, d.finish()
	case TypeOneWayMessage:
		d := decoder{msg: "OneWayMessage", p: p}
		m := &OneWayMessage{Body: d.body()}
		return m, d.finish()
	case TypeStreamRequest:
		d := decoder{msg: "StreamRequest", p: p}
		m := &StreamRequest{StreamID: d.str("stream_id", maxStringLen)}
		return m, d.finish()
	case TypeUploadStream:
		d := decoder{msg: "UploadStream", p: p}
		m := &UploadStream{RequestID: d.i64("request_id")}
		n := d.i32("meta_size")
		if d.err == nil && (n < 0 || !d.need("meta", int(n))) {
			d.fail("meta_size", "%d with %d bytes left", n, len(d.p)-d.off)
		}
		if d.err == nil {
			m.Meta = d.p[d.off : d.off+int(n)]
			d.off += int(n)
		}
		m.BodyByteCount = d.i64("body_byte_count")
		return m, d.finish()
	case TypeMergedBlockMetaRequest:
		d := decoder{msg: "MergedBlockMetaRequest", p: p}
		m := &MergedBlockMetaRequest{RequestID: d.i64("request_id"), AppID: d.str("app_id", maxStringLen),
			ShuffleID: d.i32("shuffle_id"), ShuffleMergeID: d.i32("shuffle_merge_id"), ReduceID: d.i32("reduce_id")}
		return m, d.finish()
	case TypeChunkFetchSuccess, TypeChunkFetchFailure, TypeRpcResponse, TypeRpcFailure,
		TypeStreamResponse, TypeStreamFailure, TypeMergedBlockMetaSuccess:
		return nil, fmt.Errorf("%w: frame type %d is a response, not a request", ErrMalformed, t)
	default:
		return nil, fmt.Errorf("%w: unknown frame type %d", ErrMalformed, t)
	}
}

// body reads an i32 body size that must be exactly what is left, and
// returns those bytes.
func (d *decoder) body() []byte {
	n := d.i32("body_size")
	if d.err != nil {
		return nil
	}
	if left := len(d.p) - d.off; int(n) != left || n < 0 {
		d.fail("body_size", "%d, but the frame holds %d bytes of body", n, left)
		return nil
	}
	b := d.p[d.off:]
	d.off = len(d.p)
	return b
}

// appendFrameHeader appends a frame's length (FrameLenSize + 1 + fields +
// bodyLen) and type; the caller appends fields bytes of fields next.
func appendFrameHeader(dst []byte, t byte, fields int, bodyLen int64) []byte {
	dst = appendI64(dst, int64(frameHeaderMin+fields)+bodyLen)
	return append(dst, t)
}

// AppendChunkFetchSuccessHeader appends the frame header of a
// ChunkFetchSuccess whose body (the block's bytes, bodyLen of them) the
// caller sends right after it: i64 length, u8 1, i64 stream_id, i32
// chunk_index.
func AppendChunkFetchSuccessHeader(dst []byte, streamID int64, chunk int32, bodyLen int64) []byte {
	dst = appendFrameHeader(dst, TypeChunkFetchSuccess, 12, bodyLen)
	dst = appendI64(dst, streamID)
	return appendI32(dst, chunk)
}

// AppendChunkFetchFailure appends a ChunkFetchFailure frame: i64
// stream_id, i32 chunk_index, string error.
func AppendChunkFetchFailure(dst []byte, streamID int64, chunk int32, msg string) []byte {
	dst = appendFrameHeader(dst, TypeChunkFetchFailure, 12+4+len(msg), 0)
	dst = appendI64(dst, streamID)
	dst = appendI32(dst, chunk)
	return appendString(dst, msg)
}

// AppendRpcResponse appends an RpcResponse frame: i64 request_id, i32
// body_size, body.
func AppendRpcResponse(dst []byte, requestID int64, body []byte) []byte {
	return appendRpc(dst, TypeRpcResponse, requestID, body)
}

// AppendRpcFailure appends an RpcFailure frame: i64 request_id, string
// error.
func AppendRpcFailure(dst []byte, requestID int64, msg string) []byte {
	dst = appendFrameHeader(dst, TypeRpcFailure, 8+4+len(msg), 0)
	dst = appendI64(dst, requestID)
	return appendString(dst, msg)
}

// AppendStreamFailure appends a StreamFailure frame: string stream_id,
// string error.
func AppendStreamFailure(dst []byte, streamID, msg string) []byte {
	dst = appendFrameHeader(dst, TypeStreamFailure, 4+len(streamID)+4+len(msg), 0)
	dst = appendString(dst, streamID)
	return appendString(dst, msg)
}

// AppendChunkFetchRequest appends a ChunkFetchRequest frame (a client's).
func AppendChunkFetchRequest(dst []byte, streamID int64, chunk int32) []byte {
	dst = appendFrameHeader(dst, TypeChunkFetchRequest, 12, 0)
	dst = appendI64(dst, streamID)
	return appendI32(dst, chunk)
}

// AppendRpcRequest appends an RpcRequest frame (a client's).
func AppendRpcRequest(dst []byte, requestID int64, body []byte) []byte {
	return appendRpc(dst, TypeRpcRequest, requestID, body)
}

// appendRpc appends an RpcRequest or RpcResponse frame (typ), which share
// their layout.
func appendRpc(dst []byte, typ byte, requestID int64, body []byte) []byte {
	dst = appendFrameHeader(dst, typ, 12, int64(len(body)))
	dst = appendI64(dst, requestID)
	dst = appendI32(dst, int32(len(body)))
	return append(dst, body...)
}

// Response is a frame the server sends, as a client decodes it.
type Response struct {
	Type       byte
	StreamID   int64  // ChunkFetchSuccess, ChunkFetchFailure
	ChunkIndex int32  // ChunkFetchSuccess, ChunkFetchFailure
	RequestID  int64  // RpcResponse, RpcFailure
	Error      string // the failures
	Stream     string // StreamFailure's stream id
	Body       []byte // ChunkFetchSuccess, RpcResponse
}

// DecodeResponse decodes a frame's content after its length as a client
// reads it: ChunkFetchSuccess, ChunkFetchFailure, RpcResponse, RpcFailure
// or StreamFailure.
func DecodeResponse(frame []byte) (*Response, error) {
	if len(frame) == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrMalformed)
	}
	r := &Response{Type: frame[0]}
	d := decoder{msg: "response", p: frame[1:]}
	switch r.Type {
	case TypeChunkFetchSuccess:
		d.msg = "ChunkFetchSuccess"
		r.StreamID, r.ChunkIndex = d.i64("stream_id"), d.i32("chunk_index")
		if d.err == nil {
			r.Body = d.p[d.off:]
			d.off = len(d.p)
		}
	case TypeChunkFetchFailure:
		d.msg = "ChunkFetchFailure"
		r.StreamID, r.ChunkIndex = d.i64("stream_id"), d.i32("chunk_index")
		r.Error = d.str("error", len(frame))
	case TypeRpcResponse:
		d.msg = "RpcResponse"
		r.RequestID = d.i64("request_id")
		r.Body = d.body()
	case TypeRpcFailure:
		d.msg = "RpcFailure"
		r.RequestID = d.i64("request_id")
		r.Error = d.str("error", len(frame))
	case TypeStreamFailure:
		d.msg = "StreamFailure"
		r.Stream = d.str("stream_id", len(frame))
		r.Error = d.str("error", len(frame))
	default:
		return nil, fmt.Errorf("%w: frame type %d is not a response this server sends", ErrMalformed, r.Type)
	}
	return r, d.finish()
}
