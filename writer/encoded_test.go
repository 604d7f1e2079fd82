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
	for _, r := range []EncodedRecord{{Partition: 3, Stream: []byte("x")}, {Partition: -1}, {Partition: 0, Raw: -1}, {Partition: 2, Stream: huge, Raw: 1}} {
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
