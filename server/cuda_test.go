//go:build cuda

package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/ingest"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
)

// executorEnv makes the test binary a GPU executor (CUDA IPC needs two
// processes): it runs the job in the variable's JSON against a daemon and
// prints one JSON result line.
const executorEnv = "SHUFFLED_SERVER_TEST_EXECUTOR"

func TestMain(m *testing.M) {
	if v := os.Getenv(executorEnv); v != "" {
		var j job
		if err := json.Unmarshal([]byte(v), &j); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		res, err := j.run()
		if err != nil {
			fmt.Fprintln(os.Stderr, "executor:", err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(res)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// job is what the executor process does: Outputs map outputs of one
// batch each, the batch generated from (Schema, Seed, Rows) and
// hash-partitioned on the GPU, or, for Kind opaque, OpaqueBytes of
// pattern split into Partitions uneven partitions.
type job struct {
	Socket     string
	Plane      string // "cuda-ipc" or "memfd"
	Kind       string // "columnar" or "opaque"
	Schema     string
	Seed       int64
	Rows       int
	Partitions int
	Opaque     int
	Outputs    int
	Shuffle    int32
	PTX        string
	// Conns executors (connections, default 1) take the map outputs in
	// turn, all naming the same device allocation.
	Conns int
	// Format "kudo" opens kudo map outputs (with the batch's schema).
	Format string
	// Nested, when set, is a Spark schema (partition.ParseSchema) whose
	// columns (synth.Column, nulls at every level) make the batch instead
	// of Schema; the batch is partitioned on the host by its column 0, as
	// the GPU partitioner moves flat columns only.
	Nested string
}

// nestedJobBatch returns the batch of a job's Nested schema, partitioned.
func nestedJobBatch(schema string, seed int64, rows, parts int) (*partition.Batch, error) {
	fields, err := partition.ParseSchema(schema)
	if err != nil {
		return nil, err
	}
	b := &partition.Batch{Rows: rows}
	for i, f := range fields {
		b.Columns = append(b.Columns, synth.Column(f, seed+int64(i), rows, 0.2))
	}
	return partition.Partition(b, []int{0}, parts)
}

type jobResult struct {
	Bytes         int64   // payload bytes per batch
	LoopSeconds   float64 // writing and committing every map output
	PlainD2HGBps  float64 // one cuMemcpyDtoH of the payload into pinned memory
	PartitionRows []int64
}

func opaqueOffsets(n, parts int) []int64 {
	offs := make([]int64, parts+1)
	for p := 1; p < parts; p++ {
		offs[p] = int64(n) * int64(p*p) / int64(parts*parts) // uneven, some spanning chunks
	}
	offs[parts] = int64(n)
	return offs
}

func opaquePayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>9)
	}
	return b
}

func toGPULayout(wl protocol.ColumnarLayout) gpu.Layout {
	l := gpu.Layout{Rows: int(wl.Rows), Columns: make([]gpu.Column, len(wl.Columns))}
	for i, c := range wl.Columns {
		l.Columns[i] = gpu.Column{Type: partition.Type(c.Type), Validity: gpu.Range(c.Validity), Offsets: gpu.Range(c.Offsets), Data: gpu.Range(c.Data), Children: int(c.Children)}
	}
	return l
}

func (j *job) run() (*jobResult, error) {
	ctx := context.Background()
	res := &jobResult{}
	var payload []byte
	var layout protocol.ColumnarLayout
	var schema []protocol.SchemaField
	if j.Kind == "opaque" {
		payload = opaquePayload(j.Opaque)
	} else {
		var b *partition.Batch
		var err error
		if j.Nested != "" {
			b, err = nestedJobBatch(j.Nested, j.Seed, j.Rows, j.Partitions)
		} else {
			b, err = synth.Generate(j.Schema, j.Seed, j.Rows, synth.WithNulls(0.05))
		}
		if err != nil {
			return nil, err
		}
		if j.Plane == "memfd" && j.Nested == "" {
			if b, err = partition.Partition(b, []int{0}, j.Partitions); err != nil {
				return nil, err
			}
		}
		payload, layout = columnar.Append(nil, b)
		payload = append(payload, make([]byte, 64)...) // whole words past the last buffer
		schema = columnar.SparkSchema(b)
	}
	res.Bytes = int64(len(payload))

	var ipc protocol.CUDAIPC
	var mfd *client.Memfd
	if j.Plane == "cuda-ipc" {
		d, err := gpu.Open(0)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		src, err := d.Upload(payload)
		if err != nil {
			return nil, err
		}
		defer src.Free()
		buf := src
		if j.Kind == "columnar" && j.Nested == "" {
			var p *gpu.Partitioner
			if j.PTX != "" {
				ptx, err := os.ReadFile(j.PTX)
				if err != nil {
					return nil, err
				}
				p, err = d.LoadPartitioner(ptx)
			} else {
				p, err = d.NewPartitioner()
			}
			if err != nil {
				return nil, err
			}
			defer p.Close()
			if buf, err = d.Alloc(src.Size()); err != nil {
				return nil, err
			}
			defer buf.Free()
			offs, err := p.Partition(buf, src, toGPULayout(layout), []int{0}, j.Partitions)
			if err != nil {
				return nil, err
			}
			layout.PartitionRows = offs
		}
		if ipc.Handle, err = buf.IPCHandle(); err != nil {
			return nil, err
		}
		pin, err := d.AllocPinned(len(payload))
		if err != nil {
			return nil, err
		}
		defer pin.Free()
		start := time.Now()
		if err := d.CopyToHost(unsafe.Pointer(&pin.Bytes()[0]), buf.Ptr(), int64(len(payload))); err != nil {
			return nil, err
		}
		res.PlainD2HGBps = float64(len(payload)) / time.Since(start).Seconds() / 1e9
	} else {
		var err error
		if mfd, err = client.NewMemfd(len(payload)); err != nil {
			return nil, err
		}
		defer mfd.Close()
		copy(mfd.Bytes(), payload)
	}
	res.PartitionRows = layout.PartitionRows

	conns := make([]*client.Client, max(j.Conns, 1))
	for i := range conns {
		c, err := client.Dial(ctx, j.Socket)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "gpu", ExecutorID: fmt.Sprint(i + 1)}); err != nil {
			return nil, err
		}
		conns[i] = c
	}
	kind := protocol.KindColumnar
	if j.Kind == "opaque" {
		kind = protocol.KindOpaque
	}
	region := protocol.Region{Length: int64(len(payload))}
	offs := opaqueOffsets(len(payload), j.Partitions)
	start := time.Now()
	for m := range j.Outputs {
		c := conns[m%len(conns)]
		req := protocol.OpenMapOutput{ShuffleID: j.Shuffle, MapID: int64(m), NumPartitions: int32(j.Partitions), Kind: kind}
		if j.Format == "kudo" {
			req.Format, req.Schema = protocol.FormatKudo, schema
		}
		mo, err := c.Open(ctx, req)
		if err != nil {
			return nil, err
		}
		switch {
		case j.Plane == "cuda-ipc" && kind == protocol.KindOpaque:
			err = mo.WriteOpaqueDevice(ctx, ipc, region, offs)
		case j.Plane == "cuda-ipc":
			err = mo.WriteColumnarDevice(ctx, ipc, region, layout)
		case kind == protocol.KindOpaque:
			err = mo.WriteOpaqueMemfd(ctx, mfd, offs)
		default:
			err = mo.WriteColumnarMemfd(ctx, mfd, layout)
		}
		if err != nil {
			return nil, fmt.Errorf("map output %d: %w", m, err)
		}
		if _, err := mo.Commit(ctx); err != nil {
			return nil, fmt.Errorf("map output %d: %w", m, err)
		}
	}
	res.LoopSeconds = time.Since(start).Seconds()
	return res, nil
}

// runExecutor runs j in a child process and returns its result.
func runExecutor(tb testing.TB, j job) *jobResult {
	tb.Helper()
	j.PTX = os.Getenv("SHUFFLED_PARTITION_PTX")
	raw, _ := json.Marshal(j)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), executorEnv+"="+string(raw))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("executor %+v: %v\n%s", j, err, stderr.String())
	}
	var res jobResult
	line, _ := bufio.NewReader(bytes.NewReader(out)).ReadString('\n')
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		tb.Fatalf("executor output %q: %v", out, err)
	}
	return &res
}

// TestCUDAIPCRoundTrip: a GPU executor partitions a batch on the device
// and hands it over by CUDA IPC; the committed output holds, partition by
// partition, exactly the blocks of the host partitioner's batch. An
// opaque payload larger than a staging chunk, with partitions that span
// chunks, lands byte for byte. The batches are staged and compressed on
// the host (NoCUDACompress; TestCUDACompress covers the GPU's).
func TestCUDAIPCRoundTrip(t *testing.T) {
	openDevice(t)
	leakcheck.Check(t) // the daemon's device goroutine ends at its Shutdown
	d := startDaemon(t, func(c *Config) { c.LimitBytes = 64 << 20; c.NoCUDACompress = true })
	layout := shufflefile.Flat(filepath.Join(d.root, "gpu", "1"))

	const rows, parts = 20_000, 16
	// Two connections name the same allocation: the daemon maps it once.
	j := job{Socket: d.socket, Plane: "cuda-ipc", Kind: "columnar", Schema: "lineitem", Seed: 3, Rows: rows, Partitions: parts, Outputs: 2, Shuffle: 1, Conns: 2}
	runExecutor(t, j)
	raw, err := synth.Generate("lineitem", 3, rows, synth.WithNulls(0.05))
	if err != nil {
		t.Fatal(err)
	}
	want, err := partition.Partition(raw, []int{0}, parts)
	if err != nil {
		t.Fatal(err)
	}
	for m := range 2 {
		executor := shufflefile.Flat(filepath.Join(d.root, "gpu", fmt.Sprint(m+1)))
		got := readOutput(t, executor, shufflefile.ID{Shuffle: 1, Map: int64(m)}, codec.LZ4)
		for p := range parts {
			start, end := want.PartitionRows(p)
			var w []byte
			if start < end {
				w = partition.AppendBlock(nil, want, start, end)
			}
			if !bytes.Equal(got[p], w) {
				t.Fatalf("map %d partition %d: %d bytes differ from the host partitioner's %d", m, p, len(got[p]), len(w))
			}
		}
	}

	const n = 3*gpu.DefaultChunkSize + 12345
	runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "opaque", Opaque: n, Partitions: 7, Outputs: 1, Shuffle: 2})
	got := readOutput(t, layout, shufflefile.ID{Shuffle: 2, Map: 0}, codec.LZ4)
	payload, offs := opaquePayload(n), opaqueOffsets(n, 7)
	for p := range 7 {
		if w := payload[offs[p]:offs[p+1]]; !bytes.Equal(got[p], w) {
			t.Fatalf("opaque partition %d: %d bytes differ from the %d sent", p, len(got[p]), len(w))
		}
	}
	if st := d.s.Engine().Limiter().Stats(); st.Peak > 64<<20+gpu.DefaultChunkSize {
		t.Errorf("peak bytes in flight %d above the limit", st.Peak)
	}
}

// openDevice checks that device 0 opens, before a test's daemon opens
// it for itself.
func openDevice(t *testing.T) {
	dev, err := gpu.Open(0)
	if err != nil {
		t.Fatalf("device 0: %v", err)
	}
	dev.Close()
}

// TestStagingPrime: with CUDAStagingPrime, New opens device 0 and pins
// every chunk of its staging pool before it returns, and gives them back.
// (A device not primed would open now, with no chunk pinned.)
func TestStagingPrime(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.CUDAStagingPrime = true })
	pool, err := d.s.planes.Pool(0)
	if err != nil {
		t.Fatalf("device 0: %v", err)
	}
	if st := pool.Stats(); st.Chunks != ingest.StagingChunks || st.FreeChunks != ingest.StagingChunks {
		t.Errorf("staging pool after priming: %d chunks, %d free, want %d and %d", st.Chunks, st.FreeChunks, ingest.StagingChunks, ingest.StagingChunks)
	}
}

// TestCUDAIPCBadHandle: a handle that names nothing is InvalidArgument
// and aborts its map output only.
func TestCUDAIPCBadHandle(t *testing.T) {
	openDevice(t)
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	c := dial(t, d, "app")
	if c.ServerHello().Features&protocol.FeatureCUDAIPC == 0 {
		t.Fatalf("a cuda build does not offer cuda-ipc: features %#x", c.ServerHello().Features)
	}
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 1, Kind: protocol.KindOpaque})
	if err != nil {
		t.Fatal(err)
	}
	var ipc protocol.CUDAIPC
	binary.LittleEndian.PutUint64(ipc.Handle[:], 0xdeadbeef)
	err = mo.WriteOpaqueDevice(ctx, ipc, protocol.Region{Length: 8}, []int64{0, 8})
	if protocol.CodeOf(err) != protocol.CodeInvalidArgument || !strings.Contains(err.Error(), "IPC") {
		t.Errorf("batch with a bogus IPC handle = %v, want InvalidArgument about the handle", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("Ping after the bad batch: %v", err)
	}
}

// BenchmarkDataPlane runs the same workload (map outputs of one
// GPU-partitioned lineitem batch, lz4) through the CUDA IPC data plane and
// through sealed memfds, from an executor process. loop-MB/s is the
// executor's write+commit rate; d2h-GB/s the daemon's device-to-host copy
// rate (the staging pool's CopyTime: waits for buffers, admission and
// hand-off excluded); batch-GB/s its rate over whole batches, those
// included; plain-GB/s one cuMemcpyDtoH of the same bytes into pinned
// memory in the executor, in the same run.
func BenchmarkDataPlane(b *testing.B) {
	for _, kind := range []string{"columnar", "opaque"} {
		for _, plane := range []string{"cuda-ipc", "memfd"} {
			// workers=spare leaves one core to the copy path: the host
			// function that says a copy landed, and the goroutines it
			// wakes, need a free P, which compression on every core
			// takes for up to a preemption slice.
			for _, spare := range []int{0, 1} {
				name := "kind=" + kind + "/plane=" + plane + "/workers=all"
				if spare > 0 {
					name = "kind=" + kind + "/plane=" + plane + "/workers=spare1"
				}
				b.Run(name, func(b *testing.B) {
					d := benchDaemon(b, max(1, runtime.GOMAXPROCS(0)-spare))
					pool, err := d.s.planes.Pool(0)
					if err != nil {
						b.Fatal(err)
					}
					st0 := pool.Stats()
					t0 := d.s.planes.Totals()
					res := runExecutor(b, job{Socket: d.socket, Plane: plane, Kind: kind, Schema: "lineitem", Seed: 1,
						Rows: 1 << 20, Opaque: 128 << 20, Partitions: 200, Outputs: b.N, Shuffle: 1})
					b.ReportMetric(float64(res.Bytes)*float64(b.N)/res.LoopSeconds/1e6, "loop-MB/s")
					if plane == "cuda-ipc" {
						st, t1 := pool.Stats(), d.s.planes.Totals()
						b.ReportMetric(float64(st.CopiedBytes-st0.CopiedBytes)/float64(st.CopyTime-st0.CopyTime), "d2h-GB/s")
						b.ReportMetric(float64(t1.D2HBytes-t0.D2HBytes)/float64(t1.D2HNanos-t0.D2HNanos), "batch-GB/s")
						b.ReportMetric(res.PlainD2HGBps, "plain-GB/s")
					}
				})
			}
		}
	}
}

// benchDaemon is startDaemon for benchmarks: a 1 GiB limit, workers
// compression goroutines.
func benchDaemon(b *testing.B, workers int) *daemon {
	dir := b.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 1 << 30, PoolSize: workers}
	s, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := unixsock.Listen(cfg.SocketPath, 0o660)
	if err != nil {
		b.Fatal(err)
	}
	d := &daemon{s: s, socket: cfg.SocketPath, root: cfg.Root, done: make(chan error, 1)}
	go func() { d.done <- s.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.Shutdown(ctx)
		<-d.done
	})
	return d
}
