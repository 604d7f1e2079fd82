package protocol

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shuffled/shuffled/errdefs"
)

var allClasses = []error{
	errdefs.ErrInvalidArgument, errdefs.ErrUnsupported, errdefs.ErrNotFound,
	errdefs.ErrPermissionDenied, errdefs.ErrResourceExhausted, errdefs.ErrFailedPrecondition,
	errdefs.ErrAborted, errdefs.ErrUnavailable, errdefs.ErrDataLoss, errdefs.ErrInternal,
}

// TestErrorIsClass: an answer matches the errdefs class of its code and
// no other, so a Go client can ask errors.Is(err, errdefs.ErrNotFound).
func TestErrorIsClass(t *testing.T) {
	want := map[Code]error{
		CodeInvalidArgument:    errdefs.ErrInvalidArgument,
		CodeUnsupported:        errdefs.ErrUnsupported,
		CodeNotFound:           errdefs.ErrNotFound,
		CodePermissionDenied:   errdefs.ErrPermissionDenied,
		CodeResourceExhausted:  errdefs.ErrResourceExhausted,
		CodeFailedPrecondition: errdefs.ErrFailedPrecondition,
		CodeAborted:            errdefs.ErrAborted,
		CodeUnavailable:        errdefs.ErrUnavailable,
		CodeInternal:           errdefs.ErrInternal,
	}
	for c := CodeOK; c <= CodeInternal+1; c++ {
		if got := c.Class(); got != want[c] {
			t.Errorf("%v.Class() = %v, want %v", c, got, want[c])
		}
		err := fmt.Errorf("commit: %w", Errorf(c, "Commit.Handle 5"))
		for _, class := range allClasses {
			if got := errors.Is(err, class); got != (class == want[c]) {
				t.Errorf("errors.Is(%v answer, %v) = %v, want %v", c, class, got, !got)
			}
		}
		if !errors.Is(err, &Error{Code: c}) {
			t.Errorf("errors.Is(%v answer, &Error{Code: %v}) = false, want true", c, c)
		}
	}
}

// TestErrorIsNotSentinel: an answer matches a class, never a sentinel of
// that class, nor an *Error with a message.
func TestErrorIsNotSentinel(t *testing.T) {
	err := Errorf(CodeInvalidArgument, "Batch.Flags 0x4")
	if errors.Is(err, ErrMalformed) {
		t.Errorf("errors.Is(InvalidArgument answer, ErrMalformed) = true, want false")
	}
	if errors.Is(err, errdefs.New(errdefs.ErrInvalidArgument, "invalid argument")) {
		t.Errorf("errors.Is(InvalidArgument answer, a sentinel of the class) = true, want false")
	}
	if errors.Is(err, &Error{Code: CodeInvalidArgument, Message: "Batch.Flags 0x4"}) {
		t.Errorf("errors.Is(answer, *Error with a message) = true, want false")
	}
	if errors.Is(Errorf(CodeUnsupported, "codec 9"), ErrUnsupported) {
		t.Errorf("errors.Is(Unsupported answer, ErrUnsupported) = true, want false")
	}
}
