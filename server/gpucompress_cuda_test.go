//go:build cuda

package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/gpu/lz4ref"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// TestCUDACompress: by default (no NoCUDACompress), device batches are
// compressed on the GPU: the committed partitions decode to exactly the host
// partitioner's blocks (columnar) and to the bytes sent (opaque), their
// on-disk bytes are the reference compressor's streams of the records,
// what crossed to the host is the streams, not the raw batch, and their
// checksums (Adler-32, the default) are the GPU's.
func TestCUDACompress(t *testing.T) {
	openDevice(t)
	d := startDaemon(t, func(c *Config) { c.LimitBytes = 64 << 20 })
	t0 := d.s.planes.Totals()
	raw0, streams0, summed0 := t0.CompressedRaw, t0.CompressedStreams, t0.SummedStreams

	const rows, parts = 30_000, 16
	runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "columnar", Schema: "lineitem", Seed: 5, Rows: rows, Partitions: parts, Outputs: 1, Shuffle: 1})
	b, err := synth.Generate("lineitem", 5, rows, synth.WithNulls(0.05))
	if err != nil {
		t.Fatal(err)
	}
	want, err := partition.Partition(b, []int{0}, parts)
	if err != nil {
		t.Fatal(err)
	}
	layout := shufflefile.Flat(filepath.Join(d.root, "gpu", "1"))
	id := shufflefile.ID{Shuffle: 1, Map: 0}
	got := readOutput(t, layout, id, codec.LZ4)
	mo, err := shufflefile.Open(vfs.Default, layout, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer mo.Close()
	var rawBytes int64
	for p := range parts {
		start, end := want.PartitionRows(p)
		var w []byte
		if start < end {
			w = partition.AppendBlock(nil, want, start, end)
		}
		if !bytes.Equal(got[p], w) {
			t.Fatalf("partition %d: %d bytes differ from the host partitioner's %d", p, len(got[p]), len(w))
		}
		onDisk, err := mo.ReadPartition(p)
		if err != nil {
			t.Fatal(err)
		}
		if ref := lz4ref.AppendStream(nil, w, codec.DefaultBlockSize); len(w) > 0 && !bytes.Equal(onDisk, ref) {
			t.Fatalf("partition %d: on-disk bytes (%d) are not the reference streams (%d)", p, len(onDisk), len(ref))
		}
		rawBytes += int64(len(w))
	}
	if r := d.s.planes.Totals().CompressedRaw - raw0; r != rawBytes {
		t.Errorf("the GPU compressed %d raw bytes, want %d", r, rawBytes)
	}
	if s := d.s.planes.Totals().CompressedStreams - streams0; s >= rawBytes || s == 0 {
		t.Errorf("%d stream bytes crossed for %d raw bytes", s, rawBytes)
	}

	// Opaque, partitions spanning records (1 MiB) and blocks.
	const n = 5<<20 + 777
	runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "opaque", Opaque: n, Partitions: 7, Outputs: 1, Shuffle: 2})
	got = readOutput(t, layout, shufflefile.ID{Shuffle: 2, Map: 0}, codec.LZ4)
	payload, offs := opaquePayload(n), opaqueOffsets(n, 7)
	for p := range 7 {
		if w := payload[offs[p]:offs[p+1]]; !bytes.Equal(got[p], w) {
			t.Fatalf("opaque partition %d: %d bytes differ from the %d sent", p, len(got[p]), len(w))
		}
	}
	if tot := d.s.planes.Totals(); tot.SummedStreams-summed0 != tot.CompressedStreams-streams0 {
		t.Errorf("the GPU summed %d of the %d stream bytes, want all (the outputs' checksums are Adler-32)", tot.SummedStreams-summed0, tot.CompressedStreams-streams0)
	}
	if st := d.s.Engine().Limiter().Stats(); st.InFlight != 0 {
		t.Errorf("%d bytes still held by the limiter", st.InFlight)
	}
	if keep := os.Getenv("SHUFFLED_LZ4_KEEP"); keep != "" {
		for _, f := range []string{"data", "index"} {
			src := shufflefile.Path(layout, fmt.Sprintf("shuffle_1_0_0.%s", f))
			if data, err := os.ReadFile(src); err == nil {
				os.WriteFile(filepath.Join(keep, "daemon-"+filepath.Base(src)), data, 0o644)
			}
		}
	}
}

// TestCUDACompressFormats: a device batch of every column type (decimal32
// and decimal128 included) to an SHFC and to a kudo map output, compressed
// on the GPU and, with NoCUDACompress, by the CPU pool: both commit the
// host serializer's blocks or tables, and on the GPU path the on-disk
// bytes are the reference compressor's streams of them and the GPU
// counted every raw byte (so the batch did not fall back to the CPU).
func TestCUDACompressFormats(t *testing.T) {
	openDevice(t)
	const rows, parts = 20_000, 16
	raw, err := synth.Generate("types", 5, rows, synth.WithNulls(0.05))
	if err != nil {
		t.Fatal(err)
	}
	want, err := partition.Partition(raw, []int{0}, parts)
	if err != nil {
		t.Fatal(err)
	}
	checkCompressFormats(t, job{Schema: "types", Seed: 5, Rows: rows, Partitions: parts, Shuffle: 4}, want)
}

// nestedCUDASchema has every shape of nested column (a list of structs, a
// map of lists, a struct of lists and void, lists three deep, binary at
// depth) and a void column, after the partitioning key.
const nestedCUDASchema = "k bigint, a array<struct<d:decimal(7,2),e:decimal(30,3),f:string>>, m map<string,array<binary>>, " +
	"s struct<b:boolean,l:array<int>,v:void,i:interval day to second>, x array<array<array<int>>>, " +
	"e array<string>, n void, y map<int,struct<p:array<smallint>,q:tinyint>>"

// TestCUDACompressNested: as TestCUDACompressFormats, for a device batch
// of nested and void columns (nulls at every level, empty lists, every
// child's slices starting mid-byte): the GPU's records are the host
// serializer's, byte for byte, in both formats, and the GPU compressed
// every one of them.
func TestCUDACompressNested(t *testing.T) {
	openDevice(t)
	const rows, parts = 20_000, 16
	want, err := nestedJobBatch(nestedCUDASchema, 7, rows, parts)
	if err != nil {
		t.Fatal(err)
	}
	checkCompressFormats(t, job{Nested: nestedCUDASchema, Seed: 7, Rows: rows, Partitions: parts, Shuffle: 5}, want)
}

// checkCompressFormats runs j (columnar, by CUDA IPC, one map output) to
// an SHFC and a kudo map output, on the GPU path and with NoCUDACompress,
// and checks each partition against want's serialization.
func checkCompressFormats(t *testing.T, j job, want *partition.Batch) {
	t.Helper()
	for _, format := range []string{"shfc", "kudo"} {
		f, err := partition.ParseFormat(format)
		if err != nil {
			t.Fatal(err)
		}
		for _, cpu := range []bool{false, true} {
			name := fmt.Sprintf("%s cpu %v", format, cpu)
			d := startDaemon(t, func(c *Config) { c.LimitBytes = 64 << 20; c.NoCUDACompress = cpu })
			raw0 := d.s.planes.Totals().CompressedRaw
			jf := format
			if f == partition.SHFC {
				jf = ""
			}
			j.Socket, j.Plane, j.Kind, j.Format, j.Outputs = d.socket, "cuda-ipc", "columnar", jf, 1
			runExecutor(t, j)
			layout := shufflefile.Flat(filepath.Join(d.root, "gpu", "1"))
			id := shufflefile.ID{Shuffle: j.Shuffle, Map: 0}
			got := readOutput(t, layout, id, codec.LZ4)
			mo, err := shufflefile.Open(vfs.Default, layout, id, 1)
			if err != nil {
				t.Fatal(err)
			}
			var rawBytes int64
			for p := range j.Partitions {
				start, end := want.PartitionRows(p)
				w := f.Append(nil, want, start, end)
				if !bytes.Equal(got[p], w) {
					t.Fatalf("%s: partition %d: %d bytes differ from the host serializer's %d", name, p, len(got[p]), len(w))
				}
				onDisk, err := mo.ReadPartition(p)
				if err != nil {
					t.Fatal(err)
				}
				if ref := lz4ref.AppendStream(nil, w, codec.DefaultBlockSize); !cpu && len(w) > 0 && !bytes.Equal(onDisk, ref) {
					t.Fatalf("%s: partition %d: on-disk bytes (%d) are not the reference streams (%d)", name, p, len(onDisk), len(ref))
				}
				rawBytes += int64(len(w))
			}
			mo.Close()
			gpuRaw := d.s.planes.Totals().CompressedRaw - raw0
			if !cpu && gpuRaw != rawBytes {
				t.Errorf("%s: the GPU compressed %d raw bytes, want %d", name, gpuRaw, rawBytes)
			}
			if cpu && gpuRaw != 0 {
				t.Errorf("%s: the GPU compressed %d raw bytes with NoCUDACompress", name, gpuRaw)
			}
		}
	}
}

// TestCUDACompressOtherChecksum: a map output whose checksums are not
// Adler-32 is compressed on the GPU and checksummed by the CPU workers:
// its checksum file verifies and the GPU summed none of its streams.
func TestCUDACompressOtherChecksum(t *testing.T) {
	openDevice(t)
	d := startDaemon(t, func(c *Config) { c.LimitBytes = 64 << 20; c.DefaultChecksum = "CRC32C" })
	t0 := d.s.planes.Totals()
	const n = 3<<20 + 5
	runExecutor(t, job{Socket: d.socket, Plane: "cuda-ipc", Kind: "opaque", Opaque: n, Partitions: 5, Outputs: 1, Shuffle: 7})
	t1 := d.s.planes.Totals()
	if t1.CompressedStreams == t0.CompressedStreams || t1.SummedStreams != t0.SummedStreams {
		t.Errorf("the GPU compressed %d stream bytes and summed %d, want some and none", t1.CompressedStreams-t0.CompressedStreams, t1.SummedStreams-t0.SummedStreams)
	}
	layout := shufflefile.Flat(filepath.Join(d.root, "gpu", "1"))
	mo, err := shufflefile.Open(vfs.Default, layout, shufflefile.ID{Shuffle: 7, Map: 0}, checksum.CRC32C)
	if err != nil {
		t.Fatal(err)
	}
	defer mo.Close()
	if err := mo.Verify(); err != nil {
		t.Fatal(err)
	}
	payload, offs := opaquePayload(n), opaqueOffsets(n, 5)
	for p := range 5 {
		raw, err := mo.ReadPartition(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := codec.Decode(codec.LZ4, nil, raw)
		if err != nil || !bytes.Equal(got, payload[offs[p]:offs[p+1]]) {
			t.Fatalf("partition %d: %v, or %d bytes differ from the %d sent", p, err, len(got), offs[p+1]-offs[p])
		}
	}
}
