//go:build cuda

package loadgen

import (
	"context"
	"os"
	"testing"
)

// TestRunGPU: --gpu against a cuda daemon in a child process (this test
// binary's serve command) partitions every pool batch on the device,
// hands it over by IPC handle, and verifies the committed outputs and the
// GPU's partitioning row for row against the host's; the daemon
// compresses the batches on the GPU, its default.
func TestRunGPU(t *testing.T) {
	t.Setenv(daemonEnv, "1")
	t.Setenv("TMPDIR", t.TempDir())
	cfg, err := ParseArgs(append(small, "--gpu", "--daemon-bin", os.Args[0], "--verify", "--batches-per-task", "2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("Run --gpu: %v", err)
	}
	if rep.DataPlane != PlaneCUDAIPC || rep.GPUDevice == "" || rep.GPUPartitionRowsPerS <= 0 || !rep.GPUCompress {
		t.Errorf("report data plane %q, device %q, GPU rows/s %v, gpu_compress %v; want cuda-ipc, a device, a rate, true",
			rep.DataPlane, rep.GPUDevice, rep.GPUPartitionRowsPerS, rep.GPUCompress)
	}
	if !rep.Verified || rep.VerifiedMapOutputs != 6 || rep.GPUPartitionCheckedRows != 3*2000 {
		t.Errorf("report verified %v (%d map outputs), %d rows checked against the host partitioner; want 6 outputs and 6000 rows",
			rep.Verified, rep.VerifiedMapOutputs, rep.GPUPartitionCheckedRows)
	}
}

// TestRunGPUCPUCompress: with --cpu-compress the --daemon-bin child
// (--no-cuda-compress) compresses the device batches on its CPU pool, not
// the GPU, and every output verifies.
func TestRunGPUCPUCompress(t *testing.T) {
	t.Setenv(daemonEnv, "1")
	t.Setenv("TMPDIR", t.TempDir())
	cfg, err := ParseArgs(append(small, "--gpu", "--cpu-compress", "--daemon-bin", os.Args[0], "--verify", "--batches-per-task", "2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("Run --gpu --cpu-compress: %v", err)
	}
	if rep.GPUCompress || !rep.Verified || rep.VerifiedMapOutputs != 6 {
		t.Errorf("report gpu_compress %v, verified %v (%d map outputs); want false, 6 outputs", rep.GPUCompress, rep.Verified, rep.VerifiedMapOutputs)
	}
}
