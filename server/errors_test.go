package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/limiter"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
)

// codeOfCases pins the wire code of every error class the daemon knows,
// in the order codeOf tests them.
var codeOfCases = []struct {
	name string
	err  error
	want protocol.Code
}{
	{"errUnavailable", errUnavailable, protocol.CodeUnavailable},
	{"errdefs.ErrUnavailable", errdefs.ErrUnavailable, protocol.CodeUnavailable},
	{"errdefs.ErrAborted", errdefs.ErrAborted, protocol.CodeAborted},
	{"writer.ErrAborted", writer.ErrAborted, protocol.CodeAborted},
	{"errRemoving", errRemoving, protocol.CodeAborted},
	{"context.Canceled", context.Canceled, protocol.CodeAborted},
	{"errdefs.ErrPermissionDenied", errdefs.ErrPermissionDenied, protocol.CodePermissionDenied},
	{"vfs.ErrRefused", vfs.ErrRefused, protocol.CodePermissionDenied},
	{"fs.ErrPermission", fs.ErrPermission, protocol.CodePermissionDenied},
	{"syscall.EACCES", syscall.EACCES, protocol.CodePermissionDenied},
	{"errdefs.ErrNotFound", errdefs.ErrNotFound, protocol.CodeNotFound},
	{"errdefs.ErrFailedPrecondition", errdefs.ErrFailedPrecondition, protocol.CodeFailedPrecondition},
	{"shufflefile.ErrInvalidCommit", shufflefile.ErrInvalidCommit, protocol.CodeFailedPrecondition},
	{"ErrRootLocked", ErrRootLocked, protocol.CodeFailedPrecondition},
	{"codec.ErrClosed", codec.ErrClosed, protocol.CodeFailedPrecondition},
	{"errdefs.ErrResourceExhausted", errdefs.ErrResourceExhausted, protocol.CodeResourceExhausted},
	{"writer.ErrTooManyRuns", writer.ErrTooManyRuns, protocol.CodeResourceExhausted},
	{"disks.ErrDiskFull", disks.ErrDiskFull, protocol.CodeResourceExhausted},
	{"disks.ErrDiskFailed", disks.ErrDiskFailed, protocol.CodeResourceExhausted},
	{"syscall.ENOSPC", syscall.ENOSPC, protocol.CodeResourceExhausted},
	{"syscall.EDQUOT", syscall.EDQUOT, protocol.CodeResourceExhausted},
	{"errdefs.ErrUnsupported", errdefs.ErrUnsupported, protocol.CodeUnsupported},
	{"protocol.ErrUnsupported", protocol.ErrUnsupported, protocol.CodeUnsupported},
	{"gpu.ErrNotCovered", gpu.ErrNotCovered, protocol.CodeUnsupported},
	{"partition.ErrBlockVersion", partition.ErrBlockVersion, protocol.CodeUnsupported},
	{"errdefs.ErrInvalidArgument", errdefs.ErrInvalidArgument, protocol.CodeInvalidArgument},
	{"protocol.ErrMalformed", protocol.ErrMalformed, protocol.CodeInvalidArgument},
	{"writer.ErrInvalid", writer.ErrInvalid, protocol.CodeInvalidArgument},
	{"partition.ErrInvalidBatch", partition.ErrInvalidBatch, protocol.CodeInvalidArgument},
	{"partition.ErrInvalidArgument", partition.ErrInvalidArgument, protocol.CodeInvalidArgument},
	{"shufflefile.ErrInvalidID", shufflefile.ErrInvalidID, protocol.CodeInvalidArgument},
	{"ErrInvalidConfig", ErrInvalidConfig, protocol.CodeInvalidArgument},

	// Classes DataLoss and Internal, their sentinels, and errors of no
	// class: Internal, unless a caller wraps them in another class.
	{"errdefs.ErrDataLoss", errdefs.ErrDataLoss, protocol.CodeInternal},
	{"errdefs.ErrInternal", errdefs.ErrInternal, protocol.CodeInternal},
	{"writer.ErrClosed", writer.ErrClosed, protocol.CodeInternal},
	{"writer.ErrCommitted", writer.ErrCommitted, protocol.CodeInternal},
	{"disks.ErrInvalidConfig", disks.ErrInvalidConfig, protocol.CodeInternal},
	{"disks.ErrInvalidArgument", disks.ErrInvalidArgument, protocol.CodeInternal},
	{"disks.ErrReleased", disks.ErrReleased, protocol.CodeInternal},
	{"shufflefile.ErrInvalidLayout", shufflefile.ErrInvalidLayout, protocol.CodeInternal},
	{"shufflefile.ErrCorrupt", shufflefile.ErrCorrupt, protocol.CodeInternal},
	{"shufflefile.ErrChecksumMismatch", shufflefile.ErrChecksumMismatch, protocol.CodeInternal},
	{"protocol.ErrBadFrame", protocol.ErrBadFrame, protocol.CodeInternal},
	{"protocol.ErrFrameTooLarge", protocol.ErrFrameTooLarge, protocol.CodeInternal},
	{"partition.ErrUnsupportedType", partition.ErrUnsupportedType, protocol.CodeInternal},
	{"partition.ErrCorruptBlock", partition.ErrCorruptBlock, protocol.CodeInternal},
	{"gpu.ErrInvalid", gpu.ErrInvalid, protocol.CodeInternal},
	{"gpu.ErrNotSupported", gpu.ErrNotSupported, protocol.CodeInternal},
	{"codec.ErrUnknown", codec.ErrUnknown, protocol.CodeInternal},
	{"codec.ErrCorrupt", codec.ErrCorrupt, protocol.CodeInternal},
	{"codec.ErrInvalidOption", codec.ErrInvalidOption, protocol.CodeInternal},
	{"limiter.ErrInvalidSize", limiter.ErrInvalidSize, protocol.CodeInternal},
	{"gpu.ErrClosed", gpu.ErrClosed, protocol.CodeInternal},
	{"partition.ErrBlockTooLarge", partition.ErrBlockTooLarge, protocol.CodeInternal},
	{"partition.ErrCorruptKudo", partition.ErrCorruptKudo, protocol.CodeInternal},
	{"vfs.ErrShortCopy", vfs.ErrShortCopy, protocol.CodeInternal},
	{"context.DeadlineExceeded", context.DeadlineExceeded, protocol.CodeInternal},
	{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF, protocol.CodeInternal},
	{"errors.New", errors.New("not a class"), protocol.CodeInternal},
}

func TestCodeOf(t *testing.T) {
	if got := codeOf(nil); got != protocol.CodeOK {
		t.Errorf("codeOf(nil) = %v, want %v", got, protocol.CodeOK)
	}
	pe := protocol.Errorf(protocol.CodeAlreadyExists, "registered")
	if got := codeOf(fmt.Errorf("op: %w", pe)); got != protocol.CodeAlreadyExists {
		t.Errorf("codeOf(wrapped *protocol.Error) = %v, want %v", got, protocol.CodeAlreadyExists)
	}
	for _, c := range codeOfCases {
		if got := codeOf(c.err); got != c.want {
			t.Errorf("codeOf(%s) = %v, want %v", c.name, got, c.want)
		}
		if got := codeOf(fmt.Errorf("map output 3/4: %w", c.err)); got != c.want {
			t.Errorf("codeOf(wrapped %s) = %v, want %v", c.name, got, c.want)
		}
		// A *protocol.Error in the chain wins over any class.
		if got := codeOf(errors.Join(c.err, pe)); got != protocol.CodeAlreadyExists {
			t.Errorf("codeOf(%s joined with *protocol.Error) = %v, want %v", c.name, got, protocol.CodeAlreadyExists)
		}
	}
}

// TestCodeOfPrecedence pins which class wins when an error carries two:
// the one codeOf tests first.
func TestCodeOfPrecedence(t *testing.T) {
	for i, a := range codeOfCases {
		for _, b := range codeOfCases[i+1:] {
			if a.want == b.want {
				continue
			}
			if got := codeOf(errors.Join(b.err, a.err)); got != a.want {
				t.Errorf("codeOf(%s joined with %s) = %v, want %v", b.name, a.name, got, a.want)
			}
			if got := codeOf(fmt.Errorf("%w: %w", b.err, a.err)); got != a.want {
				t.Errorf("codeOf(%s wrapping %s) = %v, want %v", b.name, a.name, got, a.want)
			}
		}
	}
}

// TestSentinelsHaveClass: every sentinel of the project in codeOfCases
// belongs to an errdefs class, those answered Internal included.
func TestSentinelsHaveClass(t *testing.T) {
	classes := []error{
		errdefs.ErrInvalidArgument, errdefs.ErrUnsupported, errdefs.ErrNotFound,
		errdefs.ErrPermissionDenied, errdefs.ErrResourceExhausted, errdefs.ErrFailedPrecondition,
		errdefs.ErrAborted, errdefs.ErrUnavailable, errdefs.ErrDataLoss, errdefs.ErrInternal,
	}
	foreign := map[string]bool{
		"context.Canceled": true, "context.DeadlineExceeded": true, "fs.ErrPermission": true,
		"syscall.EACCES": true, "syscall.ENOSPC": true, "syscall.EDQUOT": true,
		"io.ErrUnexpectedEOF": true, "errors.New": true,
	}
	for _, c := range codeOfCases {
		if foreign[c.name] {
			continue
		}
		n := 0
		for _, class := range classes {
			if errors.Is(c.err, class) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s belongs to %d errdefs classes, want 1", c.name, n)
		}
	}
}

// TestCodeOfClass: a Go client's errors.Is(answer, class) holds for the
// class whose errors the daemon answers with the answer's code.
func TestCodeOfClass(t *testing.T) {
	for c := protocol.CodeOK; c <= protocol.CodeInternal; c++ {
		class := c.Class()
		if class == nil {
			continue
		}
		if got := codeOf(class); got != c {
			t.Errorf("codeOf(%v.Class()) = %v, want %v", c, got, c)
		}
	}
	if got := codeOf(errdefs.ErrDataLoss).Class(); got != errdefs.ErrInternal {
		t.Errorf("codeOf(errdefs.ErrDataLoss).Class() = %v, want %v", got, errdefs.ErrInternal)
	}
}
