package protocol

import (
	"fmt"
	"math"
)

// Plane is the data plane that carries a batch's payload bytes.
type Plane uint8

const (
	// PlaneInline: the payload follows the layout inside the frame.
	PlaneInline Plane = 1
	// PlaneMemfd: the payload is Region of a sealed memfd that travels
	// with the frame as SCM_RIGHTS ancillary data (FlagFD).
	PlaneMemfd Plane = 2
	// PlaneCUDAIPC: the payload is Region of a device allocation named
	// by a CUDA IPC memory handle. Reserved: CPU builds answer
	// CodeUnsupported.
	PlaneCUDAIPC Plane = 3
)

func (p Plane) String() string {
	switch p {
	case PlaneInline:
		return "inline"
	case PlaneMemfd:
		return "memfd"
	case PlaneCUDAIPC:
		return "cuda-ipc"
	}
	return fmt.Sprintf("Plane(%d)", uint8(p))
}

// Region is a byte range of a memfd or a device allocation.
type Region struct {
	Offset, Length int64
}

// CUDAIPCHandleSize is the size of a CUDA IPC memory handle
// (CUipcMemHandle).
const CUDAIPCHandleSize = 64

// CUDAIPC names a device allocation exported by the client.
type CUDAIPC struct {
	Handle [CUDAIPCHandleSize]byte
	// Device is the client's CUDA device ordinal, a hint for the daemon.
	Device uint32
}

// Buffer is a byte range of a batch payload: Offset and Length are
// relative to the payload's first byte (Inline[0], or Region.Offset in
// the memfd or device allocation).
type Buffer struct {
	Offset, Length int64
}

// ColumnType is the type of a columnar column. Fixed-width values are
// little-endian; Bool8 is one byte per value (0 or 1), as in cuDF.
type ColumnType uint8

const (
	TypeBool8           ColumnType = 1
	TypeInt8            ColumnType = 2
	TypeInt16           ColumnType = 3
	TypeInt32           ColumnType = 4
	TypeInt64           ColumnType = 5
	TypeFloat32         ColumnType = 6
	TypeFloat64         ColumnType = 7
	TypeDate32          ColumnType = 8  // days since the epoch, int32
	TypeTimestampMicros ColumnType = 9  // microseconds since the epoch, UTC, int64
	TypeDecimal64       ColumnType = 10 // unscaled int64, Precision <= 18
	TypeString          ColumnType = 11 // int32 offsets (rows+1) into UTF-8 data
	TypeBinary          ColumnType = 12 // int32 offsets (rows+1) into bytes
	TypeDecimal32       ColumnType = 13 // unscaled int32, Precision <= 9
	TypeDecimal128      ColumnType = 14 // unscaled int128 (low 64 bits first), Precision <= 38
	TypeList            ColumnType = 15 // int32 offsets (rows+1) into the rows of its one child
	TypeStruct          ColumnType = 16 // validity only; one child per field, each of the struct's rows
	TypeMap             ColumnType = 17 // a list whose one child is a struct of two children (keys, values)
	TypeIntervalYM      ColumnType = 18 // Spark YearMonthIntervalType: int32 months
	TypeIntervalDT      ColumnType = 19 // Spark DayTimeIntervalType: int64 microseconds
	TypeVoid            ColumnType = 20 // Spark NullType: 1 byte per row, every row null
)

var columnTypes = [...]struct {
	name         string
	width        int64 // bytes per value; 0 for variable width
	maxPrecision int32 // 0 for non-decimal types
}{
	TypeBool8:           {"bool8", 1, 0},
	TypeInt8:            {"int8", 1, 0},
	TypeInt16:           {"int16", 2, 0},
	TypeInt32:           {"int32", 4, 0},
	TypeInt64:           {"int64", 8, 0},
	TypeFloat32:         {"float32", 4, 0},
	TypeFloat64:         {"float64", 8, 0},
	TypeDate32:          {"date32", 4, 0},
	TypeTimestampMicros: {"timestamp_us", 8, 0},
	TypeDecimal64:       {"decimal64", 8, 18},
	TypeString:          {"string", 0, 0},
	TypeBinary:          {"binary", 0, 0},
	TypeDecimal32:       {"decimal32", 4, 9},
	TypeDecimal128:      {"decimal128", 16, 38},
	TypeList:            {"list", 0, 0},
	TypeStruct:          {"struct", 0, 0},
	TypeMap:             {"map", 0, 0},
	TypeIntervalYM:      {"interval_ym", 4, 0},
	TypeIntervalDT:      {"interval_dt", 8, 0},
	TypeVoid:            {"void", 1, 0},
}

// Nested reports whether t has child columns: list, struct, map.
func (t ColumnType) Nested() bool { return t == TypeList || t == TypeStruct || t == TypeMap }

// Known reports whether t is a column type of this protocol version.
func (t ColumnType) Known() bool { return t != 0 && int(t) < len(columnTypes) }

func (t ColumnType) String() string {
	if t.Known() {
		return columnTypes[t].name
	}
	return fmt.Sprintf("ColumnType(%d)", uint8(t))
}

// Width returns the bytes per value of a fixed-width type, 0 for
// variable-width or unknown types.
func (t ColumnType) Width() int {
	if t.Known() {
		return int(columnTypes[t].width)
	}
	return 0
}

// Column describes one column of a columnar batch in the Arrow/cuDF
// layout: an optional validity bitmap (LSB first, bit set = valid; empty
// = no nulls), int32 offsets for String and Binary, and the data.
type Column struct {
	Type ColumnType
	// Precision and Scale are Spark's DecimalType(precision, scale) for
	// decimal types, zero otherwise.
	Precision, Scale int32
	// Name is informative (logs, inspect), and a struct field's name; it
	// may be empty.
	Name                    string
	Validity, Offsets, Data Buffer
	// Children is the number of child columns of a nested type (list and
	// map: 1, struct: its fields), 0 for every other type. The children
	// follow their parent in ColumnarLayout.Columns, each with its own
	// children after it (depth-first pre-order).
	Children uint16
}

// MaxColumns bounds ColumnarLayout.Columns.
const MaxColumns = 1 << 14

// MaxColumnNameLen bounds Column.Name in bytes.
const MaxColumnNameLen = 255

// ColumnarLayout lays out a columnar batch: Rows rows, the columns, and
// the partition row offsets: partition p holds rows
// [PartitionRows[p], PartitionRows[p+1]); there are NumPartitions+1
// offsets, the first 0, the last Rows, non-decreasing.
type ColumnarLayout struct {
	Rows          int64
	Columns       []Column
	PartitionRows []int64
}

// OpaqueLayout lays out an opaque batch: partition p's serialized bytes
// are [PartitionOffsets[p], PartitionOffsets[p+1]) of the payload; there
// are NumPartitions+1 offsets, the first 0, the last the payload length,
// non-decreasing.
type OpaqueLayout struct {
	PartitionOffsets []int64
}

// Batch hands one partitioned batch of a map output to the daemon. The
// layout matching Kind describes the payload; Plane says where the
// payload bytes are.
//
//	u64 handle | u8 kind | u8 plane | u8 flags | u8 reserved |
//	layout (opaque or columnar) | data plane (inline, memfd or cuda-ipc)
//
// See docs/protocol.md for the layout and data plane encodings.
type Batch struct {
	Handle uint64
	Kind   PayloadKind
	Plane  Plane
	Flags  BatchFlags

	Opaque   OpaqueLayout   // Kind == KindOpaque
	Columnar ColumnarLayout // Kind == KindColumnar

	Inline []byte  // Plane == PlaneInline; aliases the frame when decoded
	Region Region  // Plane == PlaneMemfd or PlaneCUDAIPC
	IPC    CUDAIPC // Plane == PlaneCUDAIPC
}

func (*Batch) Type() Type { return TypeBatch }

// PayloadLen returns the payload length in bytes.
func (m *Batch) PayloadLen() int64 {
	if m.Plane == PlaneInline {
		return int64(len(m.Inline))
	}
	return m.Region.Length
}

func (m *Batch) Validate() error {
	if err := checkHandle("Batch", m.Handle); err != nil {
		return err
	}
	if err := checkKind("Batch", m.Kind); err != nil {
		return err
	}
	if err := m.checkFlags(); err != nil {
		return err
	}
	switch m.Plane {
	case PlaneInline:
		if len(m.Inline) > math.MaxUint32 {
			return invalid("Batch", "Inline", "%d bytes exceed %d", len(m.Inline), uint32(math.MaxUint32))
		}
	case PlaneMemfd, PlaneCUDAIPC:
		r := m.Region
		if r.Offset < 0 || r.Length < 0 || r.Offset > math.MaxInt64-r.Length {
			return invalid("Batch", "Region", "offset %d length %d is not a byte range", r.Offset, r.Length)
		}
	default:
		return fmt.Errorf("%w: Batch.Plane: %d, want %d (inline), %d (memfd) or %d (cuda-ipc)",
			ErrUnsupported, m.Plane, PlaneInline, PlaneMemfd, PlaneCUDAIPC)
	}
	n := m.PayloadLen()
	if m.Kind == KindOpaque {
		return m.Opaque.validate(n)
	}
	return m.Columnar.validate(n)
}

func checkOffsets(field string, offs []int64, last int64, what string) error {
	if n := len(offs); n < 2 || n > MaxPartitions+1 {
		return invalid("Batch", field, "%d offsets, want 2..%d (partitions+1)", n, MaxPartitions+1)
	}
	if offs[0] != 0 {
		return invalid("Batch", field+"[0]", "%d, want 0", offs[0])
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return invalid("Batch", fmt.Sprintf("%s[%d]", field, i), "%d below %s[%d] = %d", offs[i], field, i-1, offs[i-1])
		}
	}
	if l := offs[len(offs)-1]; l != last {
		return invalid("Batch", fmt.Sprintf("%s[%d]", field, len(offs)-1), "%d, want %s %d", l, what, last)
	}
	return nil
}

func (l *OpaqueLayout) validate(payloadLen int64) error {
	return checkOffsets("PartitionOffsets", l.PartitionOffsets, payloadLen, "payload length")
}

func (l *ColumnarLayout) validate(payloadLen int64) error {
	if l.Rows < 0 {
		return invalid("Batch", "Rows", "%d is negative", l.Rows)
	}
	if len(l.Columns) > MaxColumns {
		return invalid("Batch", "Columns", "%d columns, want 0..%d", len(l.Columns), MaxColumns)
	}
	// The columns are trees in pre-order: pending counts the children
	// still to come of each open nested column, rows the row count each
	// level's columns have (-1 below a list: only the bytes tell).
	type level struct {
		pending int
		rows    int64
	}
	stack := []level{{pending: -1, rows: l.Rows}}
	for i := range l.Columns {
		for len(stack) > 1 && stack[len(stack)-1].pending == 0 {
			stack = stack[:len(stack)-1]
		}
		top := &stack[len(stack)-1]
		if top.pending > 0 {
			top.pending--
		}
		c := &l.Columns[i]
		if err := c.validate(i, top.rows, payloadLen); err != nil {
			return err
		}
		if c.Children > 0 {
			rows := top.rows
			if c.Type != TypeStruct {
				rows = -1
			}
			stack = append(stack, level{pending: int(c.Children), rows: rows})
		}
	}
	for len(stack) > 1 && stack[len(stack)-1].pending == 0 {
		stack = stack[:len(stack)-1]
	}
	if len(stack) > 1 {
		return invalid("Batch", "Columns", "the columns end with %d children of a nested column still to come", stack[len(stack)-1].pending)
	}
	return checkOffsets("PartitionRows", l.PartitionRows, l.Rows, "Rows")
}

func (c *Column) validate(i int, rows, payloadLen int64) error {
	f := func(name string) string { return fmt.Sprintf("Columns[%d].%s", i, name) }
	if !c.Type.Known() {
		return fmt.Errorf("%w: Batch.%s: %d", ErrUnsupported, f("Type"), uint8(c.Type))
	}
	ct := columnTypes[c.Type]
	if ct.maxPrecision == 0 {
		if c.Precision != 0 || c.Scale != 0 {
			return invalid("Batch", f("Precision"), "(%d, %d) for %v, want (0, 0)", c.Precision, c.Scale, c.Type)
		}
	} else {
		if c.Precision < 1 || c.Precision > ct.maxPrecision {
			return invalid("Batch", f("Precision"), "%d out of range [1, %d] for %v", c.Precision, ct.maxPrecision, c.Type)
		}
		if c.Scale < 0 || c.Scale > c.Precision {
			return invalid("Batch", f("Scale"), "%d out of range [0, %d]", c.Scale, c.Precision)
		}
	}
	if err := checkText("Batch", f("Name"), c.Name, MaxColumnNameLen); err != nil {
		return err
	}
	switch {
	case (c.Type == TypeList || c.Type == TypeMap) && c.Children != 1:
		return invalid("Batch", f("Children"), "%d for %v, want 1", c.Children, c.Type)
	case !c.Type.Nested() && c.Children != 0:
		return invalid("Batch", f("Children"), "%d for %v, want 0", c.Children, c.Type)
	}
	for _, b := range []struct {
		name string
		buf  Buffer
	}{{"Validity", c.Validity}, {"Offsets", c.Offsets}, {"Data", c.Data}} {
		if b.buf.Offset < 0 || b.buf.Length < 0 || b.buf.Offset > payloadLen || b.buf.Length > payloadLen-b.buf.Offset {
			return invalid("Batch", f(b.name), "offset %d length %d outside the payload of %d bytes",
				b.buf.Offset, b.buf.Length, payloadLen)
		}
	}
	switch {
	case c.Type == TypeStruct && (c.Offsets.Length != 0 || c.Data.Length != 0):
		return invalid("Batch", f("Offsets"), "offsets, data lengths %d, %d for struct, want 0, 0", c.Offsets.Length, c.Data.Length)
	case c.Type.Nested() && c.Data.Length != 0:
		return invalid("Batch", f("Data"), "%d bytes for %v, want 0", c.Data.Length, c.Type)
	case ct.width > 0 && c.Offsets.Length != 0:
		return invalid("Batch", f("Offsets"), "%d bytes for fixed-width %v, want 0", c.Offsets.Length, c.Type)
	}
	if rows < 0 {
		// Below a list: the parent's offsets, checked by the server against
		// the bytes, give the row count.
		return nil
	}
	// Rows is bounded only by int64: compare by division, never multiply.
	need := rows / 8
	if rows%8 != 0 {
		need++
	}
	if v := c.Validity.Length; v != 0 && v < need {
		return invalid("Batch", f("Validity"), "%d bytes for %d rows, want 0 or >= %d", v, rows, need)
	}
	if ct.width > 0 {
		if rows > c.Data.Length/ct.width {
			return invalid("Batch", f("Data"), "%d bytes for %d rows of %v, want >= %d", c.Data.Length, rows, c.Type, rows)
		}
		return nil
	}
	if c.Type == TypeStruct || rows == 0 && c.Offsets.Length == 0 {
		return nil
	}
	if rows >= c.Offsets.Length/4 {
		return invalid("Batch", f("Offsets"), "%d bytes for %d rows of %v, want >= 4×(rows+1)", c.Offsets.Length, rows, c.Type)
	}
	return nil
}

const (
	columnFixedSize = 1 + 1 + 2 + 4 + 4 + 2 + 6*8 // without the name bytes
)

func (m *Batch) Append(dst []byte) []byte {
	dst = m.AppendHead(dst)
	if m.Plane == PlaneInline {
		dst = append(dst, m.Inline...)
	}
	return dst
}

// BatchFlags are a Batch's flag bits.
type BatchFlags uint8

// BatchLast marks the map output's last batch: no other Batch for it
// follows before Commit or Abort (a server announces FeatureLastBatch).
const BatchLast BatchFlags = 1 << 0

func (m *Batch) checkFlags() error {
	if unknown := m.Flags &^ BatchLast; unknown != 0 {
		return invalid("Batch", "Flags", "%#x has unknown bits %#x", uint8(m.Flags), uint8(unknown))
	}
	return nil
}

// AppendHead appends the payload encoding except the inline bytes, which
// come last: a writer can send the head and Inline with one writev
// instead of copying Inline. The head plus Inline is Append's output.
func (m *Batch) AppendHead(dst []byte) []byte {
	dst = appendU64(dst, m.Handle)
	dst = append(dst, uint8(m.Kind), uint8(m.Plane), uint8(m.Flags), 0)
	switch m.Kind {
	case KindOpaque:
		dst = appendI64s(dst, m.Opaque.PartitionOffsets)
	case KindColumnar:
		l := &m.Columnar
		dst = appendI64(dst, l.Rows)
		dst = appendU32(dst, uint32(len(l.Columns)))
		for i := range l.Columns {
			c := &l.Columns[i]
			dst = append(dst, uint8(c.Type), 0) // type, flags
			dst = appendU16(dst, c.Children)
			dst = appendI32(dst, c.Precision)
			dst = appendI32(dst, c.Scale)
			dst = appendString(dst, c.Name)
			for _, b := range [3]Buffer{c.Validity, c.Offsets, c.Data} {
				dst = appendI64(dst, b.Offset)
				dst = appendI64(dst, b.Length)
			}
		}
		dst = appendI64s(dst, l.PartitionRows)
	}
	switch m.Plane {
	case PlaneInline:
		dst = appendU32(dst, uint32(len(m.Inline)))
	case PlaneMemfd:
		dst = appendI64(dst, m.Region.Offset)
		dst = appendI64(dst, m.Region.Length)
	case PlaneCUDAIPC:
		dst = append(dst, m.IPC.Handle[:]...)
		dst = appendU32(dst, m.IPC.Device)
		dst = appendU32(dst, 0)
		dst = appendI64(dst, m.Region.Offset)
		dst = appendI64(dst, m.Region.Length)
	}
	return dst
}

// Unmarshal decodes a Batch; Inline aliases p.
func (m *Batch) Unmarshal(p []byte) error {
	d := decoder{msg: "Batch", p: p}
	*m = Batch{Handle: d.u64("Handle"), Kind: PayloadKind(d.u8("Kind")), Plane: Plane(d.u8("Plane")), Flags: BatchFlags(d.u8("Flags"))}
	d.zero("reserved", 1)
	if d.err != nil {
		return d.err
	}
	if err := m.checkFlags(); err != nil {
		return err
	}
	if err := checkKind("Batch", m.Kind); err != nil {
		return err
	}
	if m.Plane < PlaneInline || m.Plane > PlaneCUDAIPC {
		return m.Validate() // reports the plane
	}
	switch m.Kind {
	case KindOpaque:
		m.Opaque.PartitionOffsets = d.i64s("PartitionOffsets", MaxPartitions+1)
	case KindColumnar:
		l := &m.Columnar
		l.Rows = d.i64("Rows")
		if n := d.count("Columns", MaxColumns, columnFixedSize); n > 0 {
			l.Columns = make([]Column, n)
			for i := range l.Columns {
				c := &l.Columns[i]
				c.Type = ColumnType(d.u8("Columns.Type"))
				d.zero("Columns.Flags", 1)
				c.Children = d.u16("Columns.Children")
				c.Precision = d.i32("Columns.Precision")
				c.Scale = d.i32("Columns.Scale")
				c.Name = d.str("Columns.Name", MaxColumnNameLen)
				for _, b := range [3]*Buffer{&c.Validity, &c.Offsets, &c.Data} {
					b.Offset = d.i64("Columns.Buffer.Offset")
					b.Length = d.i64("Columns.Buffer.Length")
				}
			}
		}
		l.PartitionRows = d.i64s("PartitionRows", MaxPartitions+1)
	}
	switch m.Plane {
	case PlaneInline:
		n := d.u32("Inline.length")
		m.Inline = d.bytes("Inline", int(n))
	case PlaneMemfd:
		m.Region = Region{Offset: d.i64("Region.Offset"), Length: d.i64("Region.Length")}
	case PlaneCUDAIPC:
		copy(m.IPC.Handle[:], d.bytes("IPC.Handle", CUDAIPCHandleSize))
		m.IPC.Device = d.u32("IPC.Device")
		d.zero("IPC.reserved", 4)
		m.Region = Region{Offset: d.i64("Region.Offset"), Length: d.i64("Region.Length")}
	}
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}
