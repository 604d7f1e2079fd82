package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/internal/errclass"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
)

// Error classes of the server itself, mapped to wire codes by codeOf; the
// ones the data planes share are errclass's.
var (
	errPermission   = errors.New("permission denied")
	errNotFound     = errors.New("not found")
	errPrecondition = errclass.Precondition
	errUnavailable  = errors.New("daemon is draining")
	errExhausted    = errclass.Exhausted
	errUnsupported  = errclass.Unsupported
	errInvalid      = errclass.Invalid
	// errRemoving: a map output opened while a removal of its shuffle or
	// application runs; it is aborted at once (code Aborted).
	errRemoving = fmt.Errorf("removal in progress: %w", writer.ErrAborted)
)

// codeOf maps an error onto the stable wire code, once, at the boundary.
func codeOf(err error) protocol.Code {
	var pe *protocol.Error
	switch {
	case err == nil:
		return protocol.CodeOK
	case errors.As(err, &pe):
		return pe.Code
	case errors.Is(err, errUnavailable):
		return protocol.CodeUnavailable
	case errors.Is(err, writer.ErrAborted), errors.Is(err, context.Canceled):
		return protocol.CodeAborted
	case errors.Is(err, errPermission), errors.Is(err, vfs.ErrRefused), errors.Is(err, fs.ErrPermission):
		return protocol.CodePermissionDenied
	case errors.Is(err, errNotFound):
		return protocol.CodeNotFound
	case errors.Is(err, errPrecondition), errors.Is(err, shufflefile.ErrInvalidCommit):
		return protocol.CodeFailedPrecondition
	case errors.Is(err, errExhausted), errors.Is(err, writer.ErrTooManyRuns), errors.Is(err, disks.ErrDiskFull), errors.Is(err, disks.ErrDiskFailed),
		errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return protocol.CodeResourceExhausted
	case errors.Is(err, errUnsupported), errors.Is(err, protocol.ErrUnsupported):
		return protocol.CodeUnsupported
	case errors.Is(err, errInvalid), errors.Is(err, protocol.ErrMalformed),
		errors.Is(err, writer.ErrInvalid), errors.Is(err, partition.ErrInvalidBatch),
		errors.Is(err, partition.ErrInvalidArgument), errors.Is(err, shufflefile.ErrInvalidID):
		return protocol.CodeInvalidArgument
	}
	return protocol.CodeInternal
}
