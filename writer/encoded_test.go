package writer

import (
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
			// Two calls, the second starting below where the first ends: a new run.
			half := len(recs) / 2
			if err := w.WriteEncoded(ctx, recs[:half], func() { done.Add(1) }); err != nil {
				t.Fatal(err)
			}
			if err := w.WriteEncoded(ctx, recs[half:], func() { done.Add(1) }); err != nil {
				t.Fatal(err)
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
	e := newEngine(t)
	ctx := context.Background()
	spec := Spec{ID: shufflefile.ID{Shuffle: 4, Map: 1}, NumPartitions: 3, Codec: codec.LZ4, Layout: shufflefile.Flat(t.TempDir())}
	w, err := e.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, r := range []EncodedRecord{{Partition: 3, Stream: []byte("x")}, {Partition: -1}, {Partition: 0, Raw: -1}} {
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
