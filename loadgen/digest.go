package loadgen

import (
	"fmt"
	"hash/maphash"

	"github.com/shuffled/shuffled/partition"
)

// digest sums up a partition's content: its row count and a hash. Two
// digests made with the same seed are equal when the contents are.
type digest struct {
	rows int64
	sum  uint64
}

// rowHasher hashes rows of batches column by column. The hash depends only
// on the sequence of rows added, not on how they were cut into batches, so
// the rows a map output's partition decodes to (several blocks per batch
// when the daemon split a large slice into records) hash as the slices that
// were sent do.
//
// Each column feeds three streams: validity (one byte a row), value lengths
// (variable-width columns), and value bytes. A column without a validity
// bitmap counts as all valid.
type rowHasher struct {
	seed    maphash.Seed
	types   []partition.Type
	rows    int64
	cols    []columnHash
	scratch []byte
}

type columnHash struct{ valid, lens, data maphash.Hash }

func newRowHasher(seed maphash.Seed, types []partition.Type) *rowHasher {
	h := &rowHasher{seed: seed, types: types, cols: make([]columnHash, len(types))}
	h.reset()
	return h
}

func (h *rowHasher) reset() {
	h.rows = 0
	for i := range h.cols {
		c := &h.cols[i]
		c.valid.SetSeed(h.seed)
		c.lens.SetSeed(h.seed)
		c.data.SetSeed(h.seed)
	}
}

// scratchRows bounds the rows whose validity bytes or lengths are staged
// at once.
const scratchRows = 4096

// add hashes rows [start, end) of b, which must be valid. A batch whose
// columns are not the schema's is an error.
func (h *rowHasher) add(b *partition.Batch, start, end int) error {
	if len(b.Columns) != len(h.types) {
		return fmt.Errorf("%d columns, want %d", len(b.Columns), len(h.types))
	}
	for i := range b.Columns {
		if t := b.Columns[i].Type; t != h.types[i] {
			return fmt.Errorf("column %d is %v, want %v", i, t, h.types[i])
		}
	}
	if start == end {
		return nil
	}
	if cap(h.scratch) < 4*scratchRows {
		h.scratch = make([]byte, 4*scratchRows)
	}
	for i := range b.Columns {
		c := &b.Columns[i]
		ch := &h.cols[i]
		for lo := start; lo < end; lo += scratchRows {
			hi := min(end, lo+scratchRows)
			v := h.scratch[:hi-lo]
			for r := lo; r < hi; r++ {
				v[r-lo] = 1
				if c.IsNull(r) {
					v[r-lo] = 0
				}
			}
			ch.valid.Write(v)
			if c.Type.VarWidth() {
				l := h.scratch[:4*(hi-lo)]
				for r := lo; r < hi; r++ {
					putUint32(l[4*(r-lo):], uint32(c.Offsets[r+1]-c.Offsets[r]))
				}
				ch.lens.Write(l)
			}
		}
		if c.Type.VarWidth() {
			ch.data.Write(c.Data[c.Offsets[start]:c.Offsets[end]])
		} else {
			w := c.Type.Width()
			ch.data.Write(c.Data[start*w : end*w])
		}
	}
	h.rows += int64(end - start)
	return nil
}

// digest returns the digest of the rows added since the last reset.
func (h *rowHasher) digest() digest {
	var all maphash.Hash
	all.SetSeed(h.seed)
	var buf [8]byte
	put := func(v uint64) {
		for i := range buf {
			buf[i] = byte(v >> (8 * i))
		}
		all.Write(buf[:])
	}
	put(uint64(h.rows))
	for i := range h.cols {
		c := &h.cols[i]
		put(c.valid.Sum64())
		put(c.lens.Sum64())
		put(c.data.Sum64())
	}
	return digest{rows: h.rows, sum: all.Sum64()}
}

// blockRows returns the number of rows of the blocks concatenated in b.
func blockRows(b []byte) (int64, []*partition.Batch, error) {
	blocks, err := partition.DecodeBlocks(b)
	if err != nil {
		return 0, nil, err
	}
	var n int64
	for _, blk := range blocks {
		n += int64(blk.Rows)
	}
	return n, blocks, nil
}

// kudoRows returns the number of rows of the kudo tables concatenated in b
// and their batches, decoded with schema; a table the decoder refuses
// (misaligned, padding not zero, lengths that disagree) is an error.
func kudoRows(b []byte, schema []partition.Field) (int64, []*partition.Batch, error) {
	tabs, err := partition.DecodeKudoTables(b, schema)
	if err != nil {
		return 0, nil, err
	}
	var n int64
	out := make([]*partition.Batch, len(tabs))
	for i, t := range tabs {
		if t.Size%4 != 0 {
			return 0, nil, fmt.Errorf("kudo table %d: %d bytes, not a multiple of 4", i, t.Size)
		}
		n += int64(t.Rows)
		out[i] = t.Batch
	}
	return n, out, nil
}

// schemaTypes returns the column types of b.
func schemaTypes(b *partition.Batch) []partition.Type {
	t := make([]partition.Type, len(b.Columns))
	for i := range b.Columns {
		t[i] = b.Columns[i].Type
	}
	return t
}
