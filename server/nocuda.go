//go:build !cuda

package server

import (
	"fmt"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/protocol"
	"golang.org/x/sys/unix"
)

// deviceFeatures are the ServerHello features of the GPU data plane: none
// in a build without the cuda tag.
const deviceFeatures protocol.Features = 0

// deviceBatch answers a batch in device memory: this build has no GPU
// data plane. It closes fd, which a CUDA IPC batch should not carry.
func (sess *session) deviceBatch(o *output, m *protocol.Batch, fd int) error {
	if fd >= 0 {
		unix.Close(fd)
	}
	return fmt.Errorf("%w: data plane %v is not supported by this build (a daemon built with -tags cuda serves it)", errdefs.ErrUnsupported, m.Plane)
}

// primeDevices: this build has no GPU data plane, so
// Config.CUDAStagingPrime has nothing to prime; it says so.
func (s *Server) primeDevices() error {
	if s.cfg.CUDAStagingPrime {
		s.log.Warn("--cuda-staging-prime has no effect: this build has no GPU data plane (a daemon built with -tags cuda has)")
	}
	if s.cfg.NoCUDACompress {
		s.log.Warn("--no-cuda-compress has no effect: this build has no GPU data plane (a daemon built with -tags cuda has)")
	}
	return nil
}
