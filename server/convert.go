package server

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
)

// maxColumnType is the last wire column type this build serializes; the
// wire ids of types 1..14 equal partition's.
const maxColumnType = protocol.TypeDecimal128

var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// columnarBatch builds a partition.Batch over payload as the layout
// describes it. Buffers alias payload; only unaligned int32 offsets are
// copied. The result still goes through partition.Batch.Validate.
func columnarBatch(l *protocol.ColumnarLayout, payload []byte) (*partition.Batch, error) {
	if l.Rows < 0 || l.Rows > partition.MaxRows {
		return nil, fmt.Errorf("%w: columnar layout: rows %d out of range [0,%d]", errInvalid, l.Rows, partition.MaxRows)
	}
	b := &partition.Batch{Rows: int(l.Rows), Columns: make([]partition.Column, len(l.Columns))}
	for i := range l.Columns {
		c := &l.Columns[i]
		if c.Type == 0 || c.Type > maxColumnType {
			return nil, fmt.Errorf("%w: column %d %q: type %v is not supported by this build", errUnsupported, i, c.Name, c.Type)
		}
		pc := &b.Columns[i]
		pc.Name, pc.Type = c.Name, partition.Type(c.Type)
		pc.Precision, pc.Scale = int8(c.Precision), int8(c.Scale)
		var err error
		if pc.Validity, err = slice(payload, c.Validity, i, "validity"); err != nil {
			return nil, err
		}
		if pc.Data, err = slice(payload, c.Data, i, "data"); err != nil {
			return nil, err
		}
		raw, err := slice(payload, c.Offsets, i, "offsets")
		if err != nil {
			return nil, err
		}
		if pc.Offsets, err = int32s(raw, i); err != nil {
			return nil, err
		}
	}
	b.PartitionOffsets = make([]int32, len(l.PartitionRows))
	for p, r := range l.PartitionRows {
		if r < 0 || r > l.Rows {
			return nil, fmt.Errorf("%w: columnar layout: partition_rows[%d] = %d out of range [0,%d]", errInvalid, p, r, l.Rows)
		}
		b.PartitionOffsets[p] = int32(r)
	}
	return b, nil
}

// slice returns the bytes of buf inside payload, nil for an empty buffer.
func slice(payload []byte, buf protocol.Buffer, col int, field string) ([]byte, error) {
	if buf.Length == 0 {
		return nil, nil
	}
	if buf.Offset < 0 || buf.Length < 0 || buf.Offset > int64(len(payload)) || buf.Length > int64(len(payload))-buf.Offset {
		return nil, fmt.Errorf("%w: column %d %s: (offset %d, length %d) outside the payload of %d bytes", errInvalid, col, field, buf.Offset, buf.Length, len(payload))
	}
	return payload[buf.Offset : buf.Offset+buf.Length : buf.Offset+buf.Length], nil
}

// int32s views little-endian int32 offsets without a copy when they are
// aligned and the machine is little-endian, and copies them otherwise.
func int32s(raw []byte, col int) ([]int32, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if len(raw)%4 != 0 {
		return nil, fmt.Errorf("%w: column %d offsets: length %d is not a multiple of 4", errInvalid, col, len(raw))
	}
	n := len(raw) / 4
	if nativeLittleEndian && uintptr(unsafe.Pointer(&raw[0]))%4 == 0 {
		return unsafe.Slice((*int32)(unsafe.Pointer(&raw[0])), n), nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}
