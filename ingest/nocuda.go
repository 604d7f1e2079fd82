//go:build !cuda

package ingest

import (
	"fmt"
	"log/slog"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/protocol"
	"golang.org/x/sys/unix"
)

// deviceFeatures are the ServerHello features of the GPU data plane: none
// in a build without the cuda tag.
const deviceFeatures protocol.Features = 0

// devicePlanes and deviceConn hold nothing in a build without the GPU
// data plane.
type (
	devicePlanes struct{}
	deviceConn   struct{}
)

// deviceBatch answers a batch in device memory: this build has no GPU
// data plane. It closes fd, which a CUDA IPC batch should not carry.
func (c *Conn) deviceBatch(_ *slog.Logger, _ *Output, m *protocol.Batch, fd int) (int64, error) {
	if fd >= 0 {
		unix.Close(fd)
	}
	return 0, fmt.Errorf("%w: data plane %v is not supported by this build (a daemon built with -tags cuda serves it)", errdefs.ErrUnsupported, m.Plane)
}

func (c *Conn) closeDevices() {}

// Prime: this build has no GPU data plane, so Config.CUDAStagingPrime has
// nothing to prime; it says so, as it does of Config.NoCUDACompress.
func (p *Planes) Prime() error {
	if p.cfg.CUDAStagingPrime {
		p.cfg.Log.Warn("--cuda-staging-prime has no effect: this build has no GPU data plane (a daemon built with -tags cuda has)")
	}
	if p.cfg.NoCUDACompress {
		p.cfg.Log.Warn("--no-cuda-compress has no effect: this build has no GPU data plane (a daemon built with -tags cuda has)")
	}
	return nil
}

// Close lets go of the devices: this build opens none.
func (p *Planes) Close() error { return nil }
