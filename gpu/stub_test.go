//go:build !cuda

package gpu

import (
	"context"
	"errors"
	"testing"
)

// TestStub: a build without the cuda tag reaches no device and says so.
func TestStub(t *testing.T) {
	if Supported {
		t.Fatal("Supported = true without the cuda tag")
	}
	if d, err := Open(0); d != nil || !errors.Is(err, ErrNotSupported) {
		t.Errorf("Open(0) = %v, %v; want nil, ErrNotSupported", d, err)
	}
	if p, err := NewPool(nil); p != nil || !errors.Is(err, ErrNotSupported) {
		t.Errorf("NewPool = %v, %v; want nil, ErrNotSupported", p, err)
	}
	var p *Pool
	if err := p.Stream(context.Background(), 0, 1, nil, nil); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Stream = %v, want ErrNotSupported", err)
	}
}
