package gpu

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/shuffled/shuffled/errdefs"
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
	// Adler32 asks Compress for every stream's Adler-32 as well
	// (Compressed.Adler32), computed on the device.
	Adler32 bool

	pieces      []partition.KudoPiece  // addKudo's scratch
	blockPieces []partition.BlockPiece // addBlock's scratch
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
var ErrNotCovered = errdefs.New(errdefs.ErrUnsupported, "gpu: not covered by the compression plans")

// covered lists the column types the plans lay out, each a byte copy of
// fixed-width values, a validity bitmap, offsets and their data, or a
// nested column's offsets and children. A type added to package partition
// later is not covered until it is added here, with its tests.
var covered = map[partition.Type]bool{
	partition.Bool: true, partition.Int8: true, partition.Int16: true, partition.Int32: true,
	partition.Int64: true, partition.Float32: true, partition.Float64: true, partition.Date32: true,
	partition.TimestampMicros: true, partition.Decimal32: true, partition.Decimal64: true,
	partition.Decimal128: true, partition.String: true, partition.Binary: true,
	partition.List: true, partition.Struct: true, partition.Map: true,
	partition.YearMonthInterval: true, partition.DayTimeInterval: true, partition.Void: true,
}

// coveredFormats lists the payload formats the plans lay out.
var coveredFormats = map[partition.Format]bool{partition.SHFC: true, partition.Kudo: true}

// Covers returns nil if PlanColumnar lays out batches of format f with
// columns of types (every column at every depth), and an ErrNotCovered
// error naming the format or the first column it does not.
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
// buffer. l.Columns and meta list the columns at every depth in pre-order
// (Column.Children); host holds the host copies l.ReadHost makes: the
// offsets of String, Binary, List and Map columns, which are checked as
// partition.Batch.Validate checks them (the kernels read what they point
// at, and a list's offsets give its child's rows), and the bitmaps of
// Void columns, which must have every row null. A format or column type
// that Covers refuses is an ErrNotCovered error.
//
// The plan walks the columns as the CPU serializer does: a struct's
// children take its rows, a list's child the rows its offsets reach, so
// every column at every depth is cut at its own row range. A block's
// header comes from the host (Meta); its bitmaps are shifted to the
// slice's first row and its offsets rebased (OpBits, OpRebase), as
// partition.AppendBlockPlan lists them. A kudo table is its header (from
// the host, as partition.AppendKudoPlan makes it) and byte copies of whole
// validity bytes, verbatim offsets and data (OpCopy only); its zero
// padding is the gathered buffer's.
func PlanColumnar(f partition.Format, l Layout, meta []ColumnMeta, host HostBuffers, partitionRows []int64, regionSize int64, recordSize int) (*CompressPlan, error) {
	if !coveredFormats[f] {
		return nil, fmt.Errorf("%w: payload format %v", ErrNotCovered, f)
	}
	if err := l.Validate(regionSize); err != nil {
		return nil, err
	}
	if recordSize <= 0 {
		return nil, fmt.Errorf("%w: record size %d", ErrInvalid, recordSize)
	}
	n := len(l.Columns)
	if len(meta) != n || len(host.Offsets) != n || (host.Validity != nil && len(host.Validity) != n) {
		return nil, fmt.Errorf("%w: %d column metas, %d offsets and %d bitmaps for %d columns", ErrInvalid, len(meta), len(host.Offsets), len(host.Validity), n)
	}
	for i, c := range l.Columns {
		if !covered[c.Type] {
			return nil, fmt.Errorf("%w: column %d type %v", ErrNotCovered, i, c.Type)
		}
		if len(meta[i].Name) > partition.MaxNameLen {
			return nil, fmt.Errorf("%w: column %d name of %d bytes, more than %d", ErrInvalid, i, len(meta[i].Name), partition.MaxNameLen)
		}
		if !c.Type.HasOffsets() && host.Offsets[i] != nil {
			return nil, fmt.Errorf("%w: column %d: offsets for a %v column", ErrInvalid, i, c.Type)
		}
	}
	sk, err := skeleton(&l, meta, host)
	if err != nil {
		return nil, err
	}
	rows := l.Rows
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
	for _, c := range l.Columns {
		perBlock++
		if c.Validity.Length > 0 {
			perBlock++
		}
		if c.Type.HasOffsets() {
			perBlock++
		}
	}
	// An SHFC header: 16 bytes, 8 per column at every depth, and the
	// names section when a column has a name.
	names := 0
	for i := range meta {
		names += len(meta[i].Name)
	}
	header := 16 + 8*len(l.Columns)
	if names > 0 {
		header += int(pad8(int64(2*len(meta) + names)))
	}
	if f == partition.Kudo {
		header = kudoHeaderLen(&l)
	}
	pl := &CompressPlan{
		Records: make([]Record, 0, records),
		Ops:     make([]GatherOp, 0, 2*perBlock*records),
		Meta:    make([]byte, 0, records*header),
	}
	add := pl.addBlock
	if f == partition.Kudo {
		add = pl.addKudo
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
			if err := add(sk, &l, p-1, bounds[k-1], bounds[k]); err != nil {
				return nil, err
			}
		}
	}
	return pl, nil
}

// present is the placeholder bitmap of a skeleton's columns: only its
// presence matters to the plans.
var present = []byte{}

// skeleton returns the batch of l's columns (their trees, types, names,
// precisions and scales, host's offsets, a placeholder for each bitmap,
// no data) that the plans size and cut as the serializer would cut the
// batch, after checking each column's buffers against its rows and its
// offsets as partition.Batch.Validate does, and each Void column's bitmap
// for a valid row.
func skeleton(l *Layout, meta []ColumnMeta, host HostBuffers) (*partition.Batch, error) {
	sk := &partition.Batch{Rows: l.Rows, Columns: []partition.Column{}}
	// parents[d] is the column whose children depth d+1 fills.
	var stack []*partition.Column
	var left []int // children still to come, per stack entry
	err := l.walkRows(func(i, rows int) (int, error) {
		c := &l.Columns[i]
		if err := l.checkRows(i, rows); err != nil {
			return 0, err
		}
		sc := partition.Column{Name: meta[i].Name, Type: c.Type, Precision: meta[i].Precision, Scale: meta[i].Scale}
		if c.Validity.Length > 0 {
			sc.Validity = present
		}
		childRows := rows
		switch {
		case c.Type == partition.Void && rows > 0:
			if err := allNull(i, host, rows); err != nil {
				return 0, err
			}
		case c.Type.HasOffsets():
			o, err := checkOffsets(i, c, host.Offsets[i], rows)
			if err != nil {
				return 0, err
			}
			sc.Offsets = o
			if !c.Type.VarWidth() {
				childRows = 0
				if rows > 0 {
					childRows = int(o[rows])
				}
			}
		}
		if c.Type == partition.Struct {
			sc.Children = []partition.Column{}
		}
		// Attach sc to its parent, or to the batch.
		var dst *partition.Column
		if len(stack) == 0 {
			sk.Columns = append(sk.Columns, sc)
			dst = &sk.Columns[len(sk.Columns)-1]
		} else {
			top := len(stack) - 1
			p := stack[top]
			p.Children = append(p.Children, sc)
			dst = &p.Children[len(p.Children)-1]
			if left[top]--; left[top] == 0 {
				stack, left = stack[:top], left[:top]
			}
		}
		if c.Children > 0 {
			dst.Children = make([]partition.Column, 0, c.Children)
			stack, left = append(stack, dst), append(left, c.Children)
		}
		return childRows, nil
	})
	if err != nil {
		return nil, err
	}
	return sk, nil
}

// checkOffsets checks o, the host copy of column i's offsets, as
// partition.Batch.Validate checks a column's offsets for rows rows
// (partition.ValidateOffsets), and returns them cut to rows+1.
func checkOffsets(i int, c *Column, o []int32, rows int) ([]int32, error) {
	limit := partition.MaxRows
	if c.Type.VarWidth() {
		limit = int(min(c.Data.Length, partition.MaxRows))
	}
	if err := partition.ValidateOffsets(o, rows, limit); err != nil {
		return nil, fmt.Errorf("%w: column %d: %v", ErrInvalid, i, err)
	}
	if len(o) == 0 {
		return nil, nil
	}
	return o[:rows+1], nil
}

// allNull checks that the host copy of Void column i's bitmap has every
// one of rows rows null.
func allNull(i int, host HostBuffers, rows int) error {
	var v []byte
	if host.Validity != nil {
		v = host.Validity[i]
	}
	if len(v) < (rows+7)/8 {
		return fmt.Errorf("%w: column %d: a host copy of %d validity bytes for a void column of %d rows", ErrInvalid, i, len(v), rows)
	}
	valid := 0
	for k := range rows / 8 {
		valid += bits.OnesCount8(v[k])
	}
	if rem := rows % 8; rem > 0 {
		valid += bits.OnesCount8(v[rows/8] & (1<<rem - 1))
	}
	if valid != 0 {
		return fmt.Errorf("%w: column %d: void column: %d of %d rows valid in the validity bitmap, want every row null", ErrInvalid, i, valid, rows)
	}
	return nil
}

// addBlock adds the record of rows [lo, hi) of the batch sk describes:
// its header from the host, then the pieces partition.AppendBlockPlan
// lists, gathered from the region.
func (pl *CompressPlan) addBlock(sk *partition.Batch, l *Layout, p, lo, hi int) error {
	size := int64(partition.BlockSize(sk, lo, hi))
	if size > partition.MaxBlockSize {
		return fmt.Errorf("%w: partition %d rows [%d,%d) make a %d-byte block, more than %d", ErrInvalid, p, lo, hi, size, int64(partition.MaxBlockSize))
	}
	start := pl.Gathered
	metaOff := int64(len(pl.Meta))
	var n int
	pl.Meta, pl.blockPieces, n = partition.AppendBlockPlan(pl.Meta, pl.blockPieces[:0], sk, lo, hi)
	if int64(n) != size {
		return fmt.Errorf("gpu: block plan of partition %d rows [%d,%d) is %d bytes, BlockSize %d", p, lo, hi, n, size)
	}
	pl.op(GatherOp{Kind: OpCopy, FromMeta: true, N: int64(len(pl.Meta)) - metaOff, Src: metaOff, Dst: start})
	pos := start + int64(len(pl.Meta)) - metaOff
	for _, pc := range pl.blockPieces {
		lc := &l.Columns[max(pc.Column, 0)]
		switch pc.Section {
		case partition.BlockZeros:
			pos += int64(pc.Len)
		case partition.BlockValidity:
			pl.op(GatherOp{Kind: OpBits, Shift: uint8(pc.Off & 7), N: int64(pc.Len), Src: lc.Validity.Offset + int64(pc.Off>>3), Dst: pos})
			pos += int64(pc.Len+7) / 8
		case partition.BlockOffsets:
			pl.op(GatherOp{Kind: OpRebase, Base: pc.Base, N: int64(pc.Len), Src: lc.Offsets.Offset + 4*int64(pc.Off), Dst: pos})
			pos += 4 * int64(pc.Len)
		case partition.BlockData:
			pl.op(GatherOp{Kind: OpCopy, N: int64(pc.Len), Src: lc.Data.Offset + int64(pc.Off), Dst: pos})
			pos += int64(pc.Len)
		default:
			return fmt.Errorf("gpu: block plan piece %+v", pc)
		}
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

// kudoHeaderLen returns the header length of the kudo tables of l's
// columns: 28 bytes and a bit per flattened column (two per Binary
// column).
func kudoHeaderLen(l *Layout) int {
	if len(l.Columns) == 0 {
		return 28
	}
	flat := len(l.Columns)
	for i := range l.Columns {
		if l.Columns[i].Type == partition.Binary {
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
