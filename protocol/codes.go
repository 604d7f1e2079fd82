package protocol

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/shuffled/shuffled/errdefs"
)

// Code is a stable error code carried by an Error response. Codes never
// change meaning; new ones are only added.
type Code uint32

const (
	// CodeOK is never sent; it is the code of a nil error.
	CodeOK Code = 0
	// CodeInvalidArgument: a field is out of bounds or inconsistent.
	CodeInvalidArgument Code = 1
	// CodeUnsupported: unknown message type, codec, checksum, column
	// type, or a data plane this build lacks (CUDA IPC in CPU builds).
	CodeUnsupported Code = 2
	// CodeNotFound: unknown map output handle (never opened, or taken by
	// Commit or Abort).
	CodeNotFound Code = 3
	// CodeAlreadyExists: the connection is already registered.
	CodeAlreadyExists Code = 4
	// CodePermissionDenied: peer uid/gid refused, local dir outside the
	// allowed roots, or another uid owns the target.
	CodePermissionDenied Code = 5
	// CodeResourceExhausted: disk full, too many open map outputs or runs,
	// partition state, an inline payload or a response over a limit.
	CodeResourceExhausted Code = 6
	// CodeFailedPrecondition: the request is valid but not now (a request
	// before Hello, Open before Register, a Batch after one marked LAST, a
	// Batch of the wrong kind or partition count).
	CodeFailedPrecondition Code = 7
	// CodeAborted: the map output was aborted (by an earlier error, a
	// removal, or the drain deadline); nothing was committed.
	CodeAborted Code = 8
	// CodeUnavailable: the daemon is draining or shutting down; retry
	// against a restarted daemon.
	CodeUnavailable Code = 9
	// CodeVersionMismatch: no protocol version in common.
	CodeVersionMismatch Code = 10
	// CodeInternal: a bug or an I/O failure the daemon did not expect.
	CodeInternal Code = 11
)

var codeNames = [...]string{
	CodeOK:                 "OK",
	CodeInvalidArgument:    "InvalidArgument",
	CodeUnsupported:        "Unsupported",
	CodeNotFound:           "NotFound",
	CodeAlreadyExists:      "AlreadyExists",
	CodePermissionDenied:   "PermissionDenied",
	CodeResourceExhausted:  "ResourceExhausted",
	CodeFailedPrecondition: "FailedPrecondition",
	CodeAborted:            "Aborted",
	CodeUnavailable:        "Unavailable",
	CodeVersionMismatch:    "VersionMismatch",
	CodeInternal:           "Internal",
}

// Codes returns every error code, OK left out, in the order of their values.
func Codes() []Code {
	codes := make([]Code, 0, len(codeNames)-1)
	for c := range codeNames {
		if Code(c) != CodeOK {
			codes = append(codes, Code(c))
		}
	}
	return codes
}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", uint32(c))
}

// MaxErrorMessage bounds Error.Message in bytes.
const MaxErrorMessage = maxU16

// Error is an error response: a stable code and a message that names the
// field and value at fault. It is the message of frame type TypeError and
// implements error; a client returns it as is, so errors.As finds it.
type Error struct {
	Code    Code
	Message string
}

// Errorf returns an *Error with a formatted message, cut to
// MaxErrorMessage bytes at a UTF-8 boundary.
func Errorf(code Code, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > MaxErrorMessage {
		i := MaxErrorMessage
		for i > 0 && !utf8.RuneStart(msg[i]) {
			i--
		}
		msg = msg[:i]
	}
	return &Error{Code: code, Message: msg}
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, &protocol.Error{Code: protocol.CodeNotFound}) matches
// any NotFound error, or the errdefs class of its code, so that
// errors.Is(err, errdefs.ErrNotFound) matches it too. A class's sentinels
// (writer.ErrInvalid) do not match: an answer says its code, not which
// sentinel the daemon's error wrapped.
func (e *Error) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return t.Code == e.Code && t.Message == ""
	}
	c := e.Code.Class()
	return c != nil && target == c
}

// Class returns the errdefs class whose errors the daemon answers with
// code c, or nil for a code of no class (OK, AlreadyExists,
// VersionMismatch, and codes this version does not know). The daemon
// answers errdefs.ErrDataLoss as CodeInternal too; its class is
// errdefs.ErrInternal.
func (c Code) Class() error {
	switch c {
	case CodeInvalidArgument:
		return errdefs.ErrInvalidArgument
	case CodeUnsupported:
		return errdefs.ErrUnsupported
	case CodeNotFound:
		return errdefs.ErrNotFound
	case CodePermissionDenied:
		return errdefs.ErrPermissionDenied
	case CodeResourceExhausted:
		return errdefs.ErrResourceExhausted
	case CodeFailedPrecondition:
		return errdefs.ErrFailedPrecondition
	case CodeAborted:
		return errdefs.ErrAborted
	case CodeUnavailable:
		return errdefs.ErrUnavailable
	case CodeInternal:
		return errdefs.ErrInternal
	}
	return nil
}

// CodeOf returns the code of the first *Error in err's chain, CodeOK for
// nil, and CodeInternal for any other error.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Type implements Message.
func (*Error) Type() Type { return TypeError }

// Validate implements Message.
func (e *Error) Validate() error {
	if e.Code == CodeOK {
		return invalid("Error", "Code", "%v is not an error", e.Code)
	}
	return checkMessage("Error", "Message", e.Message, MaxErrorMessage)
}

// Append implements Message.
//
//	u32 code | string message
func (e *Error) Append(dst []byte) []byte {
	dst = appendU32(dst, uint32(e.Code))
	return appendString(dst, e.Message)
}

// Unmarshal implements Message. Unknown codes are kept: a client treats
// them like CodeInternal but shows the number.
func (e *Error) Unmarshal(p []byte) error {
	d := decoder{msg: "Error", p: p}
	*e = Error{Code: Code(d.u32("Code")), Message: d.str("Message", MaxErrorMessage)}
	if err := d.finish(); err != nil {
		return err
	}
	return e.Validate()
}

// checkMessage is checkText without the UTF-8 requirement: a message may
// quote hostile bytes.
func checkMessage(msg, field, s string, max int) error {
	if len(s) > max {
		return invalid(msg, field, "length %d exceeds %d", len(s), max)
	}
	return nil
}
