// Package partition holds the columnar batch model of shuffled: a table of
// typed columns in the Arrow/cuDF memory layout whose rows are grouped by
// reducer partition, together with its validation, Spark-compatible hash
// partitioning, and the two serializations that carry one partition's slice
// of a batch (a record) through compression into a map output: the block
// format of this package and spark-rapids' kudo tables (Format).
//
// The main invariant: every function that reads a batch's buffers by its
// lengths and offsets (serialization, partitioning, accessors) is only called
// on a batch that Validate accepted, so none of them indexes out of range;
// and the block decoder checks every length against its input before it
// allocates, so hostile bytes yield an error, never a panic.
package partition

import (
	"fmt"
	"math"
)

// Type is a column's logical type. Its numeric value is the type code of the
// block format (docs/format.md); the zero Type is invalid, so a column whose
// type was never set fails validation.
type Type uint8

// The column types. Fixed-width values are little-endian.
const (
	// Bool is one byte per row, 0 false and 1 true, as cuDF's BOOL8
	// (Arrow bit-packs booleans; GPUs hand us bytes). Any nonzero byte
	// reads as true.
	Bool Type = iota + 1
	// Int8 is a signed 8-bit integer.
	Int8
	// Int16 is a signed 16-bit integer.
	Int16
	// Int32 is a signed 32-bit integer.
	Int32
	// Int64 is a signed 64-bit integer.
	Int64
	// Float32 is an IEEE 754 binary32 value.
	Float32
	// Float64 is an IEEE 754 binary64 value.
	Float64
	// Date32 is an int32 count of days since 1970-01-01 (Spark DateType).
	Date32
	// TimestampMicros is an int64 count of microseconds since the Unix
	// epoch, UTC (Spark TimestampType).
	TimestampMicros
	// Decimal64 is an int64 unscaled value with a precision of 1 to 18
	// digits and a scale of 0 to precision: value = unscaled × 10^-scale
	// (Spark DecimalType(precision, scale); cuDF stores -scale).
	Decimal64
	// String is UTF-8 text: int32 offsets (rows+1) into a chars buffer.
	// The bytes are not checked for UTF-8 validity.
	String
	// Binary is a byte string, laid out as String.
	Binary
	// Decimal32 is an int32 unscaled value with a precision of 1 to 9
	// digits (Spark DecimalType(p <= 9, s), cuDF DECIMAL32).
	Decimal32
	// Decimal128 is a 16-byte two's-complement unscaled value, low 8
	// bytes first (little-endian), with a precision of 1 to 38 digits
	// (Spark DecimalType(p > 18, s), cuDF DECIMAL128).
	Decimal128
	// List is Spark's ArrayType (cuDF LIST): int32 offsets (rows+1) into
	// the rows of its one child column, which holds the elements of all
	// rows one after the other. No data.
	List
	// Struct is Spark's StructType (cuDF STRUCT): one child column per
	// field, each with the struct's rows. Only a validity bitmap of its
	// own; no offsets, no data.
	Struct
	// Map is Spark's MapType, laid out as cuDF lays it out: a List whose
	// one child is a Struct of two children, the keys and the values.
	Map
	// YearMonthInterval is Spark's YearMonthIntervalType: an int32 count
	// of months (spark-rapids' INT32).
	YearMonthInterval
	// DayTimeInterval is Spark's DayTimeIntervalType: an int64 count of
	// microseconds (spark-rapids' INT64).
	DayTimeInterval
	// Void is Spark's NullType, laid out as spark-rapids does (INT8): one
	// byte per row, every row null. A void column of rows > 0 has a
	// validity bitmap with the bits of its rows clear; its data bytes are
	// carried but mean nothing.
	Void

	maxType = Void
)

// MaxRows is the largest row count of a batch: cuDF's size_type and the
// int32 offsets of the layout bound rows and chars alike.
const MaxRows = math.MaxInt32

// The largest precision of each decimal type.
const (
	MaxDecimal32Precision  = 9
	MaxDecimal64Precision  = 18
	MaxDecimal128Precision = 38
)

// MaxNameLen is the longest column name, in bytes, that a block can carry.
const MaxNameLen = math.MaxUint16

// MaxColumns is the largest number of columns of a batch.
const MaxColumns = math.MaxUint16

var typeNames = [...]string{
	Bool:              "bool",
	Int8:              "int8",
	Int16:             "int16",
	Int32:             "int32",
	Int64:             "int64",
	Float32:           "float32",
	Float64:           "float64",
	Date32:            "date32",
	TimestampMicros:   "timestamp_us",
	Decimal64:         "decimal64",
	String:            "string",
	Binary:            "binary",
	Decimal32:         "decimal32",
	Decimal128:        "decimal128",
	List:              "list",
	Struct:            "struct",
	Map:               "map",
	YearMonthInterval: "interval_ym",
	DayTimeInterval:   "interval_dt",
	Void:              "void",
}

var typeWidths = [maxType + 1]int{
	Bool: 1, Int8: 1, Int16: 2, Int32: 4, Int64: 8, Float32: 4, Float64: 8,
	Date32: 4, TimestampMicros: 8, Decimal64: 8, Decimal32: 4, Decimal128: 16,
	YearMonthInterval: 4, DayTimeInterval: 8, Void: 1,
}

// MaxPrecision returns the largest precision of a decimal type and 0 for
// every other type.
func (t Type) MaxPrecision() int {
	switch t {
	case Decimal32:
		return MaxDecimal32Precision
	case Decimal64:
		return MaxDecimal64Precision
	case Decimal128:
		return MaxDecimal128Precision
	}
	return 0
}

// IsDecimal reports whether t is one of the decimal types.
func (t Type) IsDecimal() bool { return t.MaxPrecision() > 0 }

// String returns the type's name as ParseType accepts it.
func (t Type) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Valid reports whether t is one of the defined types.
func (t Type) Valid() bool { return t >= Bool && t <= maxType }

// Width returns the bytes per row of a fixed-width type and 0 for String,
// Binary, the nested types and invalid types.
func (t Type) Width() int {
	if t.Valid() {
		return typeWidths[t]
	}
	return 0
}

// VarWidth reports whether t is laid out as offsets into a byte buffer.
func (t Type) VarWidth() bool { return t == String || t == Binary }

// Nested reports whether t has child columns: List, Struct, Map.
func (t Type) Nested() bool { return t == List || t == Struct || t == Map }

// HasOffsets reports whether a column of type t has int32 offsets:
// String, Binary, List and Map.
func (t Type) HasOffsets() bool { return t.VarWidth() || t == List || t == Map }

// FixedWidth reports whether t is laid out as Width() bytes per row.
func (t Type) FixedWidth() bool { return t.Width() > 0 }

// ParseType returns the type that String names.
func ParseType(s string) (Type, error) {
	for t := Bool; t <= maxType; t++ {
		if typeNames[t] == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("partition: unknown type %q", s)
}

// Column is one typed column of a batch, laid out as Arrow and cuDF lay out
// a column without a slice offset: row i of the batch is element i.
type Column struct {
	// Name is the column's name; it may be empty and is at most MaxNameLen
	// bytes.
	Name string
	// Type is the column's logical type.
	Type Type
	// Precision and Scale describe a decimal column (Decimal32, Decimal64,
	// Decimal128) and are zero for every other type.
	Precision, Scale int8
	// Validity is a bitmap of at least ceil(rows/8) bytes, least
	// significant bit first: bit i set means row i is not null. Nil means
	// the column has no nulls.
	Validity []byte
	// Offsets, for String and Binary, holds rows+1 non-decreasing byte
	// offsets into Data, the first 0: row i is Data[Offsets[i]:
	// Offsets[i+1]]. For List and Map it holds rows+1 non-decreasing row
	// offsets into the child, the first 0: row i is the child's rows
	// [Offsets[i], Offsets[i+1]), and the child has Offsets[rows] rows
	// (or more, the excess ignored). A column of 0 rows may leave it
	// empty. Nil for every other type.
	Offsets []int32
	// Data holds rows × Type.Width() little-endian values for fixed-width
	// types, and the concatenated bytes of all rows for String and Binary.
	// It may be longer than needed; the excess is ignored. Nil for the
	// nested types.
	Data []byte
	// Children are the child columns of a nested type: one for List (the
	// elements), one Struct of two children (keys, values) for Map, one
	// per field for Struct (Name is the field's name). Nil for every
	// other type. A struct child has the struct's rows; a list child the
	// rows its parent's offsets reach.
	Children []Column
}

// flatCount returns the number of columns of cols and all their
// descendants (the flattened columns of the block format).
func flatCount(cols []Column) int {
	n := len(cols)
	for i := range cols {
		if cols[i].Children != nil {
			n += flatCount(cols[i].Children)
		}
	}
	return n
}

// hasNested reports whether any column of b has a nested type.
func (b *Batch) hasNested() bool {
	for i := range b.Columns {
		if b.Columns[i].Type.Nested() {
			return true
		}
	}
	return false
}

// childRange returns the rows of c's child that rows [start, end) of a
// List or Map column c reach.
func (c *Column) childRange(start, end int) (int, int) {
	if len(c.Offsets) == 0 {
		return 0, 0
	}
	return int(c.Offsets[start]), int(c.Offsets[end])
}

// Batch is a table of equally long columns whose rows are grouped by
// partition: partition p holds rows [PartitionOffsets[p],
// PartitionOffsets[p+1]).
type Batch struct {
	Columns []Column
	// Rows is the number of rows of every column, at most MaxRows.
	Rows int
	// PartitionOffsets holds numPartitions+1 non-decreasing row offsets,
	// the first 0 and the last Rows. Nil for a batch that is not
	// partitioned, such as one the block decoder returns.
	PartitionOffsets []int32
}

// NumPartitions returns the number of partitions of b, 0 when b is not
// partitioned.
func (b *Batch) NumPartitions() int {
	if len(b.PartitionOffsets) == 0 {
		return 0
	}
	return len(b.PartitionOffsets) - 1
}

// PartitionRows returns the row range [start, end) of partition p.
// It panics if p is out of range.
func (b *Batch) PartitionRows(p int) (start, end int) {
	return int(b.PartitionOffsets[p]), int(b.PartitionOffsets[p+1])
}

// IsNull reports whether row i of c is null.
func (c *Column) IsNull(i int) bool {
	return c.Validity != nil && c.Validity[i>>3]&(1<<(i&7)) == 0
}

// NullCount returns the number of null rows among the first rows rows.
func (c *Column) NullCount(rows int) int {
	if c.Validity == nil {
		return 0
	}
	return rows - countOnes(c.Validity, 0, rows)
}
