// Package protocol is the wire format between executors and the shuffled
// daemon: length-prefixed little-endian frames over a Unix stream socket,
// the messages they carry, the stable error codes, and the passing of
// memfd descriptors with SCM_RIGHTS. docs/protocol.md is the reference a
// client in another language implements; this package is its Go form.
//
// A frame is a 16-byte header (magic "SH", type, flags, request id,
// payload length) and a payload of at most the reader's limit. Every
// request gets exactly one response with the same request id: the
// request's response type (Type.Response) or TypeError.
//
// The package holds no policy and does no I/O beyond framing. Its main
// invariant: whatever bytes arrive, decoding never panics, never
// allocates more than the frame limit allows, and never leaks a received
// file descriptor; a message that decodes has passed the same Validate
// that its sender ran, and errors name the message, field and value.
package protocol
