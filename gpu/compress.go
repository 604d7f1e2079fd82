package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shuffled/shuffled/gpu/lz4ref"
	"github.com/shuffled/shuffled/partition"
)

// A compression plan says what Compressor.Compress makes of one device
// batch: its records, each one partition's bytes (or part of them) that
// become one complete lz4-java stream, and for a columnar batch the gather
// program that lays out each record's SHFC block or kudo table in device
// memory first.
// Plans are made on the host, from the layout the client sent and, for
// String and Binary columns, a host copy of their offsets; the records are
// those the writer makes of the same batch on the CPU, with the same
// bytes.

// Record is one record of a plan: partition Partition's Len bytes at Off
// of the payload (the batch region of an opaque batch, the gathered
// buffer of a columnar one).
type Record struct {
	Partition int
	Off, Len  int64
}

// Gather op kinds.
const (
	OpCopy   = 0 // N bytes from Src to Dst
	OpBits   = 1 // N bits from bit Shift of the byte at Src, to ceil(N/8) bytes at Dst
	OpRebase = 2 // N little-endian int32 at Src, less Base, to Dst
)

// GatherOp is one step of a gather program. Src is an offset in the batch
// region, or in the plan's Meta when FromMeta; Dst an offset in the
// gathered buffer, which starts zeroed (padding is never written).
type GatherOp struct {
	Kind     uint8
	Shift    uint8
	FromMeta bool
	Base     int32
	N        int64
	Src, Dst int64
}

// gatherPiece bounds the output of one gather op, so that the kernel's
// blocks (one per op) get even work.
const gatherPiece = 64 << 10

// CompressPlan is the plan of one device batch.
type CompressPlan struct {
	Records []Record
	Ops     []GatherOp
	Meta    []byte // bytes the FromMeta ops copy: the records' SHFC headers
	// Gathered is the size of the gathered buffer; 0 when the records
	// read the batch region itself (opaque).
	Gathered int64
	// RawBytes is the sum of the records' lengths.
	RawBytes int64

	pieces []partition.KudoPiece // addKudo's scratch
}

// PlanOpaque plans an opaque batch of size bytes: partition p is bytes
// [offsets[p], offsets[p+1]), cut into records of at most recordSize
// bytes as the writer cuts them; empty partitions have no record.
func PlanOpaque(offsets []int64, size int64, recordSize int) (*CompressPlan, error) {
	if recordSize <= 0 {
		return nil, fmt.Errorf("%w: record size %d", ErrInvalid, recordSize)
	}
	if len(offsets) < 2 || offsets[0] != 0 || offsets[len(offsets)-1] != size {
		return nil, fmt.Errorf("%w: %d partition offsets, want at least 2, the first 0 and the last the payload length %d", ErrInvalid, len(offsets), size)
	}
	pl := &CompressPlan{}
	for p := 1; p < len(offsets); p++ {
		lo, hi := offsets[p-1], offsets[p]
		if hi < lo {
			return nil, fmt.Errorf("%w: partition offset[%d] = %d < offset[%d] = %d", ErrInvalid, p, hi, p-1, lo)
		}
		for lo < hi {
			n := min(hi-lo, int64(recordSize))
			pl.Records = append(pl.Records, Record{Partition: p - 1, Off: lo, Len: n})
			lo += n
		}
	}
	pl.RawBytes = size
	return pl, nil
}

// ErrNotCovered is wrapped by the error for a columnar batch that the
// plans do not lay out (a payload format or a column type they do not
// know): its caller serializes it on the CPU instead.
var ErrNotCovered = errors.New("gpu: not covered by the compression plans")

// covered lists the column types the plans lay out, each a byte copy of
// fixed-width values, a validity bitmap, or offsets and their data. A
// type added to package partition later is not covered until it is added
// here, with its tests.
var covered = map[partition.Type]bool{
	partition.Bool: true, partition.Int8: true, partition.Int16: true, partition.Int32: true,
	partition.Int64: true, partition.Float32: true, partition.Float64: true, partition.Date32: true,
	partition.TimestampMicros: true, partition.Decimal32: true, partition.Decimal64: true,
	partition.Decimal128: true, partition.String: true, partition.Binary: true,
	partition.YearMonthInterval: true, partition.DayTimeInterval: true,
}

// coveredFormats lists the payload formats the plans lay out.
var coveredFormats = map[partition.Format]bool{partition.SHFC: true, partition.Kudo: true}

// Covers returns nil if PlanColumnar lays out batches of format f with
// columns of types, and an ErrNotCovered error naming the format or the
// first column it does not.
func Covers(f partition.Format, types []partition.Type) error {
	if !coveredFormats[f] {
		return fmt.Errorf("%w: payload format %v", ErrNotCovered, f)
	}
	for i, t := range types {
		if !covered[t] {
			return fmt.Errorf("%w: column %d type %v", ErrNotCovered, i, t)
		}
	}
	return nil
}

// ColumnMeta is what a columnar layout does not say about a column but
// its SHFC block carries.
type ColumnMeta struct {
	Name             string
	Precision, Scale int8
}

// PlanColumnar plans a partitioned columnar batch of l's layout in a
// region of regionSize bytes, for a map output of payload format f: each
// partition's rows [partitionRows[p], partitionRows[p+1]) become the
// records the writer makes of them (one SHFC block or kudo table, or
// several when it is larger than recordSize: f.Split), gathered into one
// buffer. offsets[i] is a host copy of column i's offsets for String and
// Binary columns (nil for the others); they are checked as
// partition.Batch.Validate checks them, since the kernels read the data
// they point at. A format or column type that Covers refuses is an
// ErrNotCovered error.
//
// A block's header comes from the host (Meta); its bitmaps are shifted to
// the slice's first row and its offsets rebased (OpBits, OpRebase). A kudo
// table is its header (from the host, as partition.AppendKudoPlan makes
// it) and byte copies of whole validity bytes, verbatim offsets and data
// (OpCopy only); its zero padding is the gathered buffer's.
func PlanColumnar(f partition.Format, l Layout, meta []ColumnMeta, offsets [][]int32, partitionRows []int64, regionSize int64, recordSize int) (*CompressPlan, error) {
	if !coveredFormats[f] {
		return nil, fmt.Errorf("%w: payload format %v", ErrNotCovered, f)
	}
	if err := l.Validate(regionSize); err != nil {
		return nil, err
	}
	if recordSize <= 0 {
		return nil, fmt.Errorf("%w: record size %d", ErrInvalid, recordSize)
	}
	if len(meta) != len(l.Columns) || len(offsets) != len(l.Columns) {
		return nil, fmt.Errorf("%w: %d column metas and %d offsets for %d columns", ErrInvalid, len(meta), len(offsets), len(l.Columns))
	}
	rows := l.Rows
	sk := &partition.Batch{Rows: rows, Columns: make([]partition.Column, len(l.Columns))}
	present := []byte{}
	for i, c := range l.Columns {
		if !covered[c.Type] {
			return nil, fmt.Errorf("%w: column %d type %v", ErrNotCovered, i, c.Type)
		}
		sc := &sk.Columns[i]
		sc.Type, sc.Name, sc.Precision, sc.Scale = c.Type, meta[i].Name, meta[i].Precision, meta[i].Scale
		if len(sc.Name) > partition.MaxNameLen {
			return nil, fmt.Errorf("%w: column %d name of %d bytes, more than %d", ErrInvalid, i, len(sc.Name), partition.MaxNameLen)
		}
		if c.Validity.Length > 0 {
			sc.Validity = present // only its presence matters to the plan
		}
		if !c.Type.VarWidth() {
			if offsets[i] != nil {
				return nil, fmt.Errorf("%w: column %d: offsets for fixed-width %v", ErrInvalid, i, c.Type)
			}
			continue
		}
		o := offsets[i]
		if rows > 0 && len(o) != rows+1 {
			return nil, fmt.Errorf("%w: column %d: %d offsets for %d rows", ErrInvalid, i, len(o), rows)
		}
		if rows > 0 && o[0] != 0 {
			return nil, fmt.Errorf("%w: column %d: offsets[0] = %d, want 0", ErrInvalid, i, o[0])
		}
		for r := 1; r < len(o); r++ {
			if o[r] < o[r-1] {
				return nil, fmt.Errorf("%w: column %d: offsets[%d] = %d < offsets[%d] = %d", ErrInvalid, i, r, o[r], r-1, o[r-1])
			}
		}
		if rows > 0 && int64(o[rows]) > c.Data.Length {
			return nil, fmt.Errorf("%w: column %d: offsets[%d] = %d past the data of %d bytes", ErrInvalid, i, rows, o[rows], c.Data.Length)
		}
		sc.Offsets = o
	}
	if len(partitionRows) < 2 || partitionRows[0] != 0 || partitionRows[len(partitionRows)-1] != int64(rows) {
		return nil, fmt.Errorf("%w: %d partition row offsets, want at least 2, the first 0 and the last %d", ErrInvalid, len(partitionRows), rows)
	}
	// Room for one record per non-empty partition (more only when one is
	// split): its header, and its ops (the header's, then per column one
	// for validity, two for offsets and data), each cut once at most.
	records := 0
	for p := 1; p < len(partitionRows); p++ {
		if partitionRows[p] > partitionRows[p-1] {
			records++
		}
	}
	perBlock := 1
	for _, c := range sk.Columns {
		perBlock++
		if c.Validity != nil {
			perBlock++
		}
		if c.Type.VarWidth() {
			perBlock++
		}
	}
	header := len(appendMeta(nil, sk, 0, 0, 0))
	if f == partition.Kudo {
		header = kudoHeaderLen(sk)
	}
	pl := &CompressPlan{
		Records: make([]Record, 0, records),
		Ops:     make([]GatherOp, 0, 2*perBlock*records),
		Meta:    make([]byte, 0, records*header),
	}
	for p := 1; p < len(partitionRows); p++ {
		start, end := partitionRows[p-1], partitionRows[p]
		if end < start {
			return nil, fmt.Errorf("%w: partition_rows[%d] = %d < partition_rows[%d] = %d", ErrInvalid, p, end, p-1, start)
		}
		if start == end {
			continue
		}
		bounds := []int{int(start), int(end)}
		if f.Size(sk, int(start), int(end)) > recordSize {
			bounds = f.Split(sk, int(start), int(end), recordSize)
		}
		for k := 1; k < len(bounds); k++ {
			add := pl.addBlock
			if f == partition.Kudo {
				add = pl.addKudo
			}
			if err := add(sk, &l, p-1, bounds[k-1], bounds[k]); err != nil {
				return nil, err
			}
		}
	}
	return pl, nil
}

// addBlock adds the record of rows [lo, hi) of the batch sk describes:
// its header from the host, then each column's sections from the region.
func (pl *CompressPlan) addBlock(sk *partition.Batch, l *Layout, p, lo, hi int) error {
	size := int64(partition.BlockSize(sk, lo, hi))
	if size > partition.MaxBlockSize {
		return fmt.Errorf("%w: partition %d rows [%d,%d) make a %d-byte block, more than %d", ErrInvalid, p, lo, hi, size, int64(partition.MaxBlockSize))
	}
	start := pl.Gathered
	metaOff := int64(len(pl.Meta))
	pl.Meta = appendMeta(pl.Meta, sk, lo, hi, int(size))
	pl.op(GatherOp{Kind: OpCopy, FromMeta: true, N: int64(len(pl.Meta)) - metaOff, Src: metaOff, Dst: start})
	pos := start + int64(len(pl.Meta)) - metaOff
	n := int64(hi - lo)
	for i := range sk.Columns {
		c, lc := &sk.Columns[i], &l.Columns[i]
		if c.Validity != nil {
			pl.op(GatherOp{Kind: OpBits, Shift: uint8(lo & 7), N: n, Src: lc.Validity.Offset + int64(lo>>3), Dst: pos})
			pos += pad8((n + 7) / 8)
		}
		if c.Type.VarWidth() {
			if n > 0 {
				pl.op(GatherOp{Kind: OpRebase, Base: c.Offsets[lo], N: n + 1, Src: lc.Offsets.Offset + 4*int64(lo), Dst: pos})
			}
			pos += pad8(4 * (n + 1))
			var d int64
			if n > 0 {
				d = int64(c.Offsets[hi] - c.Offsets[lo])
				pl.op(GatherOp{Kind: OpCopy, N: d, Src: lc.Data.Offset + int64(c.Offsets[lo]), Dst: pos})
			}
			pos += pad8(d)
			continue
		}
		w := int64(c.Type.Width())
		pl.op(GatherOp{Kind: OpCopy, N: n * w, Src: lc.Data.Offset + int64(lo)*w, Dst: pos})
		pos += pad8(n * w)
	}
	if pos-start != size {
		return fmt.Errorf("gpu: plan of partition %d rows [%d,%d) fills %d of %d bytes", p, lo, hi, pos-start, size)
	}
	pl.Records = append(pl.Records, Record{Partition: p, Off: start, Len: size})
	pl.Gathered += size
	pl.RawBytes += size
	return nil
}

// addKudo adds the record of rows [lo, hi) of the batch sk describes as
// a kudo table: its header from the host, then byte copies of the pieces
// partition.AppendKudoPlan lists, from the region.
func (pl *CompressPlan) addKudo(sk *partition.Batch, l *Layout, p, lo, hi int) error {
	size := int64(partition.KudoSize(sk, lo, hi))
	if size > partition.MaxKudoTableSize {
		return fmt.Errorf("%w: partition %d rows [%d,%d) make a %d-byte kudo table, more than %d", ErrInvalid, p, lo, hi, size, int64(partition.MaxKudoTableSize))
	}
	start := pl.Gathered
	metaOff := int64(len(pl.Meta))
	var n int
	pl.Meta, pl.pieces, n = partition.AppendKudoPlan(pl.Meta, pl.pieces[:0], sk, lo, hi)
	if int64(n) != size {
		return fmt.Errorf("gpu: kudo plan of partition %d rows [%d,%d) is %d bytes, KudoSize %d", p, lo, hi, n, size)
	}
	pl.op(GatherOp{Kind: OpCopy, FromMeta: true, N: int64(len(pl.Meta)) - metaOff, Src: metaOff, Dst: start})
	pos := start + int64(len(pl.Meta)) - metaOff
	for _, pc := range pl.pieces {
		var base int64
		switch pc.Buffer {
		case partition.KudoZeros:
			pos += int64(pc.Len)
			continue
		case partition.KudoValidity:
			base = l.Columns[pc.Column].Validity.Offset
		case partition.KudoOffsets:
			base = l.Columns[pc.Column].Offsets.Offset
		case partition.KudoData:
			base = l.Columns[pc.Column].Data.Offset
		default:
			return fmt.Errorf("gpu: kudo plan piece %+v", pc)
		}
		pl.op(GatherOp{Kind: OpCopy, N: int64(pc.Len), Src: base + int64(pc.Off), Dst: pos})
		pos += int64(pc.Len)
	}
	if pos-start != size {
		return fmt.Errorf("gpu: kudo plan of partition %d rows [%d,%d) fills %d of %d bytes", p, lo, hi, pos-start, size)
	}
	pl.Records = append(pl.Records, Record{Partition: p, Off: start, Len: size})
	pl.Gathered += size
	pl.RawBytes += size
	return nil
}

// kudoHeaderLen returns the header length of sk's kudo tables: 28 bytes
// and a bit per flattened column (two per Binary column).
func kudoHeaderLen(sk *partition.Batch) int {
	if len(sk.Columns) == 0 {
		return 28
	}
	flat := len(sk.Columns)
	for i := range sk.Columns {
		if sk.Columns[i].Type == partition.Binary {
			flat++
		}
	}
	return 28 + (flat+7)/8
}

// op appends o, cut into pieces of at most gatherPiece output bytes.
func (pl *CompressPlan) op(o GatherOp) {
	if o.N == 0 {
		return
	}
	per, in, out := int64(gatherPiece), int64(gatherPiece), int64(gatherPiece)
	switch o.Kind {
	case OpBits:
		per = 8 * gatherPiece // bits
	case OpRebase:
		per, in = gatherPiece/4, gatherPiece // values
	}
	for k := int64(0); k < o.N; k += per {
		q := o
		q.N = min(per, o.N-k)
		q.Src += k / per * in
		q.Dst += k / per * out
		pl.Ops = append(pl.Ops, q)
	}
}

func pad8(n int64) int64 { return (n + 7) &^ 7 }

// appendMeta appends the header, column descriptors and names of the SHFC
// block of rows [lo, hi) of sk, as partition.AppendBlock writes them
// (docs/format.md).
func appendMeta(dst []byte, sk *partition.Batch, lo, hi, size int) []byte {
	named := false
	for i := range sk.Columns {
		named = named || sk.Columns[i].Name != ""
	}
	start := len(dst)
	dst = append(dst, 'S', 'H', 'F', 'C', partition.BlockVersion, 0)
	if named {
		dst[start+5] = 1
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(sk.Columns)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(hi-lo))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(size))
	for i := range sk.Columns {
		c := &sk.Columns[i]
		var flags byte
		if c.Validity != nil {
			flags = 1
		}
		var d int
		if c.Type.VarWidth() {
			if hi > lo {
				d = int(c.Offsets[hi] - c.Offsets[lo])
			}
		} else {
			d = (hi - lo) * c.Type.Width()
		}
		dst = append(dst, byte(c.Type), flags, byte(c.Precision), byte(c.Scale))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
	}
	if named {
		names := len(dst)
		for i := range sk.Columns {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(sk.Columns[i].Name)))
		}
		for i := range sk.Columns {
			dst = append(dst, sk.Columns[i].Name...)
		}
		for (len(dst)-names)%8 != 0 {
			dst = append(dst, 0)
		}
	}
	return dst
}

// Gather runs the plan's gather program on the host: dst (Gathered
// bytes) receives every record's block from region. It is the kernel's
// reference.
func (pl *CompressPlan) Gather(dst, region []byte) {
	clear(dst)
	for _, o := range pl.Ops {
		src := region
		if o.FromMeta {
			src = pl.Meta
		}
		switch o.Kind {
		case OpCopy:
			copy(dst[o.Dst:o.Dst+o.N], src[o.Src:o.Src+o.N])
		case OpBits:
			for k := int64(0); k < (o.N+7)/8; k++ {
				v := uint32(src[o.Src+k]) >> o.Shift
				if rem := o.N - 8*k; o.Shift != 0 && rem > 8-int64(o.Shift) {
					v |= uint32(src[o.Src+k+1]) << (8 - o.Shift)
				}
				if rem := o.N - 8*k; rem < 8 {
					v &= 1<<rem - 1
				}
				dst[o.Dst+k] = byte(v)
			}
		case OpRebase:
			for k := int64(0); k < o.N; k++ {
				v := binary.LittleEndian.Uint32(src[o.Src+4*k:]) - uint32(o.Base)
				binary.LittleEndian.PutUint32(dst[o.Dst+4*k:], v)
			}
		}
	}
}

// Streams returns each record's lz4-java stream, as the kernels make it,
// from the payload (the region, or the gathered buffer): the reference of
// Compressor.Compress.
func (pl *CompressPlan) Streams(payload []byte, blockSize int) [][]byte {
	out := make([][]byte, len(pl.Records))
	for i, r := range pl.Records {
		out[i] = lz4ref.AppendStream(nil, payload[r.Off:r.Off+r.Len], blockSize)
	}
	return out
}

// check returns an ErrInvalid error unless every record lies inside the
// payload (the region of size bytes, or the gathered buffer) and every
// gather op inside its source and the gathered buffer: what the kernels
// read and write.
func (pl *CompressPlan) check(size int64) error {
	payload := size
	if pl.Gathered > 0 {
		payload = pl.Gathered
	}
	for i, r := range pl.Records {
		if r.Off < 0 || r.Len < 0 || r.Off > payload || r.Len > payload-r.Off {
			return fmt.Errorf("%w: record %d [%d, +%d) outside the payload of %d bytes", ErrInvalid, i, r.Off, r.Len, payload)
		}
	}
	for i, o := range pl.Ops {
		var in, out int64
		switch o.Kind {
		case OpCopy:
			in, out = o.N, o.N
		case OpBits:
			in, out = (o.N+int64(o.Shift)+7)/8, (o.N+7)/8
		case OpRebase:
			in, out = 4*o.N, 4*o.N
		default:
			return fmt.Errorf("%w: gather op %d: kind %d", ErrInvalid, i, o.Kind)
		}
		lim := size
		if o.FromMeta {
			lim = int64(len(pl.Meta))
		}
		if o.N < 0 || o.N > 1<<40 || o.Shift > 7 || o.Src < 0 || o.Src > lim-in || o.Dst < 0 || o.Dst > pl.Gathered-out {
			return fmt.Errorf("%w: gather op %d %+v outside its buffers", ErrInvalid, i, o)
		}
	}
	return nil
}

// compressJob is one framed block of the kernels: len bytes at src of the
// payload (0: a stream's end mark), framed at slot of the scratch buffer.
type compressJob struct {
	src, slot int64
	len       int32
}

// jobs cuts the plan's records into blocks of blockSize bytes and an end
// mark each; first[r] is the index of record r's first job (its end mark
// is first[r+1]-1), scratch the bytes the slots take.
func (pl *CompressPlan) jobs(blockSize int) (jobs []compressJob, first []int, scratch int64) {
	first = make([]int, len(pl.Records)+1)
	for i, r := range pl.Records {
		first[i] = len(jobs)
		for off := int64(0); off < r.Len; off += int64(blockSize) {
			n := min(r.Len-off, int64(blockSize))
			jobs = append(jobs, compressJob{src: r.Off + off, slot: scratch, len: int32(n)})
			scratch += (lz4ref.HeaderLen + n + 15) &^ 15
		}
		jobs = append(jobs, compressJob{src: 0, slot: scratch})
		scratch += (lz4ref.HeaderLen + 15) &^ 15
	}
	first[len(pl.Records)] = len(jobs)
	return jobs, first, scratch
}
