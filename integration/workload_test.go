package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// subDirs is the hashed sub-directory count clients with Spark local dirs
// register.
const subDirs = 8

var (
	codecs    = []codec.Kind{codec.None, codec.LZ4, codec.Zstd, codec.Snappy}
	checksums = []checksum.Algorithm{checksum.Adler32, checksum.CRC32, checksum.CRC32C, checksum.None}
)

// mapOutput is one map output a test writes: everything it sends, and so
// everything its committed files must hold.
type mapOutput struct {
	app    string
	layout shufflefile.Layout // where the daemon puts it, from Registered
	id     shufflefile.ID
	parts  int
	kind   protocol.PayloadKind
	codec  codec.Kind
	alg    checksum.Algorithm
	plane  client.DataPlane
	// direct has the producer write the payload into a memfd it then
	// seals (the zero-copy path) instead of handing the client a []byte.
	direct  bool
	batches []*partition.Batch // partitioned; opaque outputs send each partition's block as bytes
}

func (o *mapOutput) String() string {
	d := ""
	if o.direct {
		d = "-direct"
	}
	return fmt.Sprintf("%s map output %v (%v, %v, %v, %v%s, %d partitions, %d batches)",
		o.app, o.id, o.kind, o.codec, o.alg, o.plane, d, o.parts, len(o.batches))
}

// plan returns the i-th map output of a mix that cycles through every
// codec, checksum algorithm, payload kind and data plane (the memfd plane
// both copied from a []byte and filled by the producer), and through
// schemas, partition counts and batch counts. Several batches per output
// make several runs, which the commit merges.
func plan(i int, app string, layout shufflefile.Layout, id shufflefile.ID) *mapOutput {
	o := &mapOutput{
		app:    app,
		layout: layout,
		id:     id,
		parts:  []int{16, 1, 7, 64, 200}[i%5],
		codec:  codecs[i%len(codecs)],
		alg:    checksums[(i/2)%len(checksums)],
		kind:   []protocol.PayloadKind{protocol.KindOpaque, protocol.KindColumnar}[(i/4)%2],
	}
	switch (i / 8) % 3 {
	case 0:
		o.plane = client.PlaneInline
	case 1:
		o.plane = client.PlaneMemfd
	case 2:
		o.plane, o.direct = client.PlaneMemfd, true
	}
	nb := 1 + i%3
	for b := range nb {
		schema := synth.Schemas[(i+b)%len(synth.Schemas)]
		o.batches = append(o.batches, testBatch(schema, int64(i*7+b), 600+(i*131+b*57)%900, o.parts))
	}
	return o
}

var batchCache sync.Map // batchKey → *partition.Batch

type batchKey struct {
	schema     string
	seed       int64
	rows, part int
}

// testBatch returns a synthetic batch hash-partitioned on its key column,
// as an executor's GPU would hand it over. Batches are shared: nothing may
// change them.
func testBatch(schema string, seed int64, rows, parts int) *partition.Batch {
	k := batchKey{schema, seed, rows, parts}
	if b, ok := batchCache.Load(k); ok {
		return b.(*partition.Batch)
	}
	opts := []synth.Option{}
	if seed%2 == 1 {
		opts = append(opts, synth.WithNulls(0.1))
	}
	raw, err := synth.Generate(schema, seed, rows, opts...)
	if err != nil {
		panic(fmt.Sprintf("synth.Generate(%q, %d, %d): %v", schema, seed, rows, err))
	}
	b, err := partition.Partition(raw, []int{0}, parts)
	if err != nil {
		panic(fmt.Sprintf("partition.Partition(%s, %d): %v", schema, parts, err))
	}
	got, _ := batchCache.LoadOrStore(k, b)
	return got.(*partition.Batch)
}

// opaquePayload serializes each partition of b into bytes (as a client with
// its own row serializer would) and returns them back to back with the
// per-partition offsets. Empty partitions get no bytes.
func opaquePayload(b *partition.Batch) ([]byte, []int64) {
	n := b.NumPartitions()
	offs := make([]int64, n+1)
	var data []byte
	for p := range n {
		if start, end := b.PartitionRows(p); end > start {
			data = partition.AppendSlice(data, b, p)
		}
		offs[p+1] = int64(len(data))
	}
	return data, offs
}

// opaquePart returns partition p's bytes of an opaque payload of b.
func opaquePart(b *partition.Batch, p int) []byte {
	if start, end := b.PartitionRows(p); end > start {
		return partition.AppendSlice(nil, b, p)
	}
	return nil
}

// size returns the payload bytes the map output sends.
func (o *mapOutput) size() int64 {
	var n int64
	for _, b := range o.batches {
		if o.kind == protocol.KindColumnar {
			n += int64(columnar.Size(b))
		} else {
			data, _ := opaquePayload(b)
			n += int64(len(data))
		}
	}
	return n
}

// open opens the map output on c.
func (o *mapOutput) open(ctx context.Context, c *client.Client) (*client.MapOutput, error) {
	return c.Open(ctx, protocol.OpenMapOutput{
		ShuffleID:     o.id.Shuffle,
		MapID:         o.id.Map,
		NumPartitions: int32(o.parts),
		Kind:          o.kind,
		Codec:         o.codec.String(),
		Checksum:      o.alg.String(),
	}, client.WithPlane(o.plane))
}

// writeBatch sends batch b of the map output.
func (o *mapOutput) writeBatch(ctx context.Context, m *client.MapOutput, b *partition.Batch) error {
	switch o.kind {
	case protocol.KindOpaque:
		data, offs := opaquePayload(b)
		if !o.direct {
			return m.WriteOpaque(ctx, data, offs)
		}
		f, err := client.NewMemfd(len(data))
		if err != nil {
			return err
		}
		defer f.Close()
		copy(f.Bytes(), data)
		return m.WriteOpaqueMemfd(ctx, f, offs)
	case protocol.KindColumnar:
		if !o.direct {
			payload, layout := columnar.Append(nil, b)
			return m.WriteColumnar(ctx, payload, layout)
		}
		f, err := client.NewMemfd(columnar.Size(b))
		if err != nil {
			return err
		}
		defer f.Close()
		payload, layout := columnar.Append(f.Bytes()[:0], b)
		if len(payload) != f.Size() || len(payload) > 0 && unsafe.SliceData(payload) != unsafe.SliceData(f.Bytes()) {
			return fmt.Errorf("columnar.Append wrote %d bytes outside the memfd of %d (columnar.Size disagrees)", len(payload), f.Size())
		}
		return m.WriteColumnarMemfd(ctx, f, layout)
	}
	return fmt.Errorf("unknown payload kind %v", o.kind)
}

// write sends the whole map output and commits it.
func (o *mapOutput) write(ctx context.Context, c *client.Client) (protocol.CommitResult, error) {
	m, err := o.open(ctx, c)
	if err != nil {
		return protocol.CommitResult{}, err
	}
	for i, b := range o.batches {
		if err := o.writeBatch(ctx, m, b); err != nil {
			return protocol.CommitResult{}, fmt.Errorf("%v: batch %d: %w", o, i, err)
		}
	}
	return m.Commit(ctx)
}

// verify reads the committed map output back from disk: the files agree,
// every checksum holds, and every partition decodes to exactly the bytes
// sent for it, in order. With res, the lengths and checksums that Commit
// returned must be those on disk.
func (o *mapOutput) verify(res *protocol.CommitResult) error {
	f, err := shufflefile.Open(vfs.Default, o.layout, o.id, o.alg)
	if err != nil {
		return fmt.Errorf("%v: %w", o, err)
	}
	defer f.Close()
	if f.NumPartitions() != o.parts {
		return fmt.Errorf("%v: %d partitions on disk", o, f.NumPartitions())
	}
	if err := f.Verify(); err != nil {
		return fmt.Errorf("%v: %w", o, err)
	}
	if res != nil {
		if !slices.Equal(res.Lengths, f.Lengths) {
			return fmt.Errorf("%v: Commit returned lengths %v, the index says %v", o, res.Lengths, f.Lengths)
		}
		sums := make([]int64, len(f.Checksums))
		for i, s := range f.Checksums {
			sums[i] = int64(s)
		}
		if len(res.Checksums) != len(sums) || !slices.Equal(res.Checksums, sums) {
			return fmt.Errorf("%v: Commit returned checksums %v, the checksum file says %v", o, res.Checksums, sums)
		}
	}
	for p := range o.parts {
		raw, err := f.ReadPartition(p)
		if err != nil {
			return fmt.Errorf("%v: partition %d: %w", o, p, err)
		}
		plain, err := codec.Decode(o.codec, nil, raw)
		if err != nil {
			return fmt.Errorf("%v: partition %d: %d bytes do not decode: %w", o, p, len(raw), err)
		}
		switch o.kind {
		case protocol.KindOpaque:
			var want []byte
			for _, b := range o.batches {
				want = append(want, opaquePart(b, p)...)
			}
			if !bytes.Equal(plain, want) {
				return fmt.Errorf("%v: partition %d decodes to %d bytes, want the %d sent (first difference at %d)", o, p, len(plain), len(want), firstDiff(plain, want))
			}
		case protocol.KindColumnar:
			if err := checkBlocks(plain, o.batches, p); err != nil {
				return fmt.Errorf("%v: partition %d: %w", o, p, err)
			}
		}
	}
	return nil
}

// checkBlocks checks that plain is partition p's rows of each batch in
// turn, as blocks: each block byte for byte the serialization of the rows
// it claims (the writer may split a partition's rows over several blocks),
// and nothing else, no empty blocks.
func checkBlocks(plain []byte, batches []*partition.Batch, p int) error {
	for bi, b := range batches {
		start, end := b.PartitionRows(p)
		for row := start; row < end; {
			blk, n, err := partition.DecodeBlock(plain)
			if err != nil {
				return fmt.Errorf("batch %d rows [%d,%d): block at row %d: %w", bi, start, end, row, err)
			}
			if blk.Rows == 0 || row+blk.Rows > end {
				return fmt.Errorf("batch %d rows [%d,%d): block at row %d holds %d rows", bi, start, end, row, blk.Rows)
			}
			if want := partition.AppendBlock(nil, b, row, row+blk.Rows); !bytes.Equal(plain[:n], want) {
				return fmt.Errorf("batch %d rows [%d,%d): block of rows [%d,%d) differs from what was sent at byte %d", bi, start, end, row, row+blk.Rows, firstDiff(plain[:n], want))
			}
			plain = plain[n:]
			row += blk.Rows
		}
	}
	if len(plain) > 0 {
		return fmt.Errorf("%d bytes after the last block sent", len(plain))
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// committed reports whether the map output's index exists.
func (o *mapOutput) committed() bool {
	_, err := os.Stat(shufflefile.Path(o.layout, shufflefile.IndexName(o.id)))
	return err == nil
}

// files returns every file of the map output's id (committed or not, temp
// files included) under dirs.
func (o *mapOutput) files(t testing.TB, dirs ...string) []string {
	t.Helper()
	prefix := fmt.Sprintf("shuffle_%d_%d_0.", o.id.Shuffle, o.id.Map)
	var found []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && len(d.Name()) > len(prefix) && d.Name()[:len(prefix)] == prefix {
				found = append(found, path)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("walk %s: %v", dir, err)
		}
	}
	return found
}

// tempFiles returns the temp files under dirs.
func tempFiles(t testing.TB, dirs ...string) []string {
	t.Helper()
	var found []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if shufflefile.IsTempName(d.Name()) {
				found = append(found, path)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("walk %s: %v", dir, err)
		}
	}
	return found
}

// layoutOf returns where the daemon puts the outputs of a registration.
func layoutOf(reg protocol.Registered, localDirs []string) shufflefile.Layout {
	if len(localDirs) == 0 {
		return shufflefile.Flat(reg.Dirs[0])
	}
	return shufflefile.SparkHashed{LocalDirs: reg.Dirs, SubDirs: subDirs}
}

// makeLocalDirs creates n Spark-like local dirs for app under root.
func makeLocalDirs(t testing.TB, root, app string, n int) []string {
	t.Helper()
	var dirs []string
	for i := range n {
		d := filepath.Join(root, fmt.Sprintf("blockmgr-%s-%d", app, i))
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return dirs
}
