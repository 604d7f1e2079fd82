package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/writer"
)

// Errors of the server itself. The rest of its errors wrap an errdefs
// class directly (fmt.Errorf("%w: ...", errdefs.ErrInvalidArgument, ...)).
var (
	// errUnavailable: the daemon is draining (class Unavailable).
	errUnavailable = errdefs.New(errdefs.ErrUnavailable, "daemon is draining")
	// errRemoving: a map output opened while a removal of its shuffle or
	// application runs; it is aborted at once (class Aborted).
	errRemoving = fmt.Errorf("removal in progress: %w", writer.ErrAborted)
)

// codeOf maps an error onto the stable wire code, once, at the boundary:
// a *protocol.Error keeps its code, an error of an errdefs class gets the
// class's code (the first in this order, should it carry two), and the few
// errors from outside the project that have a class of their own join it.
// DataLoss and Internal come last, so that a caller's class wins over the
// class of a lower layer's sentinel it wraps. Anything else is Internal.
func codeOf(err error) protocol.Code {
	var pe *protocol.Error
	switch {
	case err == nil:
		return protocol.CodeOK
	case errors.As(err, &pe):
		return pe.Code
	case errors.Is(err, errdefs.ErrUnavailable):
		return protocol.CodeUnavailable
	case errors.Is(err, errdefs.ErrAborted), errors.Is(err, context.Canceled):
		return protocol.CodeAborted
	case errors.Is(err, errdefs.ErrPermissionDenied), errors.Is(err, fs.ErrPermission):
		return protocol.CodePermissionDenied
	case errors.Is(err, errdefs.ErrNotFound):
		return protocol.CodeNotFound
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		return protocol.CodeFailedPrecondition
	case errors.Is(err, errdefs.ErrResourceExhausted), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return protocol.CodeResourceExhausted
	case errors.Is(err, errdefs.ErrUnsupported):
		return protocol.CodeUnsupported
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return protocol.CodeInvalidArgument
	}
	// errdefs.ErrDataLoss, errdefs.ErrInternal and anything unclassed.
	return protocol.CodeInternal
}
