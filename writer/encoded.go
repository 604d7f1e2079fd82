package writer

import (
	"context"
	"fmt"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
)

// EncodedRecord is a record already encoded elsewhere (on a GPU): Stream
// is one or more complete codec streams of the map output's codec and
// block size that decode to Raw bytes of partition Partition. Sum, when
// SumAlg is not checksum.None, is the SumAlg checksum of Stream, computed
// where Stream was made.
type EncodedRecord struct {
	Partition int
	Stream    []byte
	Raw       int64
	Sum       uint32
	SumAlg    checksum.Algorithm
}

// WriteEncoded adds records that need no encoding, in order: each is
// admitted by its encoded size, copied out of Stream and checksummed on
// the workers, and written like any other record (runs, merge, commit).
// A record whose SumAlg is the map output's EncodedChecksum is not
// checksummed: its Sum is taken as the checksum of Stream; any other
// SumAlg is ignored (an encrypted map output checksums the encrypted
// bytes). The streams and sums are not decoded or checked: the caller
// vouches for their codec and their sums. The Streams must stay
// unchanged until onDone (may be nil) is called, once no record refers
// to them any more; onDone is called exactly once, also when
// WriteEncoded fails. An empty Stream is skipped.
// On an engine that holds runs in memory (its limit is at least 16 record
// sizes), a Stream larger than the bytes-in-flight limit is an ErrInvalid
// error and nothing of the call is written: such a record is admitted only
// with nothing else in flight, which runs held in memory until their
// commit would never allow. (Records the writer cuts itself are at most a
// record size; on an engine without that memory they are admitted alone.)
func (w *MapWriter) WriteEncoded(ctx context.Context, recs []EncodedRecord, onDone func()) error {
	ref := newBatchRef(onDone)
	defer ref.release()
	for i, r := range recs {
		if r.Partition < 0 || r.Partition >= w.spec.NumPartitions {
			return fmt.Errorf("%w: map output %s: encoded record %d: partition %d out of range [0,%d)", ErrInvalid, w.name(), i, r.Partition, w.spec.NumPartitions)
		}
		if r.Raw < 0 {
			return fmt.Errorf("%w: map output %s: encoded record %d: raw length %d", ErrInvalid, w.name(), i, r.Raw)
		}
		if r.SumAlg > checksum.CRC32C {
			return fmt.Errorf("%w: map output %s: encoded record %d: unknown checksum algorithm %v", ErrInvalid, w.name(), i, r.SumAlg)
		}
		if limit := w.e.lim.Limit(); w.e.memory.total > 0 && int64(len(r.Stream)) > limit {
			return fmt.Errorf("%w: map output %s: encoded record %d: stream of %d bytes is larger than the bytes-in-flight limit %d", ErrInvalid, w.name(), i, len(r.Stream), limit)
		}
	}
	presum := w.EncodedChecksum()
	return w.writing(ctx, func(ctx context.Context) error {
		for _, e := range recs {
			if len(e.Stream) == 0 {
				continue
			}
			if err := w.checkPartition(e.Partition); err != nil {
				return err
			}
			r := &record{w: w, partition: e.Partition, quota: int64(len(e.Stream)), data: e.Stream,
				encoded: true, raw: e.Raw, batch: ref}
			if presum != checksum.None && e.SumAlg == presum {
				r.sum, r.summed = e.Sum, true
			}
			if err := w.enqueue(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// EncodedChecksum is the checksum algorithm whose sums WriteEncoded takes
// from its records (EncodedRecord.SumAlg) instead of computing them: the
// map output's checksum algorithm, or checksum.None when it has none or
// is encrypted (its checksums are of the encrypted bytes).
func (w *MapWriter) EncodedChecksum() checksum.Algorithm {
	if w.spec.Encryption != nil {
		return checksum.None
	}
	return w.spec.Checksum
}

// Codec is the map output's codec.
func (w *MapWriter) Codec() codec.Kind { return w.spec.Codec }

// Format is the map output's payload format for columnar batches.
func (w *MapWriter) Format() partition.Format { return w.spec.Format }

// BlockSize is the lz4 or snappy block size the map output's records are
// encoded with (the engine's when its Spec left it 0).
func (w *MapWriter) BlockSize() int {
	if w.spec.BlockSize != 0 {
		return w.spec.BlockSize
	}
	return w.e.opts.blockSize
}
