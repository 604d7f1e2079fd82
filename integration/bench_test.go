package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"github.com/shuffled/shuffled/server"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
)

// Data-plane workload: one map output of benchBatches lineitem batches of
// benchRows rows each, hash-partitioned into benchParts partitions,
// compressed with lz4 and checksummed with ADLER32 (Spark's defaults).
const (
	benchBatches = 4
	benchRows    = 32 << 10
	benchParts   = 200
	benchLimit   = 256 << 20
)

// benchBatch is one batch of the workload in every form a plane needs.
type benchBatch struct {
	b *partition.Batch
	// columnar
	payload []byte
	layout  protocol.ColumnarLayout
	sealed  *client.Memfd // the payload in a sealed memfd, sent as is
	// opaque
	data   []byte
	offs   []int64
	opaque *client.Memfd
}

func benchWorkload(b *testing.B) []benchBatch {
	b.Helper()
	var wl []benchBatch
	for i := range benchBatches {
		raw, err := synth.Generate("lineitem", int64(100+i), benchRows)
		if err != nil {
			b.Fatal(err)
		}
		pb, err := partition.Partition(raw, []int{0}, benchParts)
		if err != nil {
			b.Fatal(err)
		}
		bb := benchBatch{b: pb}
		bb.payload, bb.layout = columnar.Append(nil, pb)
		bb.data, bb.offs = opaquePayload(pb)
		if bb.sealed, err = sealedMemfd(bb.payload); err != nil {
			b.Fatal(err)
		}
		if bb.opaque, err = sealedMemfd(bb.data); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			bb.sealed.Close()
			bb.opaque.Close()
		})
		wl = append(wl, bb)
	}
	return wl
}

func sealedMemfd(data []byte) (*client.Memfd, error) {
	f, err := client.NewMemfd(len(data))
	if err != nil {
		return nil, err
	}
	copy(f.Bytes(), data)
	if err := f.Seal(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// BenchmarkDataPlane writes one workload (one map output per op) through
// the writer engine directly (plane=inprocess) and through the daemon's
// socket with each data plane, all in one run: the socket variants use an
// embedded server.Server (server.New, unixsock.Listen, Serve) in this
// process, configured like the engine, so the only difference is the
// socket, the protocol and the plane. SetBytes is the uncompressed payload
// of the map output, the same for every plane of a kind.
//
//   - inline: the payload is written into the socket (writev, no copy in
//     the client) and read out of it by the daemon.
//   - memfd: the producer filled a sealed memfd once; each op passes it
//     (SCM_RIGHTS) and the daemon maps it read-only: the zero-copy path.
//   - memfd-copy: the client copies a []byte into a fresh sealed memfd per
//     batch.
//
// x-inprocess is the op's throughput over the in-process one measured just
// before it in the same run. Targets: memfd ≥ 0.9, inline ≥ 0.75. cpu-ms/op
// is the CPU time of the whole process (client, daemon, compression) per
// op, and x-inprocess-cpu the in-process op's CPU time over this one's: on
// a machine shared with other work they compare the planes' costs more
// steadily than wall-clock throughput does.
func BenchmarkDataPlane(b *testing.B) {
	wl := benchWorkload(b)
	for _, kind := range []protocol.PayloadKind{protocol.KindColumnar, protocol.KindOpaque} {
		var size int64
		for _, bb := range wl {
			if kind == protocol.KindColumnar {
				size += int64(len(bb.payload))
			} else {
				size += int64(len(bb.data))
			}
		}
		var inprocess, inprocessCPU float64 // bytes/s and CPU ns/op of plane=inprocess in this run
		for _, plane := range []string{"inprocess", "inline", "memfd", "memfd-copy"} {
			b.Run(fmt.Sprintf("kind=%v/plane=%s", kind, plane), func(b *testing.B) {
				leakcheck.Check(b)
				var op func(ctx context.Context, id shufflefile.ID) error
				var layout shufflefile.Layout
				if plane == "inprocess" {
					op, layout = inProcessOp(b, wl, kind)
				} else {
					op, layout = socketOp(b, wl, kind, plane)
				}
				ctx := context.Background()
				b.SetBytes(size)
				b.ReportAllocs()
				cpu0 := cpuTime()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					id := shufflefile.ID{Shuffle: 1, Map: int64(i)}
					if err := op(ctx, id); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					// op returned after the commit: no commit of id can run.
					if err := shufflefile.Remove(vfs.Default, new(shufflefile.Locks), layout, id, checksum.Adler32); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				cpu := float64(cpuTime()-cpu0) / float64(b.N)
				b.ReportMetric(cpu/1e6, "cpu-ms/op")
				rate := float64(size) * float64(b.N) / b.Elapsed().Seconds()
				if plane == "inprocess" {
					inprocess, inprocessCPU = rate, cpu
				} else if inprocess > 0 {
					b.ReportMetric(rate/inprocess, "x-inprocess")
					b.ReportMetric(inprocessCPU/cpu, "x-inprocess-cpu")
				}
			})
		}
	}
}

// cpuTime returns the user and system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchConfig is the daemon's configuration of the benchmark; the
// in-process engine is built from it the way server.New builds its own.
func benchConfig(dir string) server.Config {
	cfg := server.Config{
		SocketPath: filepath.Join(dir, "shuffled.sock"),
		Root:       filepath.Join(dir, "root"),
		LimitBytes: benchLimit,
		PoolSize:   runtime.GOMAXPROCS(0),
	}
	cfg.EnsureDefaults()
	return cfg
}

func inProcessOp(b *testing.B, wl []benchBatch, kind protocol.PayloadKind) (func(context.Context, shufflefile.ID) error, shufflefile.Layout) {
	cfg := benchConfig(b.TempDir())
	eng, err := writer.New(
		writer.WithLimit(cfg.LimitBytes),
		writer.WithWorkers(cfg.PoolSize),
		writer.WithBlockSize(cfg.BlockSize),
		writer.WithSync(cfg.Sync),
		writer.WithFileMode(cfg.FileMode),
	)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := eng.Close(); err != nil {
			b.Error(err)
		}
	})
	layout := shufflefile.Flat(b.TempDir())
	return func(ctx context.Context, id shufflefile.ID) error {
		w, err := eng.Open(ctx, writer.Spec{ID: id, NumPartitions: benchParts, Codec: codec.LZ4, Checksum: checksum.Adler32, Layout: layout})
		if err != nil {
			return err
		}
		for _, bb := range wl {
			if kind == protocol.KindColumnar {
				err = w.WriteBatch(ctx, bb.b, nil)
			} else {
				err = w.WriteOpaque(ctx, bb.data, bb.offs, nil)
			}
			if err != nil {
				w.Abort()
				return err
			}
		}
		_, err = w.Commit(ctx)
		return err
	}, layout
}

func socketOp(b *testing.B, wl []benchBatch, kind protocol.PayloadKind, plane string) (func(context.Context, shufflefile.ID) error, shufflefile.Layout) {
	cfg := benchConfig(b.TempDir())
	s, err := server.New(cfg, server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := unixsock.Listen(cfg.SocketPath, cfg.SocketMode)
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	b.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			b.Error(err)
		}
		if err := <-served; err != nil {
			b.Error(err)
		}
	})
	ctx := context.Background()
	c, err := client.Dial(ctx, cfg.SocketPath)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	reg, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "bench", ExecutorID: "1"})
	if err != nil {
		b.Fatal(err)
	}
	dp := client.PlaneInline
	if plane != "inline" {
		dp = client.PlaneMemfd
	}
	return func(ctx context.Context, id shufflefile.ID) error {
		m, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: id.Shuffle, MapID: id.Map, NumPartitions: benchParts, Kind: kind, Codec: "lz4", Checksum: "ADLER32"}, client.WithPlane(dp))
		if err != nil {
			return err
		}
		for _, bb := range wl {
			switch {
			case kind == protocol.KindColumnar && plane == "memfd":
				err = m.WriteColumnarMemfd(ctx, bb.sealed, bb.layout)
			case kind == protocol.KindColumnar:
				err = m.WriteColumnar(ctx, bb.payload, bb.layout)
			case plane == "memfd":
				err = m.WriteOpaqueMemfd(ctx, bb.opaque, bb.offs)
			default:
				err = m.WriteOpaque(ctx, bb.data, bb.offs)
			}
			if err != nil {
				m.Abort(ctx)
				return err
			}
		}
		_, err = m.Commit(ctx)
		return err
	}, shufflefile.Flat(reg.Dirs[0])
}
