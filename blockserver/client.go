package blockserver

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

// Client is a minimal fetcher of the block-transfer protocol, as Spark's
// OneForOneBlockFetcher drives it: an RPC, then the stream's chunks in
// order. It is for tests, benchmarks and tools; Spark's reducers use
// their own. It is not safe for concurrent use.
type Client struct {
	nc     net.Conn
	r      *bufio.Reader
	w      io.Writer
	nextID int64
	// MaxResponse bounds a response frame read whole (RPC answers and
	// chunks read by Fetch); default 1 GiB.
	MaxResponse int64
}

// NewClient returns a Client over nc.
func NewClient(nc net.Conn) *Client {
	return &Client{nc: nc, r: bufio.NewReaderSize(nc, 64<<10), w: nc, nextID: 1, MaxResponse: 1 << 30}
}

// Dial connects to a block server.
func Dial(addr string) (*Client, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewClient(nc), nil
}

// Conn returns the connection.
func (c *Client) Conn() net.Conn { return c.nc }

// Wrap makes the client read and write through r and w from now on (a
// transport cipher after authentication).
func (c *Client) Wrap(r io.Reader, w io.Writer) {
	c.r = bufio.NewReaderSize(r, 64<<10)
	c.w = w
}

// Close closes the connection.
func (c *Client) Close() error { return c.nc.Close() }

// Send writes raw bytes (a frame, or anything else).
func (c *Client) Send(b []byte) error {
	_, err := c.w.Write(b)
	return err
}

// ReadFrame reads one frame and decodes it as a response.
func (c *Client) ReadFrame() (*Response, error) {
	var hdr [FrameLenSize]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return nil, err
	}
	n := int64(binary.BigEndian.Uint64(hdr[:]))
	if n < frameHeaderMin || n-FrameLenSize > c.MaxResponse {
		return nil, fmt.Errorf("%w: response frame length %d", ErrMalformed, n)
	}
	b := make([]byte, n-FrameLenSize)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, err
	}
	return DecodeResponse(b)
}

// RPC sends body in an RpcRequest and returns the RpcResponse's body; an
// RpcFailure is an error with its text.
func (c *Client) RPC(body []byte) ([]byte, error) {
	id := c.nextID
	c.nextID++
	if err := c.Send(AppendRpcRequest(nil, id, body)); err != nil {
		return nil, err
	}
	r, err := c.ReadFrame()
	if err != nil {
		return nil, err
	}
	switch {
	case r.Type == TypeRpcFailure && r.RequestID == id:
		return nil, &RemoteError{Msg: r.Error}
	case r.Type != TypeRpcResponse || r.RequestID != id:
		return nil, fmt.Errorf("blockserver: answer to request %d: frame type %d, request %d", id, r.Type, r.RequestID)
	}
	return r.Body, nil
}

// RemoteError is a failure the server answered.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return "remote: " + e.Msg }

// Open sends an OpenBlocks or FetchShuffleBlocks message (its Append
// bytes) and returns the stream.
func (c *Client) Open(msg []byte) (streamID int64, chunks int32, err error) {
	body, err := c.RPC(msg)
	if err != nil {
		return 0, 0, err
	}
	return DecodeStreamHandle(body)
}

// FetchAll opens the stream msg (an encoded OpenBlocks or
// FetchShuffleBlocks) and fetches each of its chunks in order, holding
// them whole: for tests and small fetches. On error it returns the chunks
// fetched before it.
func (c *Client) FetchAll(msg []byte) ([][]byte, error) {
	sid, n, err := c.Open(msg)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for i := range n {
		var b bytes.Buffer
		if _, err := c.FetchChunk(sid, i, &b); err != nil {
			return out, err
		}
		out = append(out, b.Bytes())
	}
	return out, nil
}

// FetchChunk asks for one chunk and copies its body to w, returning its
// length; a ChunkFetchFailure is a *RemoteError. The body is streamed,
// never held whole.
func (c *Client) FetchChunk(streamID int64, index int32, w io.Writer) (int64, error) {
	if err := c.Send(AppendChunkFetchRequest(nil, streamID, index)); err != nil {
		return 0, err
	}
	var hdr [FrameLenSize + 1 + 12]byte
	if _, err := io.ReadFull(c.r, hdr[:FrameLenSize+1]); err != nil {
		return 0, err
	}
	n := int64(binary.BigEndian.Uint64(hdr[:]))
	t := hdr[FrameLenSize]
	if n < int64(len(hdr)) || n-FrameLenSize > c.MaxResponse {
		return 0, fmt.Errorf("%w: chunk frame length %d", ErrMalformed, n)
	}
	if _, err := io.ReadFull(c.r, hdr[FrameLenSize+1:]); err != nil {
		return 0, err
	}
	sid := int64(binary.BigEndian.Uint64(hdr[FrameLenSize+1:]))
	idx := int32(binary.BigEndian.Uint32(hdr[FrameLenSize+9:]))
	rest := n - int64(len(hdr))
	switch {
	case t == TypeChunkFetchFailure:
		b := make([]byte, rest)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return 0, err
		}
		d := decoder{msg: "ChunkFetchFailure", p: b}
		msg := d.str("error", len(b))
		if err := d.finish(); err != nil {
			return 0, err
		}
		return 0, &RemoteError{Msg: msg}
	case t != TypeChunkFetchSuccess:
		return 0, fmt.Errorf("%w: answer to a chunk fetch: frame type %d", ErrMalformed, t)
	case sid != streamID || idx != index:
		return 0, fmt.Errorf("%w: chunk %d/%d answered as %d/%d", ErrMalformed, streamID, index, sid, idx)
	}
	return io.CopyN(w, c.r, rest)
}
