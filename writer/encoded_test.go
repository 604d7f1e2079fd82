package writer

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// Records encoded elsewhere land as if the writer had encoded them: the
// same partitions, the same on-disk bytes and checksums as Write of the
// same data, in runs, and onDone once they are all written.
func TestWriteEncoded(t *testing.T) {
	for _, alg := range []checksum.Algorithm{checksum.Adler32, checksum.CRC32C} {
		t.Run(alg.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			ops := workload(rng, 50, 3, 3000)
			enc, err := codec.NewEncoder(codec.LZ4)
			if err != nil {
				t.Fatal(err)
			}
			var recs []EncodedRecord
			for _, o := range ops {
				recs = append(recs, EncodedRecord{Partition: o.p, Stream: enc.Encode(nil, o.data), Raw: int64(len(o.data))})
			}
			e := newEngine(t, WithLimit(64<<10), WithWorkers(3))
			mk := func(m int64) Spec {
				return Spec{ID: shufflefile.ID{Shuffle: 3, Map: m}, NumPartitions: 50, Codec: codec.LZ4, Checksum: alg, Layout: shufflefile.Flat(t.TempDir())}
			}
			spec := mk(1)
			ctx := context.Background()
			w, err := e.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			var done atomic.Int32
			// Two calls, the second starting below where the first ends: a
			// new run. Each call's streams share one buffer, which onDone
			// scribbles over, as a caller reusing it would: the writer
			// reads the streams (it need not copy them) until onDone only.
			half := len(recs) / 2
			for _, part := range [][]EncodedRecord{recs[:half], recs[half:]} {
				var buf []byte
				for _, r := range part {
					buf = append(buf, r.Stream...)
				}
				call := make([]EncodedRecord, len(part))
				off := 0
				for i, r := range part {
					call[i] = r
					call[i].Stream = buf[off : off+len(r.Stream) : off+len(r.Stream)]
					off += len(r.Stream)
				}
				scribble := func() {
					done.Add(1)
					for i := range buf {
						buf[i] = 0xee
					}
				}
				if err := w.WriteEncoded(ctx, call, scribble); err != nil {
					t.Fatal(err)
				}
			}
			res, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n := done.Load(); n != 2 {
				t.Errorf("onDone called %d times, want 2", n)
			}
			checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, 50))
			var raw int64
			for _, o := range ops {
				raw += int64(len(o.data))
			}
			if res.BytesIn != raw || res.Records != int64(len(recs)) {
				t.Errorf("BytesIn %d Records %d, want %d %d", res.BytesIn, res.Records, raw, len(recs))
			}
			// Write of the same data makes the same files (the same codec
			// streams, one record per write at this record size).
			ref := mk(2)
			want, err := writeAll(t, e, ref, ops)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Lengths, want.Lengths) || !slices.Equal(res.Checksums, want.Checksums) {
				t.Errorf("lengths/checksums differ from Write's:\n%v %v\n%v %v", res.Lengths, res.Checksums, want.Lengths, want.Checksums)
			}
			checkQuiet(t, e)
		})
	}
}

func TestWriteEncodedBadInput(t *testing.T) {
	const limit = 1 << 20
	e := newEngine(t, WithLimit(limit), WithRecordSize(limit/16)) // runs may be held in memory
	ctx := context.Background()
	spec := Spec{ID: shufflefile.ID{Shuffle: 4, Map: 1}, NumPartitions: 3, Codec: codec.LZ4, Layout: shufflefile.Flat(t.TempDir())}
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	// A stream over the limit: refused, where it used to wait for nothing
	// else in flight, which the runs held in memory never allow.
	huge := make([]byte, limit+1)
	for _, r := range []EncodedRecord{{Partition: 3, Stream: []byte("x")}, {Partition: -1}, {Partition: 0, Raw: -1}, {Partition: 2, Stream: huge, Raw: 1}, {Partition: 0, Stream: []byte("x"), Raw: 1, SumAlg: checksum.CRC32C + 1}} {
		called := 0
		err := w.WriteEncoded(ctx, []EncodedRecord{r}, func() { called++ })
		if !errors.Is(err, ErrInvalid) || called != 1 {
			t.Errorf("%+v: err %v, onDone %d times; want ErrInvalid, once", r, err, called)
		}
	}
	// Empty streams are skipped: nothing is written.
	if err := w.WriteEncoded(ctx, []EncodedRecord{{Partition: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := w.Commit(ctx)
	if err != nil || res.Records != 0 || slices.ContainsFunc(res.Lengths, func(n int64) bool { return n != 0 }) {
		t.Errorf("commit: %v, %d records", err, res.Records)
	}
}

// TestWriteEncodedOversize: on an engine that keeps no runs in memory, an
// encoded stream larger than the limit is admitted alone, after a first
// run, and the map output commits.
func TestWriteEncodedOversize(t *testing.T) {
	const limit = 64 << 10
	e := newEngine(t, WithLimit(limit), WithRecordSize(limit)) // no memory budget
	ctx := context.Background()
	spec := Spec{ID: shufflefile.ID{Shuffle: 4, Map: 2}, NumPartitions: 2, Codec: codec.None, Layout: shufflefile.Flat(t.TempDir())}
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	small, huge := bytes.Repeat([]byte("s"), 100), bytes.Repeat([]byte("h"), 2*limit)
	for _, recs := range [][]EncodedRecord{{{Partition: 1, Stream: small, Raw: 100}}, {{Partition: 0, Stream: huge, Raw: 2 * limit}}} {
		if err := w.WriteEncoded(ctx, recs, nil); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Runs != 2 || res.Lengths[0] != 2*limit || res.Lengths[1] != 100 {
		t.Errorf("runs %d, lengths %v; want 2 runs, [%d 100]", res.Runs, res.Lengths, 2*limit)
	}
	if s := e.Limiter().Stats(); s.Oversize != 1 {
		t.Errorf("Oversize = %d, want 1", s.Oversize)
	}
}

// encodedOps encodes ops as EncodedRecords of codec k, each with sum(its
// stream) as its Sum of algorithm alg (none when alg is checksum.None).
func encodedOps(t *testing.T, k codec.Kind, ops []op, alg checksum.Algorithm, sum func([]byte) uint32) []EncodedRecord {
	t.Helper()
	enc, err := codec.NewEncoder(k)
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]EncodedRecord, len(ops))
	for i, o := range ops {
		recs[i] = EncodedRecord{Partition: o.p, Stream: enc.Encode(nil, o.data), Raw: int64(len(o.data))}
		if alg != checksum.None {
			recs[i].Sum, recs[i].SumAlg = sum(recs[i].Stream), alg
		}
	}
	return recs
}

// writeEncoded writes recs in two calls (the second starting a new run)
// and commits; it returns the result and the checksums of the checksum
// file as a reader sees them.
func writeEncoded(t *testing.T, e *Engine, spec Spec, recs []EncodedRecord) (Result, *shufflefile.MapOutput) {
	t.Helper()
	ctx := context.Background()
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	half := len(recs) / 2
	for _, part := range [][]EncodedRecord{recs[:half], recs[half:]} {
		if err := w.WriteEncoded(ctx, part, nil); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mo, err := shufflefile.Open(vfs.Default, spec.Layout, spec.ID, spec.Checksum)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mo.Close() })
	return res, mo
}

// Precomputed sums of the map output's algorithm are taken as they are:
// right ones make the same checksum file as sums the writer computes,
// and wrong ones (the sums of other bytes) land in it, each partition's
// the combination of its records' sums, so that the bytes no longer
// verify. Sums of another algorithm are ignored.
func TestWriteEncodedSums(t *testing.T) {
	for _, alg := range []checksum.Algorithm{checksum.Adler32, checksum.CRC32C} {
		t.Run(alg.String(), func(t *testing.T) {
			const parts = 50
			rng := rand.New(rand.NewPCG(7, 8))
			ops := workload(rng, parts, 3, 3000)
			e := newEngine(t, WithLimit(64<<10), WithWorkers(3))
			mk := func(m int64) Spec {
				return Spec{ID: shufflefile.ID{Shuffle: 5, Map: m}, NumPartitions: parts, Codec: codec.LZ4, Checksum: alg, Layout: shufflefile.Flat(t.TempDir())}
			}
			right := func(b []byte) uint32 { return alg.Update(alg.Empty(), b) }
			wrong := func(b []byte) uint32 {
				c := slices.Clone(b)
				c[0] ^= 0x5a
				return alg.Update(alg.Empty(), c)
			}

			plain, plainMO := writeEncoded(t, e, mk(1), encodedOps(t, codec.LZ4, ops, checksum.None, nil))
			if err := plainMO.Verify(); err != nil {
				t.Fatal(err)
			}
			spec := mk(2)
			got, mo := writeEncoded(t, e, spec, encodedOps(t, codec.LZ4, ops, alg, right))
			if !slices.Equal(got.Checksums, plain.Checksums) || !slices.Equal(mo.Checksums, plainMO.Checksums) || !slices.Equal(got.Lengths, plain.Lengths) {
				t.Errorf("with precomputed sums: checksums %v (file %v), lengths %v; computed: %v (file %v), %v",
					got.Checksums, mo.Checksums, got.Lengths, plain.Checksums, plainMO.Checksums, plain.Lengths)
			}
			checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, parts))

			recs := encodedOps(t, codec.LZ4, ops, alg, wrong)
			_, mo = writeEncoded(t, e, mk(3), recs)
			want := make([]uint32, parts)
			for p := range want {
				want[p] = alg.Empty()
			}
			for _, r := range recs {
				want[r.Partition] = alg.Combine(want[r.Partition], r.Sum, int64(len(r.Stream)))
			}
			differ := 0
			for p := range parts {
				if mo.Checksums[p] != want[p] {
					t.Errorf("partition %d: checksum file says %#08x, want the records' sums combined %#08x", p, mo.Checksums[p], want[p])
				}
				if mo.Lengths[p] > 0 && mo.Checksums[p] != plainMO.Checksums[p] {
					differ++
				}
			}
			if differ == 0 {
				t.Errorf("wrong sums: no partition's checksum differs from the bytes'")
			}
			if err := mo.Verify(); !errors.Is(err, shufflefile.ErrChecksumMismatch) {
				t.Errorf("wrong sums: Verify: %v, want a checksum mismatch", err)
			}

			// Wrong sums of another algorithm: ignored, the bytes summed.
			other := checksum.CRC32
			_, mo = writeEncoded(t, e, mk(4), encodedOps(t, codec.LZ4, ops, other, func(b []byte) uint32 { return wrong(b) ^ 1 }))
			if !slices.Equal(mo.Checksums, plainMO.Checksums) {
				t.Errorf("sums of %v: checksum file %v, want %v", other, mo.Checksums, plainMO.Checksums)
			}
			checkQuiet(t, e)
		})
	}
}

// An encrypted map output checksums the encrypted bytes: precomputed sums
// of the streams are ignored, and EncodedChecksum says so.
func TestWriteEncodedSumsEncrypted(t *testing.T) {
	const parts = 20
	rng := rand.New(rand.NewPCG(9, 10))
	ops := workload(rng, parts, 2, 3000)
	e := newEngine(t, WithLimit(64<<10), WithWorkers(2))
	alg := checksum.Adler32
	spec := Spec{ID: shufflefile.ID{Shuffle: 6, Map: 1}, NumPartitions: parts, Codec: codec.LZ4, Checksum: alg,
		Layout: shufflefile.Flat(t.TempDir()), Encryption: testKey}
	w, err := e.Open(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.EncodedChecksum(); got != checksum.None {
		t.Errorf("EncodedChecksum of an encrypted map output = %v, want none", got)
	}
	w.Abort()
	spec.ID.Map = 2
	_, mo := writeEncoded(t, e, spec, encodedOps(t, codec.LZ4, ops, alg, func(b []byte) uint32 { return ^alg.Update(alg.Empty(), b) }))
	if err := mo.Verify(); err != nil {
		t.Errorf("encrypted, with wrong precomputed sums: %v", err)
	}
	checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, parts))
}
