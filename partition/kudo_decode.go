package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/shuffled/shuffled/errdefs"
)

// ErrCorruptKudo is wrapped by every error for bytes that are not a kudo
// table as KudoSerializer writes it for the schema at hand.
var ErrCorruptKudo = errdefs.New(errdefs.ErrDataLoss, "partition: corrupt kudo table")

func corruptKudo(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptKudo, fmt.Sprintf(format, args...))
}

// KudoTable is one decoded kudo table.
type KudoTable struct {
	// RowOffset is the header's row offset: the table's first row in the
	// batch it was cut from (0 for a table without columns).
	RowOffset int
	// Rows is the header's row count, Columns its flattened column count.
	Rows, Columns int
	// Size is the table's length in bytes, header included.
	Size int
	// Batch holds the rows, with the schema's names and types: validity
	// shifted to start at bit 0 and offsets rebased to start at 0 (both
	// copied), data aliasing the input. It passes Validate. Nil when the
	// table was read without a schema.
	Batch *Batch
}

// kudoHeader is a parsed header.
type kudoHeader struct {
	offset, rows, validity, offsets, body, cols int
	size                                        int // header bytes
}

// parseKudoHeader parses the fixed part of a header (28 bytes).
func parseKudoHeader(src []byte) (kudoHeader, error) {
	if len(src) < kudoFixedHeader {
		return kudoHeader{}, corruptKudo("%d bytes, shorter than the %d-byte header", len(src), kudoFixedHeader)
	}
	if [4]byte(src[:4]) != kudoMagic {
		return kudoHeader{}, corruptKudo("magic %q, want %q", src[:4], kudoMagic[:])
	}
	var f [6]int
	names := [6]string{"row offset", "rows", "validity length", "offsets length", "body length", "columns"}
	for i := range f {
		v := int32(binary.BigEndian.Uint32(src[4+4*i:]))
		if v < 0 {
			return kudoHeader{}, corruptKudo("%s = %d, negative", names[i], v)
		}
		f[i] = int(v)
	}
	h := kudoHeader{offset: f[0], rows: f[1], validity: f[2], offsets: f[3], body: f[4], cols: f[5]}
	h.size = kudoFixedHeader + (h.cols+7)/8
	if h.rows == 0 {
		return h, corruptKudo("rows = 0: KudoSerializer writes no table of 0 rows")
	}
	if int64(h.offset)+int64(h.rows) > math.MaxInt32 {
		return h, corruptKudo("row offset %d + rows %d exceed %d", h.offset, h.rows, math.MaxInt32)
	}
	if h.cols == 0 && (h.offset|h.validity|h.offsets|h.body) != 0 {
		return h, corruptKudo("a table without columns has row offset, validity, offsets, body lengths %d, %d, %d, %d, want 0", h.offset, h.validity, h.offsets, h.body)
	}
	if int64(h.size)+int64(h.body) > MaxKudoTableSize {
		return h, corruptKudo("header %d + body %d bytes exceed %d", h.size, h.body, MaxKudoTableSize)
	}
	return h, nil
}

// DecodeKudo decodes the kudo table at the start of src with the schema of
// its columns. Everything KudoSerializer determines is checked: the magic,
// the flattened column count against the schema, every section length
// against what the header's row range and bitset imply, zero padding,
// offsets that never decrease, the body ending within src. Only the bits
// of the copied validity bytes outside the table's rows are free, as
// KudoSerializer copies them from its source. A nil schema reads the
// header alone (and checks that the body fits src); the table's Batch is
// then nil. Malformed bytes give an error wrapping ErrCorruptKudo, never
// a panic.
func DecodeKudo(src []byte, schema []Field) (*KudoTable, error) {
	h, err := parseKudoHeader(src)
	if err != nil {
		return nil, err
	}
	if h.size > len(src) {
		return nil, corruptKudo("%d columns need a %d-byte header, past the end of the input (%d bytes)", h.cols, h.size, len(src))
	}
	t := &KudoTable{RowOffset: h.offset, Rows: h.rows, Columns: h.cols, Size: h.size + h.body}
	if t.Size > len(src) {
		return nil, corruptKudo("table of %d bytes, past the end of the input (%d bytes)", t.Size, len(src))
	}
	bits := src[kudoFixedHeader:h.size]
	if r := h.cols & 7; r != 0 && bits[len(bits)-1]>>r != 0 {
		return nil, corruptKudo("has-validity bits past column %d set", h.cols)
	}
	if schema == nil {
		return t, nil
	}
	if want := kudoFieldsFlat(schema); h.cols != want {
		return nil, corruptKudo("%d flattened columns, the schema has %d", h.cols, want)
	}
	if h.cols == 0 {
		t.Batch = &Batch{Rows: h.rows, Columns: []Column{}}
		return t, nil
	}
	body := src[h.size:t.Size]
	if h.validity+h.offsets > len(body) {
		return nil, corruptKudo("validity and offsets (%d bytes) exceed the body length %d", h.validity+h.offsets, len(body))
	}
	r := &kudoReader{
		bits:     bits,
		validity: body[:h.validity],
		offsets:  body[h.validity : h.validity+h.offsets],
		data:     body[h.validity+h.offsets:],
	}
	cols := make([]Column, len(schema))
	for i := range schema {
		c, err := r.column(&schema[i], h.offset, h.rows, 0, fmt.Sprintf("column %d %q", i, schema[i].Name))
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	if want := pad4(h.size+r.v) - h.size; h.validity != want {
		return nil, corruptKudo("validity length %d, want %d for %d bytes after a %d-byte header", h.validity, want, r.v, h.size)
	}
	if err := checkZero(r.validity[r.v:]); err != nil {
		return nil, corruptKudo("validity padding: %v", err)
	}
	if h.offsets != r.o {
		return nil, corruptKudo("offsets length %d, want %d", h.offsets, r.o)
	}
	if want := h.validity + h.offsets + pad4(r.d); h.body != want {
		return nil, corruptKudo("body length %d, want %d (validity %d + offsets %d + data %d padded to 4)", h.body, want, h.validity, h.offsets, r.d)
	}
	if err := checkZero(r.data[r.d:]); err != nil {
		return nil, corruptKudo("data padding: %v", err)
	}
	t.Batch = &Batch{Rows: h.rows, Columns: cols}
	return t, nil
}

// kudoReader reads a table's flattened columns in order, each from its
// three sections: validity, offsets, data.
type kudoReader struct {
	bits                    []byte // the header's has-validity bitset
	validity, offsets, data []byte // the body's sections
	flat                    int    // the next flattened column
	v, o, d                 int    // bytes read from each section
}

// hasValidity reports the next flattened column's has-validity bit.
func (r *kudoReader) hasValidity() bool {
	f := r.flat
	r.flat++
	return r.bits[f>>3]>>(f&7)&1 != 0
}

// take returns the next n bytes of section sec (whose read count is *at).
func take(sec []byte, at *int, n int, what, path string) ([]byte, error) {
	if n > len(sec)-*at {
		return nil, corruptKudo("%s: %s: %d bytes at %d, past the section's %d bytes", path, what, n, *at, len(sec))
	}
	p := sec[*at : *at+n : *at+n]
	*at += n
	return p, nil
}

// column reads the slice (off, rows) of a column of field f and its
// children; the result holds the slice's rows, validity shifted to bit 0
// and offsets rebased to 0. path names the column in errors.
func (r *kudoReader) column(f *Field, off, rows, depth int, path string) (Column, error) {
	if depth > MaxNestingDepth {
		return Column{}, corruptKudo("%s: nested deeper than %d levels", path, MaxNestingDepth)
	}
	c := Column{Name: f.Name, Type: f.Type, Precision: f.Precision, Scale: f.Scale}
	if r.flat >= 8*len(r.bits) {
		return Column{}, corruptKudo("%s: past the header's %d flattened columns", path, 8*len(r.bits))
	}
	if r.hasValidity() {
		if rows == 0 {
			return Column{}, corruptKudo("%s: has-validity bit set on a slice of 0 rows", path)
		}
		first, nb := validitySpan(off, rows)
		raw, err := take(r.validity, &r.v, nb, "validity", path)
		if err != nil {
			return Column{}, err
		}
		c.Validity = make([]byte, (rows+7)/8)
		putBits(c.Validity, raw, off-8*first, rows)
	} else if f.Type == Void && rows > 0 {
		return Column{}, corruptKudo("%s: void column of %d rows without validity", path, rows)
	}
	if c.Type == Void && rows > 0 && countOnes(c.Validity, 0, rows) != 0 {
		return Column{}, corruptKudo("%s: void column with valid rows", path)
	}
	// Offsets: the child's (or chars') slice.
	childOff, childRows := 0, 0
	if f.Type.HasOffsets() {
		c.Offsets = []int32{0}
		if rows > 0 {
			raw, err := take(r.offsets, &r.o, 4*(rows+1), "offsets", path)
			if err != nil {
				return Column{}, err
			}
			base := int32(binary.LittleEndian.Uint32(raw))
			if base < 0 {
				return Column{}, corruptKudo("%s: offsets[0] = %d, negative", path, base)
			}
			off := make([]int32, rows+1)
			prev := base
			for j := range off {
				x := int32(binary.LittleEndian.Uint32(raw[4*j:]))
				if x < prev {
					return Column{}, corruptKudo("%s: offsets[%d] = %d, less than offsets[%d] = %d", path, j, x, j-1, prev)
				}
				off[j], prev = x-base, x
			}
			c.Offsets = off
			childOff, childRows = int(base), int(off[rows])
		}
	}
	switch f.Type {
	case Binary, String:
		if f.Type == Binary {
			if r.flat >= 8*len(r.bits) {
				return Column{}, corruptKudo("%s: byte child past the header's flattened columns", path)
			}
			if r.hasValidity() {
				return Column{}, corruptKudo("%s: binary's byte child has validity", path)
			}
		}
		d, err := take(r.data, &r.d, childRows, "data", path)
		if err != nil {
			return Column{}, err
		}
		c.Data = d
	case List, Map:
		if len(f.Children) != 1 {
			return Column{}, fmt.Errorf("%w: %s: a %v field with %d children, want 1", ErrInvalidArgument, path, f.Type, len(f.Children))
		}
		child, err := r.column(&f.Children[0], childOff, childRows, depth+1, path+childStep(0, f.Children[0].Name))
		if err != nil {
			return Column{}, err
		}
		c.Children = []Column{child}
	case Struct:
		c.Children = make([]Column, len(f.Children))
		for k := range f.Children {
			child, err := r.column(&f.Children[k], off, rows, depth+1, path+childStep(k, f.Children[k].Name))
			if err != nil {
				return Column{}, err
			}
			c.Children[k] = child
		}
	default:
		w := f.Type.Width()
		if w == 0 {
			return Column{}, fmt.Errorf("%w: %s: type %v", ErrInvalidArgument, path, f.Type)
		}
		d, err := take(r.data, &r.d, rows*w, "data", path)
		if err != nil {
			return Column{}, err
		}
		c.Data = d
	}
	return c, nil
}

// childStep names child i (its name, or its index) in a column path.
func childStep(i int, name string) string {
	if name != "" {
		return "." + name
	}
	return fmt.Sprintf(".[%d]", i)
}

// kudoFieldsFlat returns the flattened column count of schema: one per
// field at every depth, one more per Binary field.
func kudoFieldsFlat(schema []Field) int {
	n := len(schema)
	for i := range schema {
		if schema[i].Type == Binary {
			n++
		}
		n += kudoFieldsFlat(schema[i].Children)
	}
	return n
}

func checkZero(p []byte) error {
	for i, c := range p {
		if c != 0 {
			return fmt.Errorf("byte %d of %d is %#x, want 0", i, len(p), c)
		}
	}
	return nil
}

// DecodeKudoTables decodes src, a concatenation of kudo tables (a
// partition's decompressed bytes), table by table. An error names the
// table's index and byte offset.
func DecodeKudoTables(src []byte, schema []Field) ([]*KudoTable, error) {
	var out []*KudoTable
	for off := 0; off < len(src); {
		t, err := DecodeKudo(src[off:], schema)
		if err != nil {
			return out, fmt.Errorf("kudo table %d at byte %d: %w", len(out), off, err)
		}
		out = append(out, t)
		off += t.Size
	}
	return out, nil
}

// KudoDecoder reads kudo tables one at a time from a stream, as a
// spark-rapids reducer does: tables until the stream ends at a table
// boundary.
type KudoDecoder struct {
	r      io.Reader
	schema []Field
	max    int
	off    int64
	tables int
}

// NewKudoDecoder returns a KudoDecoder reading tables of schema (nil: the
// headers alone, see DecodeKudo) from r, refusing tables longer than
// maxSize bytes (MaxKudoTableSize if maxSize <= 0). Memory grows with the
// bytes actually read, never with a length the stream merely claims.
func NewKudoDecoder(r io.Reader, schema []Field, maxSize int) *KudoDecoder {
	if maxSize <= 0 || maxSize > MaxKudoTableSize {
		maxSize = MaxKudoTableSize
	}
	return &KudoDecoder{r: r, schema: schema, max: maxSize}
}

// Next returns the next table, which owns its memory, or io.EOF after the
// last one. A stream that ends inside a table is an ErrCorruptKudo error.
func (d *KudoDecoder) Next() (*KudoTable, error) {
	var fixed [kudoFixedHeader]byte
	n, err := io.ReadFull(d.r, fixed[:])
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, d.wrap(d.truncated(err, n, kudoFixedHeader))
	}
	h, err := parseKudoHeader(fixed[:])
	if err != nil {
		return nil, d.wrap(err)
	}
	size := h.size + h.body
	if size > d.max {
		return nil, d.wrap(fmt.Errorf("%w: kudo table of %d bytes, more than the limit %d", ErrBlockTooLarge, size, d.max))
	}
	var buf bytes.Buffer
	buf.Write(fixed[:])
	m, err := io.CopyN(&buf, d.r, int64(size-kudoFixedHeader))
	if err != nil {
		return nil, d.wrap(d.truncated(err, kudoFixedHeader+int(m), size))
	}
	t, err := DecodeKudo(buf.Bytes(), d.schema)
	if err != nil {
		return nil, d.wrap(err)
	}
	d.off += int64(size)
	d.tables++
	return t, nil
}

func (d *KudoDecoder) truncated(err error, got, want int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptKudo("stream ends after %d of %d bytes", got, want)
	}
	return err
}

func (d *KudoDecoder) wrap(err error) error {
	return fmt.Errorf("kudo table %d at byte %d: %w", d.tables, d.off, err)
}
