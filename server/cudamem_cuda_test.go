//go:build cuda

package server

import (
	"os"
	"testing"
	"time"

	"github.com/shuffled/shuffled/internal/procmem"
)

// TestCUDAMemoryBound checks the CUDA IPC plane's share of the memory
// bound (docs/operations.md, "Memory"): with --limit 64MiB, device
// batches of several times the limit (an opaque one of 4 times it, staged
// through the fixed pinned chunks; a columnar one of about twice it, GPU
// compressed, its streams held by their records) leave the daemon's
// resident memory within its figure after a small warm-up batch (device
// open, staging pinned, kernels loaded, the compressor's buffers made)
// plus 3 × the limit (records,
// encoded bytes, what Go's collector lets the heap grow) and 64 MiB. The
// executors run in their own processes; this process is the daemon.
func TestCUDAMemoryBound(t *testing.T) {
	openDevice(t)
	const limit = 64 << 20
	// The staging chunks are pinned up front (CUDAStagingPrime): they are
	// the plane's constant, in the figure taken after the warm-up.
	d := startDaemon(t, func(c *Config) { c.LimitBytes = limit; c.CUDAStagingPrime = true })
	runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "columnar", Schema: "lineitem", Seed: 1, Rows: 20_000, Partitions: 64, Outputs: 1, Shuffle: 1})
	runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "opaque", Opaque: 8 << 20, Partitions: 64, Outputs: 1, Shuffle: 2})
	idle, err := procmem.Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	base := idle.RSS
	s := procmem.Sample(os.Getpid(), 5*time.Millisecond)
	runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "opaque", Opaque: 4 * limit, Partitions: 64, Outputs: 2, Shuffle: 3})
	r := runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "columnar", Schema: "lineitem", Seed: 2, Rows: 1_000_000, Partitions: 200, Outputs: 2, Shuffle: 4})
	m, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	peak := m.RSS
	t.Logf("daemon VmRSS after the warm-up %d MiB, peak while batches of %d MiB (opaque) and %d MiB (columnar) went through %d MiB (--limit 64MiB)",
		base>>20, (4*limit)>>20, r.Bytes>>20, peak>>20)
	if r.Bytes <= limit {
		t.Fatalf("the columnar batch is %d bytes, not past the limit", r.Bytes)
	}
	if want := base + 3*limit + 64<<20; peak > want {
		t.Errorf("peak VmRSS %d MiB, want at most %d MiB (after the warm-up %d MiB + 3 × the 64 MiB limit + 64 MiB)", peak>>20, want>>20, base>>20)
	}
}
