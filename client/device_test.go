package client

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/shuffled/shuffled/protocol"
)

func TestWriteDevice(t *testing.T) {
	checkGoroutines(t)
	var ipc protocol.CUDAIPC
	for i := range ipc.Handle {
		ipc.Handle[i] = byte(i)
	}
	ipc.Device = 1
	region := protocol.Region{Offset: 128, Length: 10}
	layout := protocol.ColumnarLayout{Rows: 2, PartitionRows: []int64{0, 1, 2}, Columns: []protocol.Column{{
		Type: protocol.TypeInt32, Data: protocol.Buffer{Offset: 0, Length: 8},
	}}}

	for _, offer := range []bool{false, true} {
		s := newFakeServer(t)
		var batches atomic.Int32
		var got atomic.Pointer[protocol.Batch]
		s.hook = func(_ protocol.Frame, m protocol.Message) protocol.Message {
			if b, ok := m.(*protocol.Batch); ok {
				batches.Add(1)
				got.Store(b)
				return &protocol.BatchAccepted{}
			}
			return nil
		}
		if offer {
			s.hello = func(*protocol.Hello) protocol.Message {
				return &protocol.ServerHello{Version: 1, MaxFrame: 1 << 20, MaxInline: 1 << 19,
					Features: protocol.FeatureColumnar | protocol.FeatureCUDAIPC, Server: "fake gpu"}
			}
		}
		c := dial(t, s)
		register(t, c)
		op, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 2, Kind: protocol.KindOpaque})
		if err != nil {
			t.Fatal(err)
		}
		col, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 2, NumPartitions: 2, Kind: protocol.KindColumnar})
		if err != nil {
			t.Fatal(err)
		}
		errOp := op.WriteOpaqueDevice(ctx, ipc, region, []int64{0, 4, 10})
		errCol := col.WriteColumnarDevice(ctx, ipc, region, layout)
		if !offer {
			if !errors.Is(errOp, ErrUnsupported) || !errors.Is(errCol, ErrUnsupported) {
				t.Errorf("device writes to a daemon without cuda-ipc = %v, %v; want ErrUnsupported", errOp, errCol)
			}
			if n := batches.Load(); n != 0 {
				t.Errorf("%d batches sent to a daemon without cuda-ipc, want 0", n)
			}
			continue
		}
		if errOp != nil || errCol != nil {
			t.Fatalf("device writes = %v, %v", errOp, errCol)
		}
		b := got.Load()
		if b.Plane != protocol.PlaneCUDAIPC || b.IPC != ipc || b.Region != region || b.Columnar.Rows != 2 {
			t.Errorf("last batch sent = plane %v ipc %v region %+v rows %d; want cuda-ipc with the handle, region and layout given",
				b.Plane, b.IPC == ipc, b.Region, b.Columnar.Rows)
		}
		if err := op.WriteOpaqueDevice(ctx, ipc, region, []int64{0, 4, 11}); err == nil {
			t.Errorf("offsets past the region: nil error")
		}
	}
}
