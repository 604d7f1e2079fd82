package partition

import (
	"fmt"
	"io"
)

// Format is how a columnar map output's records are serialized: the block
// format of this package or spark-rapids' kudo tables. The zero Format is
// SHFC.
type Format uint8

const (
	// SHFC is the block format (docs/format.md section 2): self-describing
	// blocks that `shuffled cat` and this package's Decoder read alone.
	SHFC Format = iota
	// Kudo is spark-rapids' kudo table (docs/format.md section 7), which a
	// spark-rapids reducer reads with the schema it brings.
	Kudo
)

// ParseFormat returns the format that String names: "shfc" or "kudo".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "shfc":
		return SHFC, nil
	case "kudo":
		return Kudo, nil
	}
	return SHFC, fmt.Errorf("%w: format %q, want shfc or kudo", ErrInvalidArgument, s)
}

func (f Format) String() string {
	switch f {
	case SHFC:
		return "shfc"
	case Kudo:
		return "kudo"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Valid reports whether f is SHFC or Kudo.
func (f Format) Valid() bool { return f <= Kudo }

// Size returns the exact length of the serialization of rows [rowStart,
// rowEnd) of b (BlockSize or KudoSize).
func (f Format) Size(b *Batch, rowStart, rowEnd int) int {
	if f == Kudo {
		return KudoSize(b, rowStart, rowEnd)
	}
	return BlockSize(b, rowStart, rowEnd)
}

// Write serializes rows [rowStart, rowEnd) of b to w (WriteSlice or
// WriteKudo).
func (f Format) Write(w io.Writer, b *Batch, rowStart, rowEnd int) (int64, error) {
	if f == Kudo {
		return WriteKudo(w, b, rowStart, rowEnd)
	}
	return WriteSlice(w, b, rowStart, rowEnd)
}

// Append appends the serialization of rows [rowStart, rowEnd) of b to dst
// (AppendBlock or AppendKudo).
func (f Format) Append(dst []byte, b *Batch, rowStart, rowEnd int) []byte {
	if f == Kudo {
		return AppendKudo(dst, b, rowStart, rowEnd)
	}
	return AppendBlock(dst, b, rowStart, rowEnd)
}

// Split splits rows [rowStart, rowEnd) of b into consecutive ranges whose
// serializations are at most maxSize bytes each, as SplitRows does for
// blocks.
func (f Format) Split(b *Batch, rowStart, rowEnd, maxSize int) []int {
	if f == Kudo {
		return splitRows(b, rowStart, rowEnd, maxSize, KudoSize)
	}
	return SplitRows(b, rowStart, rowEnd, maxSize)
}
