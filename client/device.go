package client

import (
	"context"
	"fmt"

	"github.com/shuffled/shuffled/protocol"
)

// WriteOpaqueDevice is WriteOpaque with the payload in GPU memory: region
// of the device allocation that ipc names (exported with
// cuIpcGetMemHandle by this process). The daemon copies the bytes out; the
// call returns once it no longer reads the device memory, which the caller
// may then reuse or free. Daemons built without the GPU data plane do not
// offer it, and the call fails with ErrUnsupported before sending.
func (m *MapOutput) WriteOpaqueDevice(ctx context.Context, ipc protocol.CUDAIPC, region protocol.Region, partitionOffsets []int64) error {
	b := &protocol.Batch{Kind: protocol.KindOpaque, Opaque: protocol.OpaqueLayout{PartitionOffsets: partitionOffsets}}
	return m.writeDevice(ctx, b, ipc, region)
}

// WriteColumnarDevice is WriteColumnar with the payload in GPU memory, as
// WriteOpaqueDevice: layout locates the column buffers inside region.
func (m *MapOutput) WriteColumnarDevice(ctx context.Context, ipc protocol.CUDAIPC, region protocol.Region, layout protocol.ColumnarLayout) error {
	b := &protocol.Batch{Kind: protocol.KindColumnar, Columnar: layout}
	return m.writeDevice(ctx, b, ipc, region)
}

func (m *MapOutput) writeDevice(ctx context.Context, b *protocol.Batch, ipc protocol.CUDAIPC, region protocol.Region) error {
	if m.c.hello.Features&protocol.FeatureCUDAIPC == 0 {
		return fmt.Errorf("%w: the daemon (%s) does not offer the cuda-ipc data plane", ErrUnsupported, m.c.hello.Server)
	}
	b.Plane = protocol.PlaneCUDAIPC
	b.IPC = ipc
	b.Region = region
	if err := m.check(b); err != nil {
		return err
	}
	return m.send(ctx, b, -1)
}
