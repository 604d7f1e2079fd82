//go:build cuda

package gpu

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol/columnar"
)

// childEnv makes the test binary an exporter: it uploads pattern(n) to
// the device, prints the allocation's IPC handle in hex and holds the
// allocation until its stdin closes. CUDA refuses to open a handle in the
// process that exported it, so IPC needs two processes.
const childEnv = "SHUFFLED_GPU_TEST_EXPORT"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(exportChild(v))
	}
	os.Exit(m.Run())
}

func exportChild(size string) int {
	var n int
	fmt.Sscan(size, &n)
	d, err := Open(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer d.Close()
	b, err := d.Upload(pattern(n))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Free()
	h, err := b.IPCHandle()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(hex.EncodeToString(h[:]))
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// pattern is n bytes that differ from any shift of themselves.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8 + i>>16)
	}
	return b
}

var (
	devOnce sync.Once
	dev     *Device
	devErr  error
)

func device(tb testing.TB) *Device {
	tb.Helper()
	devOnce.Do(func() { dev, devErr = Open(0) })
	if devErr != nil {
		tb.Fatalf("Open(0): %v", devErr)
	}
	return dev
}

// uploadPair uploads payload and allocates a buffer of its size beside
// it, both freed when the test ends: a partitioner's source and
// destination.
func uploadPair(tb testing.TB, d *Device, payload []byte) (src, dst *Buffer) {
	tb.Helper()
	src, err := d.Upload(payload)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { src.Free() })
	dst, err = d.Alloc(src.Size())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dst.Free() })
	return src, dst
}

func TestOpen(t *testing.T) {
	d := device(t)
	if d.Name() == "" {
		t.Errorf("Name() is empty")
	}
	if _, err := Open(-1); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open(-1) = %v, want ErrInvalid", err)
	}
	if _, err := d.Alloc(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Alloc(0) = %v, want ErrInvalid", err)
	}
}

// TestDeviceConnections: the driver is given 32 hardware queues a device
// unless the environment the program started with names a count, which
// is kept (checked in a copy of this test run with 12).
func TestDeviceConnections(t *testing.T) {
	want := os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS")
	if want == "" {
		want = "32"
	}
	if got := DeviceConnections(); got != want {
		t.Fatalf("CUDA_DEVICE_MAX_CONNECTIONS is %q for the driver, want %q", got, want)
	}
	if os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS") != "" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestDeviceConnections$", "-test.v")
	cmd.Env = append(os.Environ(), "CUDA_DEVICE_MAX_CONNECTIONS=12")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestDeviceConnections")) {
		t.Fatalf("with CUDA_DEVICE_MAX_CONNECTIONS=12: %v\n%s", err, out)
	}
}

func TestBufferRoundTrip(t *testing.T) {
	d := device(t)
	want := pattern(1<<20 + 13)
	b, err := d.Upload(want)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	got := make([]byte, len(want)-100)
	if err := b.CopyTo(got, 100); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[100:]) {
		t.Errorf("CopyTo after Upload differs")
	}
	if err := b.CopyTo(got, 200); !errors.Is(err, ErrInvalid) {
		t.Errorf("CopyTo past the end = %v, want ErrInvalid", err)
	}
	pin, err := d.AllocPinned(len(want))
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Free()
	c, err := d.CopyAsync(unsafe.Pointer(&pin.Bytes()[0]), b.Ptr(), b.Size())
	if err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if !bytes.Equal(pin.Bytes(), want) {
		t.Errorf("CopyAsync into pinned memory differs")
	}
}

// counter is an Admitter that records the most bytes it held at once.
type counter struct {
	mu        sync.Mutex
	held, max int64
	acquires  int
}

func (c *counter) Acquire(ctx context.Context, n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held += n
	c.max = max(c.max, c.held)
	c.acquires++
	return nil
}

func (c *counter) TryAcquire(n int64) bool { return c.Acquire(context.Background(), n) == nil }

func (c *counter) Release(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held -= n
}

func TestPoolStream(t *testing.T) {
	d := device(t)
	const chunk = 64 << 10
	for _, n := range []int{1, chunk - 1, chunk, 3*chunk + 5, 20 * chunk} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			want := pattern(n)
			b, err := d.Upload(want)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free()
			p, err := NewPool(d, WithChunkSize(chunk), WithMaxChunks(3))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if st := p.Stats(); st.Chunks != 0 {
				t.Errorf("a new unprimed pool holds %d chunks, want 0", st.Chunks)
			}
			var got []byte
			var adm counter
			err = p.Stream(context.Background(), b.Ptr(), int64(n), &adm, func(off int64, s *Staged) error {
				defer s.Release()
				if off != int64(len(got)) {
					return fmt.Errorf("chunk at %d, want %d", off, len(got))
				}
				got = append(got, s.Bytes()...)
				return nil
			})
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Stream of %d bytes differs", n)
			}
			if adm.held != 0 || adm.max > 3*chunk || adm.acquires != (n+chunk-1)/chunk {
				t.Errorf("admitted: held %d after, peak %d, %d acquires; want 0, <= %d, %d", adm.held, adm.max, adm.acquires, 3*chunk, (n+chunk-1)/chunk)
			}
			if st := p.Stats(); st.Chunks > 3 || st.FreeChunks != st.Chunks {
				t.Errorf("after Stream: %+v, want at most 3 chunks, all free", st)
			}

			all, err := p.CopyAll(context.Background(), b.Ptr(), int64(n), &adm)
			if err != nil {
				t.Fatalf("CopyAll: %v", err)
			}
			if !bytes.Equal(all.Bytes(), want) {
				t.Errorf("CopyAll of %d bytes differs", n)
			}
			all.Release()
			all.Release() // a second Release is a no-op
		})
	}
}

func TestPoolStreamError(t *testing.T) {
	d := device(t)
	const chunk = 16 << 10
	b, err := d.Upload(pattern(10 * chunk))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	p, err := NewPool(d, WithChunkSize(chunk), WithMaxChunks(2), WithPrime(2))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if st := p.Stats(); st.Chunks != 2 {
		t.Errorf("primed pool holds %d chunks, want 2", st.Chunks)
	}
	var adm counter
	boom := errors.New("boom")
	calls := 0
	err = p.Stream(context.Background(), b.Ptr(), b.Size(), &adm, func(off int64, s *Staged) error {
		s.Release()
		if calls++; calls == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("Stream = %v, want the error of use", err)
	}
	if st := p.Stats(); adm.held != 0 || st.FreeChunks != st.Chunks {
		t.Errorf("after a failed Stream: %d bytes admitted, %+v; want 0 and every chunk free", adm.held, st)
	}
	// With every chunk out, Get waits for one and honours its context.
	s1, _ := p.Get(context.Background(), 1)
	s2, _ := p.Get(context.Background(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := p.Get(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get with every chunk out = %v, want DeadlineExceeded", err)
	}
	s1.Release()
	s2.Release()
}

func TestIPC(t *testing.T) {
	d := device(t)
	const n = 3<<20 + 17
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("exporter: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the handle: %v", err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(line))
	if err != nil || len(raw) != IPCHandleSize {
		t.Fatalf("handle %q: %v", line, err)
	}
	var h IPCHandle
	copy(h[:], raw)
	start := time.Now()
	peer, err := d.OpenIPC(h)
	if err != nil {
		t.Fatalf("OpenIPC: %v", err)
	}
	t.Logf("OpenIPC took %v", time.Since(start))
	defer peer.Close()
	if peer.Size() < n {
		t.Errorf("peer size %d, want >= %d", peer.Size(), n)
	}
	p, err := NewPool(d, WithChunkSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := p.CopyAll(context.Background(), peer.Ptr(), n, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if !bytes.Equal(s.Bytes(), pattern(n)) {
		t.Errorf("bytes read through the IPC mapping differ from the exporter's")
	}
}

// gpuLayout lays b out as protocol/columnar does and converts the layout.
func gpuLayout(b *partition.Batch) ([]byte, Layout) {
	payload, wl := columnar.Append(nil, b)
	l := Layout{Rows: b.Rows, Columns: make([]Column, len(wl.Columns))}
	for i, c := range wl.Columns {
		l.Columns[i] = Column{
			Type:     partition.Type(c.Type),
			Validity: Range(c.Validity),
			Offsets:  Range(c.Offsets),
			Data:     Range(c.Data),
		}
	}
	// Whole words for the validity kernel past the last buffer.
	return append(payload, make([]byte, 64)...), l
}

// hostBatch reads a batch laid out by l out of payload.
func hostBatch(payload []byte, l Layout, like *partition.Batch, offsets []int64) *partition.Batch {
	b := &partition.Batch{Rows: l.Rows, Columns: make([]partition.Column, len(l.Columns))}
	get := func(r Range) []byte {
		if r.Length == 0 {
			return nil
		}
		return payload[r.Offset : r.Offset+r.Length]
	}
	for i, c := range l.Columns {
		pc := &b.Columns[i]
		lc := &like.Columns[i]
		pc.Name, pc.Type, pc.Precision, pc.Scale = lc.Name, c.Type, lc.Precision, lc.Scale
		pc.Validity, pc.Data = get(c.Validity), get(c.Data)
		if raw := get(c.Offsets); raw != nil {
			pc.Offsets = make([]int32, len(raw)/4)
			for j := range pc.Offsets {
				pc.Offsets[j] = int32(binary.LittleEndian.Uint32(raw[4*j:]))
			}
		}
	}
	for _, o := range offsets {
		b.PartitionOffsets = append(b.PartitionOffsets, int32(o))
	}
	return b
}

// partitioner loads the kernels: from $SHUFFLED_PARTITION_PTX when set (a
// freshly generated PTX), else those built in.
func partitioner(tb testing.TB, d *Device) *Partitioner {
	tb.Helper()
	var p *Partitioner
	var err error
	if path := os.Getenv("SHUFFLED_PARTITION_PTX"); path != "" {
		ptx, rerr := os.ReadFile(path)
		if rerr != nil {
			tb.Fatal(rerr)
		}
		p, err = d.LoadPartitioner(ptx)
	} else {
		p, err = d.NewPartitioner()
	}
	if err != nil {
		tb.Fatalf("loading the partition kernels: %v", err)
	}
	return p
}

// TestPartitionMatchesHost partitions batches on the GPU and on the host
// and compares them byte for byte: same partition of every row, same row
// order within partitions, same validity, offsets and data.
func TestPartitionMatchesHost(t *testing.T) {
	d := device(t)
	p := partitioner(t, d)
	defer p.Close()
	for _, tc := range []struct {
		schema string
		rows   int
		keys   []int
		parts  int
		nulls  float64
	}{
		{"lineitem", 100_000, []int{0}, 200, 0},
		{"lineitem", 54_321, []int{0, 2}, 7, 0.1},
		{"strings", 30_000, []int{1}, 64, 0.05},
		{"wide", 5_000, []int{3, 5, 6, 7, 11}, 1000, 0.2},
		{"ints", 1, []int{0}, 3, 0},
		{"ints", 0, []int{0}, 3, 0},
		{"ints", 200_000, nil, 16, 0},
		// Decimal128 (13) and decimal32 (12) keys: Spark's hashes of
		// DecimalType(38,10) and (9,2); every type scattered.
		{"types", 40_000, []int{13}, 97, 0},
		{"types", 30_000, []int{0, 12, 13, 9}, 200, 0.15},
	} {
		name := fmt.Sprintf("%s/rows=%d/keys=%v/partitions=%d/nulls=%v", tc.schema, tc.rows, tc.keys, tc.parts, tc.nulls)
		t.Run(name, func(t *testing.T) {
			var opts []synth.Option
			if tc.nulls > 0 {
				opts = append(opts, synth.WithNulls(tc.nulls))
			}
			b, err := synth.Generate(tc.schema, 7, tc.rows, opts...)
			if err != nil {
				t.Fatal(err)
			}
			want, err := partition.Partition(b, tc.keys, tc.parts)
			if err != nil {
				t.Fatal(err)
			}
			payload, l := gpuLayout(b)
			src, dst := uploadPair(t, d, payload)
			offsets, err := p.Partition(dst, src, l, tc.keys, tc.parts)
			if err != nil {
				t.Fatalf("Partition: %v", err)
			}
			out := make([]byte, dst.Size())
			if err := dst.CopyTo(out, 0); err != nil {
				t.Fatal(err)
			}
			got := hostBatch(out, l, b, offsets)
			if err := got.Validate(); err != nil {
				t.Fatalf("the GPU's batch is invalid: %v", err)
			}
			for q := range tc.parts + 1 {
				if got.PartitionOffsets[q] != want.PartitionOffsets[q] {
					t.Fatalf("partition offset %d = %d, want %d", q, got.PartitionOffsets[q], want.PartitionOffsets[q])
				}
			}
			for c := range b.Columns {
				g, w := &got.Columns[c], &want.Columns[c]
				for r := range tc.rows {
					if g.IsNull(r) != w.IsNull(r) {
						t.Fatalf("column %d (%s) row %d: null %v, want %v", c, w.Name, r, g.IsNull(r), w.IsNull(r))
					}
				}
				if w.Type.VarWidth() && tc.rows > 0 && !slices.Equal(g.Offsets[:tc.rows+1], w.Offsets) {
					t.Fatalf("column %d (%s): offsets differ", c, w.Name)
				}
				if n := len(w.Data); !bytes.Equal(g.Data[:n], w.Data) {
					t.Fatalf("column %d (%s): data differs", c, w.Name)
				}
			}
		})
	}
}

// The partitioner moves flat columns only: a layout with nested columns
// is refused before any kernel runs.
func TestPartitionRefusesNested(t *testing.T) {
	d := device(t)
	p := partitioner(t, d)
	defer p.Close()
	tb := newNestedTestBatch(t, 500, 1, 0.2, 1)
	src, dst := uploadPair(t, d, tb.region)
	if _, err := p.Partition(dst, src, tb.l, []int{0}, 4); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Partition of nested columns = %v, want ErrInvalid", err)
	}
}
