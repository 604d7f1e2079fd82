// Package errdefs defines the classes of errors the daemon answers with: a
// small fixed set, one per wire error code a class of error maps to, but
// for data loss, which the daemon answers as it does an internal error.
// Packages do not return a class itself; their sentinel errors belong to
// one (New), and their errors wrap those sentinels, so that
//
//	errors.Is(err, writer.ErrInvalid)          // the sentinel, as before
//	errors.Is(err, errdefs.ErrInvalidArgument) // and its class
//
// both hold. The server maps classes onto wire codes once, at its boundary.
//
// Invariant: errdefs imports nothing of the project, so every package may
// import it.
package errdefs

import "errors"

// The classes. Their texts are what an error of the class says when it is
// wrapped as is: fmt.Errorf("%w: Batch.Flags %#x", ErrInvalidArgument, f)
// reads "invalid argument: Batch.Flags 0x4".
var (
	// ErrInvalidArgument: a field is out of bounds or inconsistent.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnsupported: a message, codec, type or data plane this build or
	// version does not have.
	ErrUnsupported = errors.New("unsupported")
	// ErrNotFound: what a request names does not exist (a map output
	// handle never opened, or already taken by Commit or Abort).
	ErrNotFound = errors.New("not found")
	// ErrPermissionDenied: the caller may not do this here (a peer refused,
	// a path outside the allowed roots or owned by someone else).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrResourceExhausted: a limit is reached (disk full or failing, too
	// many map outputs or runs, a bound on state or size).
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrFailedPrecondition: the request is valid, but not in this state.
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrAborted: the work was abandoned and nothing was committed.
	ErrAborted = errors.New("aborted")
	// ErrUnavailable: the daemon is draining or shutting down; a retry
	// against a restarted one may succeed.
	ErrUnavailable = errors.New("unavailable")
	// ErrDataLoss: bytes read back are not what was written (a corrupt
	// block or stream, a checksum that does not match).
	ErrDataLoss = errors.New("data loss")
	// ErrInternal: a bug or a state the daemon did not expect, such as a
	// lower layer refusing what the daemon itself passed it after checking
	// the request.
	ErrInternal = errors.New("internal")
)

// New returns a sentinel error of class class whose text is msg alone:
// errors.Is(New(c, msg), c) holds, and its Error() is msg.
func New(class error, msg string) error {
	return &classed{msg: msg, class: class}
}

// classed is a sentinel that belongs to a class.
type classed struct {
	msg   string
	class error
}

func (e *classed) Error() string { return e.msg }

// Unwrap returns the class, so that errors.Is finds it.
func (e *classed) Unwrap() error { return e.class }

// IsInvalidArgument reports whether err is of class ErrInvalidArgument.
func IsInvalidArgument(err error) bool { return errors.Is(err, ErrInvalidArgument) }

// IsUnsupported reports whether err is of class ErrUnsupported.
func IsUnsupported(err error) bool { return errors.Is(err, ErrUnsupported) }

// IsNotFound reports whether err is of class ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsPermissionDenied reports whether err is of class ErrPermissionDenied.
func IsPermissionDenied(err error) bool { return errors.Is(err, ErrPermissionDenied) }

// IsResourceExhausted reports whether err is of class ErrResourceExhausted.
func IsResourceExhausted(err error) bool { return errors.Is(err, ErrResourceExhausted) }

// IsFailedPrecondition reports whether err is of class ErrFailedPrecondition.
func IsFailedPrecondition(err error) bool { return errors.Is(err, ErrFailedPrecondition) }

// IsAborted reports whether err is of class ErrAborted.
func IsAborted(err error) bool { return errors.Is(err, ErrAborted) }

// IsUnavailable reports whether err is of class ErrUnavailable.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// IsDataLoss reports whether err is of class ErrDataLoss.
func IsDataLoss(err error) bool { return errors.Is(err, ErrDataLoss) }

// IsInternal reports whether err is of class ErrInternal.
func IsInternal(err error) bool { return errors.Is(err, ErrInternal) }
