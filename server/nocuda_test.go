//go:build !cuda

package server

import (
	"bytes"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// TestCUDAIPCUnsupported: a daemon built without the cuda tag does not
// offer the GPU data plane, answers a CUDA IPC batch with Unsupported and
// a message that says why, and aborts that map output only.
func TestCUDAIPCUnsupported(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	conn, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := protocol.NewReader(conn, 1<<20)
	defer rd.Close()
	id := uint32(0)
	call := func(m protocol.Message) protocol.Message {
		t.Helper()
		id++
		if err := protocol.WriteFrame(conn, id, m); err != nil {
			t.Fatalf("writing %v: %v", m.Type(), err)
		}
		f, err := rd.ReadFrame(nil)
		if err != nil {
			t.Fatalf("reading the answer to %v: %v", m.Type(), err)
		}
		resp, err := protocol.DecodeFrame(&f)
		if err != nil {
			t.Fatalf("decoding the answer to %v: %v", m.Type(), err)
		}
		return resp
	}
	hello, ok := call(&protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "test"}).(*protocol.ServerHello)
	if !ok {
		t.Fatal("Hello not answered with ServerHello")
	}
	if hello.Features&protocol.FeatureCUDAIPC != 0 {
		t.Errorf("ServerHello features %#x offer cuda-ipc in a build without it", hello.Features)
	}
	if _, ok := call(&protocol.RegisterExecutor{AppID: "app", ExecutorID: "1"}).(*protocol.Registered); !ok {
		t.Fatal("RegisterExecutor refused")
	}
	opened := map[uint64]bool{}
	for mapID := int64(1); mapID <= 2; mapID++ {
		o, ok := call(&protocol.OpenMapOutput{ShuffleID: 1, MapID: mapID, NumPartitions: 2, Kind: protocol.KindOpaque}).(*protocol.Opened)
		if !ok {
			t.Fatal("OpenMapOutput refused")
		}
		opened[o.Handle] = true
	}
	batch := &protocol.Batch{Handle: 1, Kind: protocol.KindOpaque, Plane: protocol.PlaneCUDAIPC,
		Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, 10, 16}},
		Region: protocol.Region{Length: 16}}
	batch.IPC.Handle[0] = 1
	resp := call(batch)
	e, ok := resp.(*protocol.Error)
	if !ok || e.Code != protocol.CodeUnsupported || !strings.Contains(e.Message, "not supported by this build") {
		t.Errorf("CUDA IPC batch answered %v, want Unsupported saying the build lacks it", resp)
	}
	if resp := call(&protocol.Commit{Handle: 1}); protocol.CodeOf(asErr(resp)) != protocol.CodeAborted {
		t.Errorf("Commit after the refused batch answered %v, want Aborted", resp)
	}
	ok2 := &protocol.Batch{Handle: 2, Kind: protocol.KindOpaque, Plane: protocol.PlaneInline,
		Opaque: protocol.OpaqueLayout{PartitionOffsets: []int64{0, 2, 2}}, Inline: []byte("ok")}
	if _, ok := call(ok2).(*protocol.BatchAccepted); !ok {
		t.Errorf("an inline batch of another map output was refused")
	}
	if _, ok := call(&protocol.Commit{Handle: 2}).(*protocol.CommitResult); !ok {
		t.Errorf("the other map output did not commit")
	}
}

func asErr(m protocol.Message) error {
	if e, ok := m.(*protocol.Error); ok {
		return e
	}
	return nil
}

// TestStagingPrimeIgnored: a build without the GPU data plane accepts
// --cuda-staging-prime and --no-cuda-compress, starts, and logs that they
// have no effect.
func TestStagingPrimeIgnored(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), CUDAStagingPrime: true, NoCUDACompress: true}
	d := startDaemonWith(t, cfg, WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	d.stop(t)
	for _, flag := range []string{"--cuda-staging-prime", "--no-cuda-compress"} {
		if got := log.String(); !strings.Contains(got, flag+" has no effect") {
			t.Errorf("log of a daemon started with %s = %q, want a warning that it has no effect", flag, got)
		}
	}
}
