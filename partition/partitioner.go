package partition

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/shuffled/shuffled/errdefs"
)

// ErrInvalidArgument is wrapped by errors about arguments other than the
// batch itself, such as a key column index or a partition count.
var ErrInvalidArgument = errdefs.New(errdefs.ErrInvalidArgument, "partition: invalid argument")

// Partition returns a copy of b with its rows reordered into hash
// partition order, as the GPU partitions a batch before handing it over:
// row r goes to partition Pmod(hash, numPartitions) where hash is Spark's
// hash of r's key columns (HashRows), rows keep their relative order within
// a partition, and the result's PartitionOffsets delimit the partitions.
// b must be valid; its own PartitionOffsets, if any, are otherwise ignored.
// With no key columns every row
// hashes to the seed, as Spark's hash() of nothing does.
func Partition(b *Batch, keyCols []int, numPartitions int) (*Batch, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if numPartitions < 1 || numPartitions > math.MaxInt32 {
		return nil, fmt.Errorf("%w: numPartitions = %d, want 1 to %d", ErrInvalidArgument, numPartitions, math.MaxInt32)
	}
	for _, k := range keyCols {
		if k < 0 || k >= len(b.Columns) {
			return nil, fmt.Errorf("%w: key column %d out of range [0,%d)", ErrInvalidArgument, k, len(b.Columns))
		}
	}
	rows := b.Rows
	pid := make([]int32, rows)
	HashRows(b, keyCols, pid)
	offsets := make([]int32, numPartitions+1)
	for i, h := range pid {
		p := int32(Pmod(h, numPartitions))
		pid[i] = p
		offsets[p+1]++
	}
	for p := 1; p <= numPartitions; p++ {
		offsets[p] += offsets[p-1]
	}
	// A counting sort: row i goes to dst[i]. Scattering rows read in order
	// into numPartitions sequential streams is kinder to caches than
	// gathering rows in output order from random places.
	next := make([]int32, numPartitions)
	copy(next, offsets)
	dst := pid
	for i, p := range pid {
		dst[i] = next[p]
		next[p]++
	}
	out := &Batch{Rows: rows, PartitionOffsets: offsets, Columns: make([]Column, len(b.Columns))}
	var src []int32 // the inverse of dst, for nested columns
	for i := range b.Columns {
		c := &b.Columns[i]
		if !c.Type.Nested() {
			out.Columns[i] = c.scatter(dst, rows)
			continue
		}
		if src == nil {
			src = make([]int32, rows)
			for i, j := range dst {
				src[j] = int32(i)
			}
		}
		out.Columns[i] = c.gather(src)
	}
	return out, nil
}

// scatter returns a new column of rows rows whose row dst[i] is row i of c;
// dst is a permutation of [0, rows).
func (c *Column) scatter(dst []int32, rows int) Column {
	out := Column{Name: c.Name, Type: c.Type, Precision: c.Precision, Scale: c.Scale}
	if c.Validity != nil {
		v := make([]byte, (rows+7)/8)
		for i, j := range dst {
			v[j>>3] |= (c.Validity[i>>3] >> (i & 7) & 1) << (j & 7)
		}
		out.Validity = v
	}
	if c.Type.VarWidth() {
		off := make([]int32, rows+1)
		if rows == 0 {
			out.Offsets, out.Data = off, []byte{}
			return out
		}
		src := c.Offsets[:rows+1]
		for i, j := range dst {
			off[j+1] = src[i+1] - src[i]
		}
		for j := range rows {
			off[j+1] += off[j]
		}
		data := make([]byte, off[rows])
		for i, j := range dst {
			copy(data[off[j]:off[j+1]], c.Data[src[i]:src[i+1]])
		}
		out.Offsets, out.Data = off, data
		return out
	}
	w := c.Type.Width()
	src := c.Data[:rows*w]
	data := make([]byte, rows*w)
	switch w {
	case 1:
		for i, j := range dst {
			data[j] = src[i]
		}
	case 2:
		for i, j := range dst {
			binary.LittleEndian.PutUint16(data[2*j:], binary.LittleEndian.Uint16(src[2*i:]))
		}
	case 4:
		for i, j := range dst {
			binary.LittleEndian.PutUint32(data[4*j:], binary.LittleEndian.Uint32(src[4*i:]))
		}
	case 8:
		for i, j := range dst {
			binary.LittleEndian.PutUint64(data[8*j:], binary.LittleEndian.Uint64(src[8*i:]))
		}
	default:
		for i, j := range dst {
			copy(data[int(j)*w:int(j+1)*w], src[i*w:(i+1)*w])
		}
	}
	out.Data = data
	return out
}

// gather returns a new column whose row j is row idx[j] of c, children
// included (the rows of a list's child follow its new row order).
func (c *Column) gather(idx []int32) Column {
	rows := len(idx)
	out := Column{Name: c.Name, Type: c.Type, Precision: c.Precision, Scale: c.Scale}
	if c.Validity != nil {
		v := make([]byte, (rows+7)/8)
		for j, i := range idx {
			v[j>>3] |= (c.Validity[i>>3] >> (i & 7) & 1) << (j & 7)
		}
		out.Validity = v
	}
	switch {
	case c.Type == Struct:
		out.Children = make([]Column, len(c.Children))
		for k := range c.Children {
			out.Children[k] = c.Children[k].gather(idx)
		}
		return out
	case c.Type.HasOffsets():
		off := make([]int32, rows+1)
		var childIdx []int32
		for j, i := range idx {
			a, b := c.Offsets[i], c.Offsets[i+1]
			off[j+1] = off[j] + b - a
			if c.Type.Nested() {
				for k := a; k < b; k++ {
					childIdx = append(childIdx, k)
				}
			} else {
				out.Data = append(out.Data, c.Data[a:b]...)
			}
		}
		out.Offsets = off
		if c.Type.Nested() {
			out.Children = []Column{c.Children[0].gather(childIdx)}
		} else if out.Data == nil {
			out.Data = []byte{}
		}
		return out
	}
	w := c.Type.Width()
	out.Data = make([]byte, rows*w)
	for j, i := range idx {
		copy(out.Data[j*w:(j+1)*w], c.Data[int(i)*w:int(i+1)*w])
	}
	return out
}
