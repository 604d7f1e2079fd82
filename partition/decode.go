package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptBlock, fmt.Sprintf(format, args...))
}

// DecodeBlock decodes the block at the start of src and returns it as an
// unpartitioned batch together with the block's length. The batch's
// validity bitmaps and data alias src (decoding copies only offsets and
// names), so src must stay unchanged while the batch is in use. Every
// length is checked against src before anything is allocated, and
// allocations stay proportional to the block's length; malformed bytes
// give an error wrapping ErrCorruptBlock (or ErrBlockVersion), never a
// panic. A decoded batch passes Validate.
func DecodeBlock(src []byte) (*Batch, int, error) {
	size, err := parseHeader(src)
	if err != nil {
		return nil, 0, err
	}
	if size > len(src) {
		return nil, 0, corrupt("block length %d, past the end of the input (%d bytes)", size, len(src))
	}
	blk := src[:size]
	flags := blk[5]
	ncols := int(binary.LittleEndian.Uint16(blk[6:]))
	rows := int(binary.LittleEndian.Uint32(blk[8:]))
	pos := headerSize
	if pos+descriptorSize*ncols > size {
		return nil, 0, corrupt("%d column descriptors do not fit a block of %d bytes", ncols, size)
	}
	cols := make([]Column, ncols)
	dataLens := make([]int, ncols)
	for i := range cols {
		d := blk[pos : pos+descriptorSize]
		pos += descriptorSize
		c := &cols[i]
		c.Type, c.Precision, c.Scale = Type(d[0]), int8(d[2]), int8(d[3])
		if d[1]&^columnFlagsKnown != 0 {
			return nil, 0, corrupt("column %d: flags %#x, unknown bits set", i, d[1])
		}
		if d[1]&columnFlagNulls != 0 {
			c.Validity = blk[:0] // marks a validity section; set below
		}
		if err := c.checkType(); err != nil {
			return nil, 0, corrupt("column %d: %v", i, err)
		}
		dataLens[i] = int(binary.LittleEndian.Uint32(d[4:]))
	}
	if flags&blockFlagNames != 0 {
		if pos, err = decodeNames(blk, pos, cols); err != nil {
			return nil, 0, err
		}
	}
	d := &blockReader{blk: blk, pos: pos, descs: cols, lens: dataLens}
	var top []Column
	for d.next < len(cols) {
		c, err := d.column(rows, 0, "", len(top))
		if err != nil {
			return nil, 0, err
		}
		top = append(top, c)
	}
	if top == nil {
		top = []Column{}
	}
	if d.pos != size {
		return nil, 0, corrupt("block length %d, but its sections end at %d", size, d.pos)
	}
	return &Batch{Columns: top, Rows: rows}, size, nil
}

// blockReader reads the sections of a block's columns in the order of
// their descriptors (depth-first pre-order), building the column tree.
type blockReader struct {
	blk   []byte
	pos   int
	descs []Column // one per descriptor; Validity non-nil marks a section
	lens  []int    // the descriptors' length fields
	next  int      // the next descriptor
}

// column reads the next descriptor's column of rows rows and its
// children: top-level column k at depth 0, else child k of the column
// parent names in errors.
func (d *blockReader) column(rows, depth int, parent string, k int) (Column, error) {
	path := fmt.Sprintf("column %d", k)
	if depth > 0 {
		path = parent + fmt.Sprintf(".[%d]", k)
	}
	if depth > MaxNestingDepth {
		return Column{}, corrupt("%s: nested deeper than %d levels", path, MaxNestingDepth)
	}
	i := d.next
	if i >= len(d.descs) {
		return Column{}, corrupt("%s: the descriptors end before this child", path)
	}
	d.next++
	c := d.descs[i]
	if depth == 0 {
		path += fmt.Sprintf(" %q", c.Name)
	} else {
		path = parent + childStep(k, c.Name)
	}
	dl := d.lens[i]
	blk := d.blk
	if w := c.Type.Width(); w > 0 && dl != rows*w {
		return Column{}, corrupt("%s: data length %d, want %d rows × %d", path, dl, rows, w)
	}
	if c.Validity != nil {
		nb := (rows + 7) / 8
		if err := checkSection(blk, d.pos, nb); err != nil {
			return Column{}, corrupt("%s: validity: %v", path, err)
		}
		c.Validity = blk[d.pos : d.pos+nb : d.pos+nb]
		if r := rows & 7; r != 0 && c.Validity[nb-1]>>r != 0 {
			return Column{}, corrupt("%s: validity bits past row %d set", path, rows)
		}
		if c.Type == Void && rows > 0 && countOnes(c.Validity, 0, rows) != 0 {
			return Column{}, corrupt("%s: void column with valid rows", path)
		}
		d.pos = pad8(d.pos + nb)
	} else if c.Type == Void && rows > 0 {
		return Column{}, corrupt("%s: void column of %d rows without validity", path, rows)
	}
	if c.Type.HasOffsets() {
		if c.Type.Nested() && dl > MaxRows {
			return Column{}, corrupt("%s: child rows = %d, more than %d", path, dl, MaxRows)
		}
		ob := 4 * (rows + 1)
		if err := checkSection(blk, d.pos, ob); err != nil {
			return Column{}, corrupt("%s: offsets: %v", path, err)
		}
		off := make([]int32, rows+1)
		for j := range off {
			off[j] = int32(binary.LittleEndian.Uint32(blk[d.pos+4*j:]))
		}
		if err := ValidateOffsets(off, rows, dl); err != nil {
			return Column{}, corrupt("%s: %v", path, err)
		}
		if last := int(off[rows]); last != dl {
			what := "data length"
			if c.Type.Nested() {
				what = "child rows"
			}
			return Column{}, corrupt("%s: offsets[%d] = %d, want %s %d", path, rows, last, what, dl)
		}
		c.Offsets = off
		d.pos = pad8(d.pos + ob)
	}
	switch c.Type {
	case List, Map:
		child, err := d.column(dl, depth+1, path, 0)
		if err != nil {
			return Column{}, err
		}
		c.Children = []Column{child}
		if err := c.checkChildren(); err != nil {
			return Column{}, corrupt("%s: %v", path, err)
		}
	case Struct:
		if dl > len(d.descs)-d.next {
			return Column{}, corrupt("%s: %d children, but %d descriptors follow", path, dl, len(d.descs)-d.next)
		}
		c.Children = make([]Column, dl)
		for k := range c.Children {
			child, err := d.column(rows, depth+1, path, k)
			if err != nil {
				return Column{}, err
			}
			c.Children[k] = child
		}
	default:
		if err := checkSection(blk, d.pos, dl); err != nil {
			return Column{}, corrupt("%s: data: %v", path, err)
		}
		c.Data = blk[d.pos : d.pos+dl : d.pos+dl]
		d.pos = pad8(d.pos + dl)
	}
	return c, nil
}

// parseHeader checks the fixed header at the start of src and returns the
// block's length, which may exceed len(src).
func parseHeader(src []byte) (int, error) {
	if len(src) < headerSize {
		return 0, corrupt("%d bytes, shorter than the %d-byte header", len(src), headerSize)
	}
	if [4]byte(src[:4]) != blockMagic {
		return 0, corrupt("magic %q, want %q", src[:4], blockMagic[:])
	}
	if v := src[4]; v != BlockVersion {
		return 0, fmt.Errorf("%w: version %d, this reader reads %d", ErrBlockVersion, v, BlockVersion)
	}
	if f := src[5]; f&^blockFlagsKnown != 0 {
		return 0, corrupt("block flags %#x, unknown bits set", f)
	}
	if rows := binary.LittleEndian.Uint32(src[8:]); rows > MaxRows {
		return 0, corrupt("rows = %d, more than %d", rows, MaxRows)
	}
	size := int(binary.LittleEndian.Uint32(src[12:]))
	if size < headerSize || size%8 != 0 {
		return 0, corrupt("block length %d, not a multiple of 8 of at least %d", size, headerSize)
	}
	return size, nil
}

// checkType checks a decoded column's type, precision and scale.
func (c *Column) checkType() error {
	if !c.Type.Valid() {
		return fmt.Errorf("type = %d, not a known type", uint8(c.Type))
	}
	if mp := c.Type.MaxPrecision(); mp > 0 {
		if c.Precision < 1 || int(c.Precision) > mp || c.Scale < 0 || c.Scale > c.Precision {
			return fmt.Errorf("decimal precision, scale = %d, %d, want 1 to %d and 0 to precision for %v", c.Precision, c.Scale, mp, c.Type)
		}
	} else if c.Precision != 0 || c.Scale != 0 {
		return fmt.Errorf("precision, scale = %d, %d on a %v column, want 0, 0", c.Precision, c.Scale, c.Type)
	}
	return nil
}

// checkSection checks that n bytes from pos, padded to 8, lie in blk and
// that the padding is zero.
func checkSection(blk []byte, pos, n int) error {
	end := pad8(pos + n)
	if end > len(blk) {
		return fmt.Errorf("%d bytes at %d, past the block length %d", n, pos, len(blk))
	}
	for _, c := range blk[pos+n : end] {
		if c != 0 {
			return fmt.Errorf("nonzero padding after %d bytes at %d", n, pos)
		}
	}
	return nil
}

// decodeNames reads the names section at pos into cols and returns the
// position after it.
func decodeNames(blk []byte, pos int, cols []Column) (int, error) {
	lens := pos
	pos += 2 * len(cols)
	if pos > len(blk) {
		return 0, corrupt("names: %d lengths do not fit the block", len(cols))
	}
	total := 0
	for i := range cols {
		total += int(binary.LittleEndian.Uint16(blk[lens+2*i:]))
	}
	if err := checkSection(blk, lens, 2*len(cols)+total); err != nil {
		return 0, corrupt("names: %v", err)
	}
	if total == 0 {
		return 0, corrupt("names section present with every name empty")
	}
	for i := range cols {
		n := int(binary.LittleEndian.Uint16(blk[lens+2*i:]))
		cols[i].Name = string(blk[pos : pos+n])
		pos += n
	}
	return pad8(pos), nil
}

// DecodeBlocks decodes src, a concatenation of blocks (a partition's
// decompressed bytes may hold blocks from several records and runs), into
// one batch per block, in order. The batches alias src as DecodeBlock's
// do. An error names the block's index and byte offset.
func DecodeBlocks(src []byte) ([]*Batch, error) {
	var out []*Batch
	for off := 0; off < len(src); {
		b, n, err := DecodeBlock(src[off:])
		if err != nil {
			return out, fmt.Errorf("block %d at byte %d: %w", len(out), off, err)
		}
		out = append(out, b)
		off += n
	}
	return out, nil
}

// Decoder reads blocks one at a time from a stream, such as a
// decompressing reader over one partition of a map output.
type Decoder struct {
	r      io.Reader
	max    int
	off    int64
	blocks int
}

// NewDecoder returns a Decoder reading blocks from r that refuses blocks
// longer than maxBlockSize bytes (MaxBlockSize if maxBlockSize <= 0).
// Memory grows with the bytes actually read, never with a length the
// stream merely claims.
func NewDecoder(r io.Reader, maxBlockSize int) *Decoder {
	if maxBlockSize <= 0 || maxBlockSize > MaxBlockSize {
		maxBlockSize = MaxBlockSize
	}
	return &Decoder{r: r, max: maxBlockSize}
}

// Next returns the next block's batch, which owns its memory, or io.EOF
// after the last block. A stream that ends inside a block is an
// ErrCorruptBlock error.
func (d *Decoder) Next() (*Batch, error) {
	var hdr [headerSize]byte
	n, err := io.ReadFull(d.r, hdr[:])
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, d.wrap(d.truncated(err, n, headerSize))
	}
	size, err := parseHeader(hdr[:])
	if err != nil {
		return nil, d.wrap(err)
	}
	if size > d.max {
		return nil, d.wrap(fmt.Errorf("%w: block length %d, more than the limit %d", ErrBlockTooLarge, size, d.max))
	}
	// A fresh buffer per block: the batch aliases it. Copying through a
	// bytes.Buffer grows it only as bytes arrive.
	var buf bytes.Buffer
	buf.Write(hdr[:])
	m, err := io.CopyN(&buf, d.r, int64(size-headerSize))
	if err != nil {
		return nil, d.wrap(d.truncated(err, headerSize+int(m), size))
	}
	b, _, err := DecodeBlock(buf.Bytes())
	if err != nil {
		return nil, d.wrap(err)
	}
	d.off += int64(size)
	d.blocks++
	return b, nil
}

func (d *Decoder) truncated(err error, got, want int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("stream ends after %d of %d bytes", got, want)
	}
	return err
}

func (d *Decoder) wrap(err error) error {
	return fmt.Errorf("block %d at byte %d: %w", d.blocks, d.off, err)
}
