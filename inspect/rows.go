package inspect

import (
	"bufio"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/shuffled/shuffled/partition"
)

// PartitionColumn names the column, first in every row, that holds the
// row's partition.
const PartitionColumn = "_partition"

// rowWriter prints rows. Its methods record the first write error, which
// err returns; after one they write nothing.
type rowWriter interface {
	batch(p int, b *partition.Batch)
	opaque(p int, rawBytes int64, preview []byte)
	err() error
	flush() error
}

func newRowWriter(f RowFormat, w *bufio.Writer) rowWriter {
	if f == CSV {
		return &csvWriter{w: w}
	}
	return &jsonWriter{w: w}
}

// columnNames returns the names rows print for b's columns: each column's
// name, or "_c{i}" (Spark's name for an unnamed column) when it is empty.
func columnNames(dst []string, b *partition.Batch) []string {
	dst = dst[:0]
	for i := range b.Columns {
		name := b.Columns[i].Name
		if name == "" {
			name = "_c" + strconv.Itoa(i)
		}
		dst = append(dst, name)
	}
	return dst
}

// opaqueColumns are the columns of an opaque partition's preview row:
// its decompressed length, then its first bytes in hex and as text with
// Go's escapes (\n, \x00, \u00e9 ...).
var opaqueColumns = []string{"raw_bytes", "hex", "text"}

// escapedText returns b as Go would quote it in ASCII, without the quotes.
func escapedText(b []byte) string {
	q := strconv.QuoteToASCII(string(b))
	return q[1 : len(q)-1]
}

// csvWriter prints RFC 4180 fields (lines end in \n, as encoding/csv
// writes them by default): a header line (_partition, then the
// column names) before the first row and again whenever the columns change,
// then one line per row. A null is an empty field; an empty value is "".
// Values are as partition.Column.AppendText renders them.
type csvWriter struct {
	w      *bufio.Writer
	header []string
	names  []string
	line   []byte
	werr   error
}

// writeLine writes c.line, keeping the first error.
func (c *csvWriter) writeLine() {
	if _, err := c.w.Write(c.line); err != nil && c.werr == nil {
		c.werr = err
	}
}

func (c *csvWriter) writeHeader(names []string) {
	if slices.Equal(c.header, names) && c.header != nil {
		return
	}
	c.header = append(c.header[:0], names...)
	c.line = append(c.line[:0], PartitionColumn...)
	for _, n := range names {
		c.line = append(c.line, ',')
		c.line = appendCSVField(c.line, []byte(n), true)
	}
	c.line = append(c.line, '\n')
	c.writeLine()
}

// appendCSVField appends one field, quoted when it holds a comma, a quote,
// a line break or leading or trailing space, or is empty but not null.
func appendCSVField(dst, f []byte, notNull bool) []byte {
	if !needsQuotes(f, notNull) {
		return append(dst, f...)
	}
	dst = append(dst, '"')
	for _, ch := range f {
		if ch == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, ch)
	}
	return append(dst, '"')
}

func needsQuotes(f []byte, notNull bool) bool {
	if len(f) == 0 {
		return notNull
	}
	if f[0] == ' ' || f[0] == '\t' || f[len(f)-1] == ' ' || f[len(f)-1] == '\t' {
		return true
	}
	for _, ch := range f {
		switch ch {
		case ',', '"', '\r', '\n':
			return true
		}
	}
	return false
}

func (c *csvWriter) batch(p int, b *partition.Batch) {
	if c.werr != nil {
		return
	}
	c.names = columnNames(c.names, b)
	c.writeHeader(c.names)
	var field []byte
	for i := range b.Rows {
		c.line = strconv.AppendInt(c.line[:0], int64(p), 10)
		for ci := range b.Columns {
			col := &b.Columns[ci]
			c.line = append(c.line, ',')
			if col.IsNull(i) {
				continue
			}
			if col.Type == partition.String {
				c.line = appendCSVField(c.line, col.Bytes(i), true)
				continue
			}
			// Other types render without anything to quote, except an
			// empty binary value.
			field = col.AppendText(field[:0], i)
			c.line = appendCSVField(c.line, field, true)
		}
		c.line = append(c.line, '\n')
		c.writeLine()
		if c.werr != nil {
			return
		}
	}
}

func (c *csvWriter) opaque(p int, rawBytes int64, preview []byte) {
	if c.werr != nil {
		return
	}
	c.writeHeader(opaqueColumns)
	c.line = strconv.AppendInt(c.line[:0], int64(p), 10)
	c.line = append(c.line, ',')
	c.line = strconv.AppendInt(c.line, rawBytes, 10)
	c.line = append(c.line, ',')
	c.line = appendCSVField(c.line, hex.AppendEncode(nil, preview), true)
	c.line = append(c.line, ',')
	c.line = appendCSVField(c.line, []byte(escapedText(preview)), true)
	c.line = append(c.line, '\n')
	c.writeLine()
}

func (c *csvWriter) err() error { return c.werr }

func (c *csvWriter) flush() error {
	if c.werr != nil {
		return c.werr
	}
	c.werr = c.w.Flush()
	return c.werr
}

// jsonWriter prints one JSON object per row: "_partition", then each column
// by name. Nulls are null; booleans, integers, floats and decimals are
// numbers (NaN and infinities, which JSON lacks, the strings "NaN",
// "Infinity" and "-Infinity"); dates, timestamps and strings are strings
// (invalid UTF-8 replaced by U+FFFD); binary is a hex string.
type jsonWriter struct {
	w     *bufio.Writer
	names []string
	keys  [][]byte // names as JSON strings, with the colon
	line  []byte
	werr  error
}

func (j *jsonWriter) setKeys(names []string) {
	if slices.Equal(j.names, names) && j.keys != nil {
		return
	}
	j.keys = j.keys[:0]
	for _, n := range names {
		k := appendJSONString(nil, []byte(n))
		j.keys = append(j.keys, append(k, ':'))
	}
}

func (j *jsonWriter) batch(p int, b *partition.Batch) {
	if j.werr != nil {
		return
	}
	names := columnNames(nil, b)
	j.setKeys(names)
	j.names = names
	for i := range b.Rows {
		j.line = append(j.line[:0], `{"`+PartitionColumn+`":`...)
		j.line = strconv.AppendInt(j.line, int64(p), 10)
		for ci := range b.Columns {
			j.line = append(j.line, ',')
			j.line = append(j.line, j.keys[ci]...)
			j.line = appendJSONValue(j.line, &b.Columns[ci], i)
		}
		j.line = append(j.line, "}\n"...)
		if _, err := j.w.Write(j.line); err != nil {
			j.werr = err
			return
		}
	}
}

func (j *jsonWriter) opaque(p int, rawBytes int64, preview []byte) {
	if j.werr != nil {
		return
	}
	j.line = append(j.line[:0], `{"`+PartitionColumn+`":`...)
	j.line = strconv.AppendInt(j.line, int64(p), 10)
	j.line = append(j.line, `,"raw_bytes":`...)
	j.line = strconv.AppendInt(j.line, rawBytes, 10)
	j.line = append(j.line, `,"hex":"`...)
	j.line = hex.AppendEncode(j.line, preview)
	j.line = append(j.line, `","text":`...)
	j.line = appendJSONString(j.line, []byte(escapedText(preview)))
	j.line = append(j.line, "}\n"...)
	if _, err := j.w.Write(j.line); err != nil {
		j.werr = err
	}
}

func (j *jsonWriter) err() error { return j.werr }

func (j *jsonWriter) flush() error {
	if j.werr != nil {
		return j.werr
	}
	j.werr = j.w.Flush()
	return j.werr
}

// appendJSONValue appends row i of c as a JSON value.
func appendJSONValue(dst []byte, c *partition.Column, i int) []byte {
	if c.IsNull(i) {
		return append(dst, "null"...)
	}
	switch c.Type {
	case partition.Bool, partition.Int8, partition.Int16, partition.Int32, partition.Int64,
		partition.Decimal32, partition.Decimal64, partition.Decimal128:
		return c.AppendText(dst, i)
	case partition.Float32, partition.Float64:
		switch f := c.Float(i); {
		case math.IsNaN(f):
			return append(dst, `"NaN"`...)
		case math.IsInf(f, 1):
			return append(dst, `"Infinity"`...)
		case math.IsInf(f, -1):
			return append(dst, `"-Infinity"`...)
		}
		return c.AppendText(dst, i)
	case partition.String:
		return appendJSONString(dst, c.Bytes(i))
	case partition.Date32, partition.TimestampMicros, partition.Binary:
		// Text without anything to escape.
		dst = append(dst, '"')
		dst = c.AppendText(dst, i)
		return append(dst, '"')
	}
	// Nested values, intervals and the rest: their text, which may hold
	// strings with quotes, backslashes or control characters, escaped.
	return appendJSONString(dst, c.AppendText(nil, i))
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(dst, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		ch := s[i]
		if ch < utf8.RuneSelf {
			switch {
			case ch == '"' || ch == '\\':
				dst = append(dst, '\\', ch)
			case ch == '\n':
				dst = append(dst, '\\', 'n')
			case ch == '\r':
				dst = append(dst, '\\', 'r')
			case ch == '\t':
				dst = append(dst, '\\', 't')
			case ch < 0x20 || ch == 0x7f:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xf])
			default:
				dst = append(dst, ch)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
