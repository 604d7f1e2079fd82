package errdefs

import (
	"errors"
	"fmt"
	"testing"
)

var classes = []struct {
	name  string
	class error
	is    func(error) bool
}{
	{"InvalidArgument", ErrInvalidArgument, IsInvalidArgument},
	{"Unsupported", ErrUnsupported, IsUnsupported},
	{"NotFound", ErrNotFound, IsNotFound},
	{"PermissionDenied", ErrPermissionDenied, IsPermissionDenied},
	{"ResourceExhausted", ErrResourceExhausted, IsResourceExhausted},
	{"FailedPrecondition", ErrFailedPrecondition, IsFailedPrecondition},
	{"Aborted", ErrAborted, IsAborted},
	{"Unavailable", ErrUnavailable, IsUnavailable},
	{"DataLoss", ErrDataLoss, IsDataLoss},
	{"Internal", ErrInternal, IsInternal},
}

func TestNew(t *testing.T) {
	for _, c := range classes {
		s := New(c.class, "pkg: something wrong")
		if got := s.Error(); got != "pkg: something wrong" {
			t.Errorf("New(%s, msg).Error() = %q, want %q", c.name, got, "pkg: something wrong")
		}
		if s == New(c.class, "pkg: something wrong") || errors.Is(s, New(c.class, "pkg: something wrong")) {
			t.Errorf("New(%s, msg) twice: the sentinels match, want two distinct ones", c.name)
		}
		wrapped := fmt.Errorf("map output 3/4: %w", s)
		for _, o := range classes {
			want := o.class == c.class
			if got := errors.Is(wrapped, o.class); got != want {
				t.Errorf("errors.Is(wrapped New(%s, msg), Err%s) = %v, want %v", c.name, o.name, got, want)
			}
			if got := o.is(wrapped); got != want {
				t.Errorf("Is%s(wrapped New(%s, msg)) = %v, want %v", o.name, c.name, got, want)
			}
		}
		if !errors.Is(wrapped, s) {
			t.Errorf("errors.Is(wrapped New(%s, msg), itself) = false, want true", c.name)
		}
	}
}

func TestClassesDistinct(t *testing.T) {
	texts := map[string]string{}
	for _, c := range classes {
		if prev, ok := texts[c.class.Error()]; ok {
			t.Errorf("Err%s and Err%s both read %q", c.name, prev, c.class.Error())
		}
		texts[c.class.Error()] = c.name
		if c.is(errors.New(c.class.Error())) {
			t.Errorf("Is%s(errors.New(%q)) = true: a class matches by identity, not text", c.name, c.class.Error())
		}
	}
}
